"""GLM-5.3-Flash (Glm5NextForConditionalGeneration, its text decoder: model_type glm5_next_text) -> llama.cpp
`glm5-next` (the converter's Glm5NextModel).

The text decoder under model.language_model. (the converter strips the prefix and drops the vision tower's
model.visual.* tensors). A hybrid of Kimi Delta Attention layers (hfview/families/kimi_linear.py's tensors: q/k/v
projections through their own causal short convolutions, presented (1, channels, 1, kernel); the low-rank forget
gate with dt_bias as the dt "projection"'s bias and A = -exp(A_log) per head; beta; the sigmoid-gated output norm)
and, where layer_types says "indexed_attention" (or, as GLM-5.3-Flash's config.json and transformers' legacy name
have it, "deepseek_sparse_attention"), DeepSeek's latent attention without rope (qk_rope_head_dim 0,
kv_b_proj split into attn_k_b transposed and attn_v_b, hfview/families/deepseek_v2.py) with a DSA indexer whose
keys are pooled index_kpool at a time (index_kpool_compress_ape / _gate, written as indexer_compressor_*). Every
layer's residual is hc_mult streams mixed by mHC (hc_attn_* / hc_ffn_*: a mixing matrix, a base and three
scales, Sinkhorn-normalised); the streams are averaged before the final norm (no tensor). Then per
first_k_dense_replace leading dense SwiGLUs, else DeepSeek-V3's sigmoid router with a selection bias, stacked
experts and a shared expert; every SwiGLU (dense, routed and shared) clamped at swiglu_limit.

KV heads are written per layer (0 on delta layers, 1 on latent ones); the layer-norm epsilon is the converter's
constant 1e-6 (the indexer's LayerNorm). The next-token-prediction layers stored after num_hidden_layers are
written, as the converter writes them without --no-mtp: block_count counts them, llama.cpp runs the trunk.
The hc, indexer-compressor, A, dt and selection-bias tensors are kept F32 at every outtype
(Glm5NextModel.tensor_force_quant).
"""
from __future__ import annotations

import re
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, Skip, Split, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ._parts.checks import silu_only
from ._parts.deepseek_moe import mixture_tensors
from ._parts.glm_common import glm_vocab
from ._parts.latent import key_half, value_half
from ._parts.mixture import check_mlp_layer_types
from ._parts.nextn import NEXTN_TENSORS
from ._parts.state_space import KIMI_DELTA_ATTENTION

ARCH = "glm5-next"

# transformers 5.24's Glm5NextTextConfig defaults (mlp_layer_types, layer_types, indexer_types, head_dim and
# qk_head_dim are computed: normalise); the keys the converter reads that the class does not define
# (linear_attn_config, first_k_dense_replace, mla_use_nope, num_nextn_predict_layers) have no default
_TEXT = dict(vocab_size=154880, hidden_size=4096, intermediate_size=12288, moe_intermediate_size=2048,
             num_hidden_layers=45, num_attention_heads=64, num_key_value_heads=64, n_shared_experts=1,
             n_routed_experts=288, output_router_logits=False, routed_scaling_factor=2.5, kv_lora_rank=512,
             q_lora_rank=1536, qk_rope_head_dim=0, v_head_dim=256, qk_nope_head_dim=256, n_group=1, topk_group=1,
             num_experts_per_tok=8, norm_topk_prob=True, hidden_act="silu", max_position_embeddings=1048576,
             initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True, pad_token_id=154820, bos_token_id=None,
             eos_token_id=None, tie_word_embeddings=False, mlp_layer_types=None, attention_bias=False,
             attention_dropout=0.0, index_topk=2048, index_head_dim=128, index_n_heads=32, head_dim=0,
             layer_types=None, indexer_types=None, swiglu_limit=10.0, linear_head_dim=128, linear_num_heads=64,
             linear_conv_kernel_dim=4, linear_lower_bound=-5.0, hc_mult=4, hc_eps=1e-6, hc_sinkhorn_iters=20,
             router_aux_loss_coef=0.001, index_kpool=16, index_kpool_always_select_tail=True)
