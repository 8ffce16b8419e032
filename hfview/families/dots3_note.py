"""dots3-note (Dots3NoteForCausalLM, and the text decoder of Dots3NoteForConditionalGeneration; model_type
dots3_note) -> llama.cpp `dots3note` (the converter's Dots3NoteModel, a DeepseekV2Model: deepseek_v2.py,
deepseek_v32.py).

DeepSeek's latent attention in two geometries: indexed full-attention layers (num_attention_heads, kv_lora_rank,
qk_nope_head_dim, v_head_dim, with DeepSeek Sparse Attention's lightning indexer) and sliding-window layers (the
swa_* keys: their own head count, kv_lora_rank and head widths), as layer_types says. The head count is written
per layer (an array); kv_b_proj splits into its key half (transposed) and value half with the geometry of its
layer (views.BlocksTransposed, views.RowSelection). Each layer has a per-head sigmoid output gate (g_proj ->
attn_gate) and an RMS norm over the shared rope key (k_rope_only_layernorm -> attn_k_norm). transformers rescales
the normalised query and key/value latents by sqrt(hidden_size / rank); the converter folds that into
q_a_layernorm / kv_a_layernorm where apply_mla_qkv_lora_rescale is true (a value step whose rank is the norm's
own width, so each layer kind gets its own). Over it DeepSeek's sigmoid router (noaux_tc, one group) and one
shared expert of the routed experts' width.

What the converter reads: transformers 5.24's Dots3NoteConfig keeps the keys of the top level as stated and
adds its text_config (Dots3NoteTextConfig.to_dict) over them: layer_types, a rope_parameters object per layer
kind ({"indexed_attention": ..., "sliding_attention": ...}), per_layer_config. TextModel then finds no
"full_attention" rope entry and writes no rope.freq_base (llama.cpp rotates the indexed layers at its default
10000), and freq_base_swa from the sliding entry; the swa_*, first_k_dense_replace and sliding_window_size keys
it reads from the top level as stated.

llama.cpp's dots3note rotates the indexer's rope part as NEOX halves (ggml_rope_ext(..., LLAMA_ROPE_TYPE_NEOX) on
indexer_q / indexer_k), while transformers' Dots3NoteTextIndexer rotates interleaved pairs: wherever index_topk is
below the context length the indexer can choose other keys. Measured on a tiny fixture at index_topk 4 of 16
positions: llama.cpp on the converter's own file misses transformers by NMSE 0.67 (the view equally); with only
transformers' indexer rotation changed to NEOX halves, 9.4e-7. The view writes the converter's bytes, and says so.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, Split, Tensor, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import u32
from ..views import BlocksTransposed, RowSelection, ValueStep, _times, latent_kv_halves
from ._parts.checks import silu_only
from ._parts.deepseek_moe import mixture_tensors
from ._parts.indexer import INDEXER_READS, check_indexer, indexer_parameters, indexer_tensors
from ._parts.latent import LATENT_HARMLESS, LATENT_READS, latent_parameters

ARCH = "dots3note"

# transformers 5.24's Dots3NoteTextConfig defaults (the fields it declares; layer_types, rope_parameters and
# head widths per layer kind are computed: normalise)
DEFAULTS = {
    "dots3_note": dict(vocab_size=152064, hidden_size=5120, intermediate_size=13824, moe_intermediate_size=1536,
                       num_hidden_layers=46, num_attention_heads=128, num_key_value_heads=128, n_shared_experts=1,
                       n_routed_experts=256, routed_scaling_factor=1.0, kv_lora_rank=512, q_lora_rank=1024,
                       qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=128, n_group=1, topk_group=1,
                       num_experts_per_tok=8, norm_topk_prob=True, hidden_act="silu", max_position_embeddings=524288,
                       initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True, pad_token_id=151659,
                       bos_token_id=151643, eos_token_id=151668, tie_word_embeddings=False, attention_bias=False,
                       attention_dropout=0.0, index_topk=2048, index_head_dim=128, index_n_heads=64, mlp_bias=False,
                       head_dim=256, output_router_logits=False),
}

SWA_KEYS = ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_q_lora_rank", "swa_kv_lora_rank",
            "swa_head_dim", "swa_qk_nope_head_dim", "swa_qk_rope_head_dim", "swa_v_head_dim")
READS = LATENT_READS | INDEXER_READS | frozenset(SWA_KEYS) | {
    "layer_types", "mlp_layer_types", "mlp_bias", "sliding_window_size", "sliding_window", "use_sliding_window",
    "use_dsa", "swa_rope_theta", "apply_mla_qkv_lora_rescale", "k_rope_only_layernorm", "attention_gate_type",
    "swa_attention_gate_type", "normalization", "final_norm", "moe_shared_expert_intermediate_size",
    "shared_experts_intermediate_size", "use_dynamic_rsf", "moe_gating_fp32"}
# the encoders' configs and the media token ids belong to Dots3NoteForConditionalGeneration's encoders, which the
# text decoder never reads; output_router_logits is a training switch
HARMLESS: Harmless = {**LATENT_HARMLESS, "vision_config": ANY, "audio_config": ANY, "image_token_id": ANY,
                      "video_token_id": ANY, "audio_token_id": ANY, "output_router_logits": ANY}

SLIDING, INDEXED = "sliding_attention", "indexed_attention"
_LAYER = re.compile(r"layers\.(\d+)\.")


def _layer(name: str) -> int:
    return int(_LAYER.search(name).group(1))


def _geometry(h: dict, bid: int) -> tuple[int, int, int]:
    """(heads, qk_nope_head_dim, v_head_dim) of layer `bid`."""
    if h["layer_types"][bid] == SLIDING:
        return h["swa_num_attention_heads"], h["swa_qk_nope_head_dim"], h["swa_v_head_dim"]
    return h["num_attention_heads"], h["qk_nope_head_dim"], h["v_head_dim"]


def _kv_b(sources, h):
    src = sources[0]
    n_head, nope, v = _geometry(h, _layer(src.name))
    if len(src.shape) != 2 or src.shape[0] != n_head * (nope + v):
        raise CheckpointError(f"tensor {src.name!r} has shape {list(src.shape)}: kv_b_proj of this "
                              f"{h['layer_types'][_layer(src.name)]} layer should have {n_head} heads x ({nope} key "
                              f"+ {v} value) = {n_head * (nope + v)} rows")
    return src, n_head, nope, v


def key_half(sources, h):
    src, n_head, nope, v = _kv_b(sources, h)
    return BlocksTransposed(src, latent_kv_halves(n_head, nope, v)[0], f"key rows of {n_head} heads, transposed")


def value_half(sources, h):
    src, n_head, nope, v = _kv_b(sources, h)
    return RowSelection(src, latent_kv_halves(n_head, nope, v)[1], f"value rows of {n_head} heads",
                        presented=(n_head, v, src.shape[1]))


def _lora_rescale(h: dict) -> tuple:
    """sqrt(hidden_size / rank) folded into a latent's RMS norm, the rank being the norm's own width, in the
    converter's working dtype (views.to_working: bf16 widened to f32)."""
    if not h.get("apply_mla_qkv_lora_rescale"):
        return ()
    hidden = h["hidden_size"]
    return (ValueStep("x sqrt(hidden_size / rank)", lambda x: _times(x, math.sqrt(hidden / x.shape[-1]))),)