DEFAULTS = {"glm5_next_text": _TEXT}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "n_shared_experts", "n_routed_experts", "routed_scaling_factor",
    "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim", "n_group", "topk_group",
    "num_experts_per_tok", "norm_topk_prob", "hidden_act", "max_position_embeddings", "rms_norm_eps",
    "tie_word_embeddings", "mlp_layer_types", "attention_bias", "index_topk", "index_head_dim", "index_n_heads",
    "layer_types", "indexer_types", "swiglu_limit", "linear_head_dim", "linear_num_heads", "linear_conv_kernel_dim",
    "linear_lower_bound", "hc_mult", "hc_eps", "hc_sinkhorn_iters", "index_kpool", "index_kpool_always_select_tail",
    "linear_attn_config", "first_k_dense_replace", "mla_use_nope", "mhc", "num_nextn_predict_layers",
    "scoring_func", "topk_method", "index_topk_pattern", "index_topk_freq", "index_skip_topk_offset",
})
HARMLESS: Harmless = {
    # the config class sets head_dim to qk_rope_head_dim and qk_head_dim to the key width whatever is stated,
    # and the converter pops head_dim
    "head_dim": ANY, "qk_head_dim": ANY,
    # the image-text wrapper's vision tower and media token ids: the converter's text conversion drops the tower
    "vision_config": ANY, "image_token_id": ANY, "video_token_id": ANY, "image_start_token_id": ANY,
    "image_end_token_id": ANY, "video_start_token_id": ANY, "video_end_token_id": ANY,
    # the indexer pools its keys whatever index_kpool_compress says (no code of transformers 5.24 reads it), and
    # rotates nothing (no rope: qk_rope_head_dim 0); the MTP layer's reuse of the indexer while drafting
    # (llama.cpp runs the trunk only); GLM's serving-side router precision
    "index_kpool_compress": ANY, "indexer_rope_interleave": ANY, "rope_interleave": ANY,
    "index_share_for_mtp_iteration": ANY, "moe_router_dtype": ANY, "mla_rms_norm_eps": ANY,
    # training and parallelism switches of the release's remote code
    "ep_size": ANY, "moe_layer_freq": (1,),
}
ALIASES = {"num_local_experts": "n_routed_experts"}  # Glm5NextTextConfig's attribute map

_L = "model.layers.{bid}."
_A = _L + "self_attn."
some = False  # each exists on the layers of one kind only (llama.cpp checks by head_count_kv and the dense count)
_HC = tuple(f"hc_{m}_{p}" for m in ("attn", "ffn") for p in ("fn", "base", "scale"))

TENSORS = (
    Skip("model.visual.{rest}"),  # the vision tower: the converter's text conversion drops it
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    *(Tensor(_L + hc, f"blk.{{bid}}.{hc}.weight", required=some) for hc in _HC),  # not in the MTP layers
    *KIMI_DELTA_ATTENTION,
    # latent attention without rope
    Tensor(_A + "q_a_proj.weight", GGUF.ATTN_Q_A.weight, required=some),
    Tensor(_A + "q_a_layernorm.weight", GGUF.ATTN_Q_A_NORM.weight, required=some),
    Tensor(_A + "q_b_proj.weight", GGUF.ATTN_Q_B.weight, required=some),
    Tensor(_A + "kv_a_proj_with_mqa.weight", GGUF.ATTN_KV_A_MQA.weight, required=some),
    Tensor(_A + "kv_a_layernorm.weight", GGUF.ATTN_KV_A_NORM.weight, required=some),
    Split(_A + "kv_b_proj.weight", ((GGUF.ATTN_K_B.weight, key_half),
                                    (GGUF.ATTN_V_B.weight, value_half)), required=some),
    Tensor(_A + "o_proj.weight", GGUF.ATTN_OUT.weight),  # both mixers have it
    # the indexer with its key pool, on the latent layers indexer_types calls "full"
    Tensor(_A + "indexer.wq_b.weight", GGUF.INDEXER_ATTN_Q_B.weight, required=some),
    Tensor(_A + "indexer.wk.weight", GGUF.INDEXER_ATTN_K.weight, required=some),
    Tensor(_A + "indexer.k_norm.{wb}", GGUF.INDEXER_K_NORM.wb, required=some),
    Tensor(_A + "indexer.weights_proj.weight", GGUF.INDEXER_PROJ.weight, required=some),
    *(Tensor(_A + f"indexer.index_kpool_compress_{p}", f"blk.{{bid}}.indexer_compressor_{p}.weight", required=some)
      for p in ("ape", "gate")),
    *mixture_tensors(),
    *NEXTN_TENSORS,
)

_KEPT_F32 = re.compile(r"^(blk\.|output_hc).*(hc_attn_|hc_ffn_|indexer_compressor_|ssm_a|ssm_dt|exp_probs_b)")


def kept_f32(name: str, h: dict) -> bool:
    """Glm5NextModel.tensor_force_quant: the small mHC and gating parameters stay exact."""
    return bool(_KEPT_F32.search(name))


LINEAR, INDEXED = "linear_attention", "indexed_attention"
# transformers' PreTrainedConfig.__post_init__, after the class's own step, reads legacy names of layer kinds as
# today's (configuration_utils._LEGACY_LAYER_TYPE_REMAP, 5.24); the converter reads layer_types through that class.
# GLM-5.3-Flash's config.json names its latent layers "deepseek_sparse_attention".
_LEGACY_LAYER_TYPES = {"mamba": LINEAR, "attention": "full_attention", "deepseek_sparse_attention": INDEXED,
                       "qwen_sparse_attention": INDEXED}


def normalise(h: dict) -> dict:
    """Glm5NextTextConfig.__post_init__: KV heads default to the heads; three leading dense layers; a latent
    layer every fourth (idx % 4 == 3), "full_attention" read as "indexed_attention", then the legacy names of layer
    kinds as transformers' shared config code reads them (_LEGACY_LAYER_TYPES); indexer_types from
    index_topk_pattern or the freq/offset schedule; the linear-attention sizes from linear_attn_config; head_dim
    the rope width (0) and qk_head_dim the key width."""
    n = h["num_hidden_layers"]
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("mlp_layer_types") is None:
        h["mlp_layer_types"] = ["dense"] * min(3, n) + ["sparse"] * (n - 3)
    if h.get("layer_types") is None:
        h["layer_types"] = [LINEAR if i % 4 != 3 else INDEXED for i in range(n)]
    h["layer_types"] = [_LEGACY_LAYER_TYPES.get(t, t) for t in
                        (INDEXED if t == "full_attention" else t for t in h["layer_types"])]
    if h.get("indexer_types") is None:
        pattern = h.get("index_topk_pattern")
        if pattern is not None:
            h["indexer_types"] = ([{"F": "full", "S": "shared"}.get(c, c) for c in pattern]
                                  if isinstance(pattern, str) else list(pattern))
        else:
            freq = max(h.get("index_topk_freq") or 1, 1)
            offset = h.get("index_skip_topk_offset")
            offset = 2 if offset is None else offset
            h["indexer_types"] = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n)]
    lac = h.get("linear_attn_config")
    if isinstance(lac, dict):
        h["linear_head_dim"] = lac.get("head_dim", h["linear_head_dim"])
        h["linear_num_heads"] = lac.get("num_heads", h["linear_num_heads"])
        h["linear_conv_kernel_dim"] = lac.get("short_conv_kernel_size", h["linear_conv_kernel_dim"])
        h["linear_lower_bound"] = lac.get("gate_lower_bound", h["linear_lower_bound"])
        if lac.get("safe_gate", True) and h["linear_lower_bound"] is None:
            h["linear_lower_bound"] = -5.0
    h["head_dim"] = h["qk_rope_head_dim"]
    h["qk_head_dim"] = h["qk_rope_head_dim"] + h["qk_nope_head_dim"]
    return h