_A = "model.layers.{bid}.self_attn."
ATTENTION = (
    # Dots3NoteForConditionalGeneration's encoders: the converter's text model drops them (its mmproj reads them)
    Skip("vision_encoder.{rest}"),
    Skip("audio_encoder.{rest}"),
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(f"{_A}q_a_proj.weight", GGUF.ATTN_Q_A.weight),
    Tensor(f"{_A}q_a_layernorm.weight", GGUF.ATTN_Q_A_NORM.weight, steps=_lora_rescale),
    Tensor(f"{_A}q_b_proj.weight", GGUF.ATTN_Q_B.weight),
    Tensor(f"{_A}kv_a_proj_with_mqa.weight", GGUF.ATTN_KV_A_MQA.weight),
    Tensor(f"{_A}kv_a_layernorm.weight", GGUF.ATTN_KV_A_NORM.weight, steps=_lora_rescale),
    Split(f"{_A}kv_b_proj.weight", ((GGUF.ATTN_K_B.weight, key_half), (GGUF.ATTN_V_B.weight, value_half))),
    Tensor(f"{_A}k_rope_only_layernorm.weight", GGUF.ATTN_K_NORM.weight),
    Tensor(f"{_A}g_proj.weight", GGUF.ATTN_GATE.weight),
    Tensor(f"{_A}o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
)
# the indexer in the indexed layers only (llama.cpp checks which by attention.indexer.types)
TENSORS = (*ATTENTION, *indexer_tensors(required=False), *mixture_tensors())


def _both_kinds(types) -> bool:
    return SLIDING in types and INDEXED in types and not set(types) - {SLIDING, INDEXED}


REFUSE = (
    silu_only(ARCH),
    # `is True` (here and below): a tuple (True,) would also let 1 pass
    *(Refuse(key, lambda v: v is True, f"transformers' Dots3Note and llama.cpp's {ARCH} always run the indexer and "
             f"the rope-key norm (the converter refuses {key} false)", default=True)
      for key in ("use_dsa", "k_rope_only_layernorm")),
    Refuse("apply_mla_qkv_lora_rescale", lambda v: v is True, "transformers' Dots3Note always rescales the normalised "
           "latents by sqrt(hidden_size / rank), and the converter folds that into the latent norms only under "
           "apply_mla_qkv_lora_rescale true: without it llama.cpp would run this checkpoint wrong"),
    *(Refuse(key, ("headwise",), f"llama.cpp's {ARCH} gates each head by one sigmoid only", default="headwise")
      for key in ("attention_gate_type", "swa_attention_gate_type")),
    *(Refuse(key, ("RMSNorm",), f"llama.cpp's {ARCH} normalises by RMSNorm only", default="RMSNorm")
      for key in ("normalization", "final_norm")),
    Refuse("moe_layer_freq", (1,), f"llama.cpp's {ARCH} makes every layer after first_k_dense_replace a mixture",
           default=1),
    Refuse("tie_word_embeddings", unset, "the converter writes output.weight from lm_head, which a tied checkpoint "
           "does not store"),
    Refuse("layer_types", _both_kinds, f"llama.cpp's {ARCH} needs indexed and sliding layers (it reads the window "
           f"and the sliding rope base as required keys)"),
    Refuse(f"rope_parameters.{INDEXED}.rope_theta", (10000.0,), "under transformers 5.24 the converter writes no "
           "rope.freq_base for dots3-note (its config keeps the indexed layers' rope under \"indexed_attention\", "
           "and the converter looks for \"full_attention\"), so llama.cpp would rotate those layers at its default "
           "10000 and this checkpoint would run wrong"),
)


def check(h: dict, path: Path) -> None:
    missing = [k for k in (*SWA_KEYS, "sliding_window_size", "first_k_dense_replace") if k not in h]
    if missing:
        raise ConfigError(f"{path}: {', '.join(missing)} not stated: the converter reads them from config.json's top "
                          f"level (transformers 5.24's Dots3NoteTextConfig folds them away and fills no value the "
                          f"converter sees), so it cannot convert this checkpoint; state them as releases do")
    if h.get("use_dynamic_rsf") or h.get("moe_gating_fp32"):
        raise ConfigError(f"{path}: use_dynamic_rsf / moe_gating_fp32: the converter does not convert them")
    if h.get("scoring_func") != "sigmoid" or h.get("topk_method", "noaux_tc") != "noaux_tc":
        raise ConfigError(f"{path}: scoring_func {h.get('scoring_func')!r}, topk_method {h.get('topk_method')!r}: "
                          f"transformers' Dots3Note scores experts by sigmoid with the selection bias (noaux_tc), "
                          f"and the converter converts only a config stating scoring_func \"sigmoid\"")
    if h.get("n_group", 1) != 1 or h.get("topk_group", 1) != 1:
        raise ConfigError(f"{path}: n_group {h.get('n_group')!r}, topk_group {h.get('topk_group')!r}: the converter "
                          f"converts no grouped routing for dots3-note")
    if h.get("attention_bias") or h.get("mlp_bias"):
        raise ConfigError(f"{path}: attention_bias / mlp_bias true: llama.cpp's {ARCH} has no such biases")
    if h.get("q_lora_rank") is None or h["swa_q_lora_rank"] != h["q_lora_rank"]:
        raise ConfigError(f"{path}: q_lora_rank {h.get('q_lora_rank')!r}, swa_q_lora_rank {h['swa_q_lora_rank']!r}: "
                          f"llama.cpp's {ARCH} reads one query rank for both layer kinds")
    if h["swa_qk_rope_head_dim"] != h["qk_rope_head_dim"]:
        raise ConfigError(f"{path}: swa_qk_rope_head_dim {h['swa_qk_rope_head_dim']} is not qk_rope_head_dim "
                          f"{h['qk_rope_head_dim']}: llama.cpp's {ARCH} has one rope width")
    if h["swa_head_dim"] != h["swa_qk_nope_head_dim"] + h["swa_qk_rope_head_dim"]:
        raise ConfigError(f"{path}: swa_head_dim {h['swa_head_dim']} is not swa_qk_nope_head_dim + "
                          f"swa_qk_rope_head_dim")
    for heads, kv in (("num_attention_heads", "num_key_value_heads"), ("swa_num_attention_heads",
                                                                      "swa_num_key_value_heads")):
        if h[kv] != h[heads]:
            raise ConfigError(f"{path}: {kv} {h[kv]} is not {heads} {h[heads]}: latent attention expands keys "
                              f"and values for every query head")
    shared = h.get("moe_shared_expert_intermediate_size", h.get("shared_experts_intermediate_size", 1536))
    if shared != h["moe_intermediate_size"] * h["n_shared_experts"]:
        raise ConfigError(f"{path}: moe_shared_expert_intermediate_size {shared} is not moe_intermediate_size x "
                          f"n_shared_experts ({h['moe_intermediate_size']} x {h['n_shared_experts']}): llama.cpp's "
                          f"{ARCH} sizes the shared expert so")
    for kind, rope in h["rope_parameters"].items():
        if set(rope) - {"rope_type", "rope_theta", "partial_rotary_factor"} or rope.get("rope_type") != "default":
            raise ConfigError(f"{path}: rope {rope!r} for the {kind} layers: the view reads dots3-note's plain rope "
                              f"only (rope_theta, swa_rope_theta), as releases state it")
    check_indexer(h, path, ARCH)


def normalise(h: dict) -> dict:
    """Dots3NoteTextConfig.__post_init__ as the converter sees it: layer_types from use_sliding_window (indexed
    layers 0, 1 and every 4th from 1), the rope per layer kind, mlp_layer_types; head_dim, which the converter
    drops."""
    n = h["num_hidden_layers"]
    if h.get("layer_types") is None:
        sliding = h.get("use_sliding_window", True)
        h["layer_types"] = [INDEXED if not sliding or i < 2 or i % 4 == 1 else SLIDING for i in range(n)]
    if h.get("use_dsa", True) is False:
        h["layer_types"] = ["full_attention" if t == INDEXED else t for t in h["layer_types"]]
    stated = h.get("rope_parameters") or h.get("rope_scaling") or {}
    thetas = {INDEXED: h.get("rope_theta", stated.get("rope_theta", 80000000.0)),
              SLIDING: h.get("swa_rope_theta", 50000.0)}
    kinds = sorted(set(h["layer_types"]))
    if not any(isinstance(v, dict) for v in stated.values()):  # one object (or rope_theta alone) for every kind
        stated = {t: {**stated, "rope_type": stated.get("rope_type", stated.get("type", "default")),
                      "rope_theta": thetas.get(t, thetas[INDEXED])} for t in kinds}
    h["rope_parameters"] = stated
    h.pop("head_dim", None)
    return h


def extra_blocks(h: dict) -> int:
    return 0  # no next-token-prediction block in this view: model.mtp.* is refused as an unknown tensor


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """Dots3NoteModel.set_gguf_parameters: DeepseekV2Model's entries with the head count per layer, then the window
    and its pattern, the sliding layers' latent geometry and the indexer's sizes and layers."""
    n = h["num_hidden_layers"]
    sliding = [h["layer_types"][i] == SLIDING for i in range(n)]
    heads = KV(Keys.Attention.HEAD_COUNT.format(arch=ARCH), ValueType.ARRAY,
               [h["swa_num_attention_heads"] if s else h["num_attention_heads"] for s in sliding], ValueType.INT32)
    kv = [heads if k.key == heads.key else k for k in latent_parameters(h, block_count, file_type, ARCH)]
    swa_rank = h["swa_kv_lora_rank"]
    kv += [u32(Keys.Attention.SLIDING_WINDOW.format(arch=ARCH), h["sliding_window_size"]),
           KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch=ARCH), ValueType.ARRAY, sliding, ValueType.BOOL),
           u32(Keys.Attention.KV_LORA_RANK_SWA.format(arch=ARCH), swa_rank),
           u32(Keys.Attention.KEY_LENGTH_SWA.format(arch=ARCH), swa_rank + h["swa_qk_rope_head_dim"]),
           u32(Keys.Attention.VALUE_LENGTH_SWA.format(arch=ARCH), swa_rank),
           u32(Keys.Attention.KEY_LENGTH_MLA_SWA.format(arch=ARCH),
               h["swa_qk_nope_head_dim"] + h["swa_qk_rope_head_dim"]),
           u32(Keys.Attention.VALUE_LENGTH_MLA_SWA.format(arch=ARCH), h["swa_v_head_dim"])]
    kv += indexer_parameters(h, ARCH)
    kv.append(KV(Keys.Attention.Indexer.TYPES.format(arch=ARCH), ValueType.ARRAY, [not s for s in sliding],
                 ValueType.BOOL))
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    """Dots3NoteModel.set_vocab: byte-level BPE, with <|endofassistant|> (an added token) as the end of turn."""
    from hfview.tokenizer.special import read_tokenizer_json
    from hfview.tokenizer.vocab import MODEL, PRE, TOKEN_TYPE, TOKENS, SpecialVocab, bpe_tokens
    from hfview.tokenizer.writer import KVWriter

    tok_path = Path(model_dir) / "tokenizer.json"
    added = {t.get("content"): t.get("id") for t in read_tokenizer_json(tok_path).get("added_tokens", [])} \
        if tok_path.is_file() else {}
    if "<|endofassistant|>" not in added:
        raise ConfigError(f"{tok_path}: no added token <|endofassistant|>: the converter takes it as dots3-note's end "
                          f"of turn and stops without it")
    tokens, types, pre = bpe_tokens(model_dir, h)
    w = KVWriter()
    w.add_string(MODEL, "gpt2")
    w.add_string(PRE, pre)
    w.add_array(TOKENS, tokens)
    w.add_array(TOKEN_TYPE, types)
    special = SpecialVocab(model_dir, load_merges=True)
    special.set_special_token("eot", added["<|endofassistant|>"])
    special.write(w)
    return w.kvs()


FAMILY = Family(
    name="dots3_note",
    gguf_arch=ARCH,
    architectures=("Dots3NoteForCausalLM", "Dots3NoteForConditionalGeneration"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    # llama.cpp's dots3note slides on the layers sliding_window_pattern marks
    runner=RunnerFacts(llama_cpp_applies_window=True),
    aliases={"num_local_experts": "n_routed_experts"},  # Dots3NoteTextConfig's attribute map
    notes={"ceiling": "llama.cpp's dots3note rotates the indexer's rope part as NEOX halves, transformers as "
                      "interleaved pairs: past index_topk positions the indexer may keep other keys (tiny fixture at "
                      "index_topk 4 of 16: NMSE 0.67 on the converter's own file too)",
           "rope_theta": "refused unless 10000: under transformers 5.24 the converter writes no rope.freq_base "
                         "(the indexed layers' rope sits under \"indexed_attention\"), so llama.cpp rotates at 10000"},
)