REFUSE = (
    silu_only(ARCH),
    Refuse("linear_attn_config",
           lambda v: isinstance(v, dict) and all(k in v for k in ("num_heads", "head_dim", "short_conv_kernel_size")),
           "the converter reads the delta attention's heads, head width and short-conv kernel from "
           "linear_attn_config (num_heads, head_dim, short_conv_kernel_size), as GLM-5.3-Flash states them"),
    Refuse("mhc", bool, f"the converter asserts mHC residual streams, as llama.cpp's {ARCH} runs them", default=True),
    Refuse("hc_mult", (4,), f"llama.cpp's {ARCH} runs exactly 4 mHC streams"),
    Refuse("q_lora_rank", stated, f"transformers' Glm5Next and llama.cpp's {ARCH} need the query "
           f"bottleneck"),
    Refuse("tie_word_embeddings", unset, f"the converter then writes no output.weight, which llama.cpp's {ARCH} "
           f"requires"),
    Refuse("attention_bias", unset, f"llama.cpp's {ARCH} has no attention biases"),
    Refuse("scoring_func", ("sigmoid",), "transformers' Glm5Next scores experts by sigmoid only, while the converter "
           "would write this gating", default="sigmoid"),
    Refuse("topk_method", ("noaux_tc",), "transformers' Glm5Next chooses experts by noaux_tc only", default="noaux_tc"),
    *(Refuse(key, bool, f"llama.cpp's {ARCH} needs routed and shared experts")
      for key in ("n_routed_experts", "num_experts_per_tok", "n_shared_experts")),
    # `not v <= 1e-6`: llama.cpp skips the clamp where `<= 1e-6` holds
    Refuse("swiglu_limit", lambda v: v is not None and not v <= 1e-6, f"transformers' Glm5Next clamps every SwiGLU "
           f"at it, but llama.cpp's {ARCH} skips a clamp at or below 1e-6 (the converter writes it as stated)"),
    # a stated null refused too: the converter writes it as the leading dense count
    Refuse("first_k_dense_replace", stated, "the converter needs it (KeyError) for the leading "
           "dense layers; state it, as GLM-5.3-Flash does"),
)


def check(h: dict, path: Path) -> None:
    n = h["num_hidden_layers"]
    lac = h["linear_attn_config"]
    if lac["num_heads"] != h["num_attention_heads"]:
        raise ConfigError(f"{path}: linear_attn_config.num_heads {lac['num_heads']} is not num_attention_heads "
                          f"{h['num_attention_heads']}: llama.cpp's {ARCH} sizes the delta attention's heads by the "
                          f"attention head count (the converter asserts they agree)")
    if "gate_lower_bound" not in lac and h["linear_lower_bound"] is not None:
        raise ConfigError(f"{path}: linear_attn_config states no gate_lower_bound: transformers then bounds the "
                          f"forget gate at linear_lower_bound {h['linear_lower_bound']!r}, but the converter writes "
                          f"no kda.gate_lower_bound and llama.cpp's {ARCH} leaves the gate unbounded; state it in "
                          f"linear_attn_config as GLM-5.3-Flash does")
    if h.get("mla_use_nope") is not True or h["qk_rope_head_dim"] != 0:
        raise ConfigError(f"{path}: mla_use_nope {h.get('mla_use_nope')!r}, qk_rope_head_dim "
                          f"{h['qk_rope_head_dim']!r}: the converter converts only latent attention without rope "
                          f"(mla_use_nope true and qk_rope_head_dim 0, as GLM-5.3-Flash states)")
    if h["num_key_value_heads"] != h["num_attention_heads"]:
        raise ConfigError(f"{path}: num_key_value_heads {h['num_key_value_heads']} is not num_attention_heads "
                          f"{h['num_attention_heads']}: transformers' Glm5Next requires them equal")
    kpool, topk = h["index_kpool"], h["index_topk"]
    if kpool < 2 or topk % kpool:
        raise ConfigError(f"{path}: index_kpool {kpool}, index_topk {topk}: llama.cpp's {ARCH} asserts a pool of at "
                          f"least 2 keys that divides index_topk (the process would abort)")
    if (h.get("n_group") or 1) > 1 or (h.get("topk_group") or 1) > 1:
        raise ConfigError(f"{path}: n_group {h.get('n_group')!r}, topk_group {h.get('topk_group')!r}: llama.cpp's "
                          f"{ARCH} reads no expert-group limit (GLM-5.3-Flash states 1 and 1)")
    check_mlp_layer_types(h, path, "Glm5Next", ARCH)
    kinds = h["layer_types"]
    if len(kinds) != n or set(kinds) - {LINEAR, INDEXED}:
        raise ConfigError(f"{path}: layer_types {kinds!r}: one of \"linear_attention\" / \"indexed_attention\" per "
                          f"layer ({n} layers)")
    types = h["indexer_types"]
    if not isinstance(types, list) or len(types) != n or set(types) - {"full", "shared"}:
        raise ConfigError(f"{path}: indexer_types {types!r}: one of \"full\" / \"shared\" per layer ({n} layers)")
    first = next((types[i] for i in range(n) if kinds[i] == INDEXED), "full")
    if first != "full":
        raise ConfigError(f"{path}: indexer_types {types!r}: the first latent layer is \"shared\", but a shared "
                          f"layer reuses the top-k of the last full latent layer before it, and there is none")


def stored_hparams(h: dict, stored: dict) -> dict:
    """Each layer stores the mixer layer_types names, and its indexer where indexer_types says "full"."""
    for bid, (kind, index) in enumerate(zip(h["layer_types"], h["indexer_types"])):
        a = f"model.language_model.layers.{bid}.self_attn."
        if not any(name.startswith(a) for name in stored):
            a = f"model.layers.{bid}.self_attn."
        need = a + ("A_log" if kind == LINEAR else "kv_b_proj.weight")
        if need not in stored:
            raise CheckpointError(f"tensor {need!r} is missing: layer_types makes layer {bid} {kind}; a shard may "
                                  f"be missing, or the checkpoint is not what its config says")
        if kind == INDEXED and index == "full" and a + "indexer.wq_b.weight" not in stored:
            raise CheckpointError(f"tensor {a + 'indexer.wq_b.weight'!r} is missing: indexer_types makes layer {bid} "
                                  f"run its own indexer; a shard may be missing")
    return h


def mtp_layers(h: dict) -> int:
    return h.get("num_nextn_predict_layers") or 0


def _put(kv: list, entry: KV) -> None:
    """The converter's add_*: a key already written is overwritten in its place."""
    at = next((i for i, e in enumerate(kv) if e.key == entry.key), None)
    if at is None:
        kv.append(entry)
    else:
        kv[at] = entry


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """Glm5NextModel.set_gguf_parameters: TextModel's entries (head_dim popped; block_count with the MTP layers),
    the KV heads per block written over TextModel's, the vocabulary size, the constant epsilon, the MTP count, the
    delta attention's kernel, width and gate bound, the latent ranks and widths, the indexer and its pool, mHC,
    the mixture and the SwiGLU clamps."""
    a = ARCH
    kv = text_model_parameters({k: v for k, v in h.items() if k != "head_dim"}, a, block_count, file_type)
    heads = [0 if t == LINEAR else 1 for t in h["layer_types"]] + [1] * (block_count - h["num_hidden_layers"])
    _put(kv, KV(Keys.Attention.HEAD_COUNT_KV.format(arch=a), ValueType.ARRAY, heads, ValueType.INT32))
    _put(kv, u32(Keys.LLM.VOCAB_SIZE.format(arch=a), h["vocab_size"]))
    _put(kv, f32(Keys.Attention.LAYERNORM_EPS.format(arch=a), 1e-6))
    if mtp_layers(h):
        _put(kv, u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=a), mtp_layers(h)))
    lac, kv_lora, rope = h["linear_attn_config"], h["kv_lora_rank"], h["qk_rope_head_dim"]
    entries = [u32(Keys.SSM.CONV_KERNEL.format(arch=a), lac["short_conv_kernel_size"]),
               u32(Keys.KDA.HEAD_DIM.format(arch=a), lac["head_dim"])]
    if lac.get("gate_lower_bound") is not None:
        entries.append(f32(Keys.KDA.GATE_LOWER_BOUND.format(arch=a), lac["gate_lower_bound"]))
    entries += [u32(Keys.Attention.Q_LORA_RANK.format(arch=a), h["q_lora_rank"]),
                u32(Keys.Attention.KV_LORA_RANK.format(arch=a), kv_lora),
                u32(Keys.Rope.DIMENSION_COUNT.format(arch=a), rope),
                u32(Keys.Attention.KEY_LENGTH.format(arch=a), kv_lora + rope),
                u32(Keys.Attention.VALUE_LENGTH.format(arch=a), kv_lora),
                u32(Keys.Attention.KEY_LENGTH_MLA.format(arch=a), h["qk_nope_head_dim"] + rope),
                u32(Keys.Attention.VALUE_LENGTH_MLA.format(arch=a), h["v_head_dim"]),
                u32(Keys.Attention.Indexer.HEAD_COUNT.format(arch=a), h["index_n_heads"]),
                u32(Keys.Attention.Indexer.KEY_LENGTH.format(arch=a), h["index_head_dim"]),
                u32(Keys.Attention.Indexer.TOP_K.format(arch=a), h["index_topk"]),
                u32(Keys.Attention.Indexer.KPOOL.format(arch=a), h["index_kpool"]),
                boolean(Keys.Attention.Indexer.KPOOL_SELECT_TAIL.format(arch=a),
                        h.get("index_kpool_always_select_tail", True)),
                KV(Keys.Attention.Indexer.TYPES.format(arch=a), ValueType.ARRAY,
                   [t == "full" for t in h["indexer_types"]],
                   ValueType.BOOL),
                u32(Keys.HyperConnection.COUNT.format(arch=a), h["hc_mult"]),
                u32(Keys.HyperConnection.SINKHORN_ITERATIONS.format(arch=a), h["hc_sinkhorn_iters"]),
                f32(Keys.HyperConnection.EPSILON.format(arch=a), h["hc_eps"]),
                u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=a), h["first_k_dense_replace"]),
                u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=a), h["moe_intermediate_size"]),
                u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=a), h["n_shared_experts"]),
                f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=a), h["routed_scaling_factor"]),
                boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=a), h["norm_topk_prob"])]
    limits = [float(h["swiglu_limit"])] * block_count
    entries += [KV(Keys.LLM.SWIGLU_CLAMP_EXP.format(arch=a), ValueType.ARRAY, limits, ValueType.FLOAT32),
                KV(Keys.LLM.SWIGLU_CLAMP_SHEXP.format(arch=a), ValueType.ARRAY, limits, ValueType.FLOAT32)]
    for entry in entries:
        _put(kv, entry)
    return kv


FAMILY = Family(
    name="glm5_next_text",
    gguf_arch=ARCH,
    architectures=("Glm5NextForConditionalGeneration",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=glm_vocab,  # TextModel._set_vocab_glm, as Glm4MoeModel's
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    extra_blocks=mtp_layers,
    stored_hparams=stored_hparams,
    aliases=ALIASES,
    kept_f32=kept_f32,
)
