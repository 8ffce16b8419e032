"""MiMo-V2-Flash, BF16 exports (MiMoV2FlashForCausalLM) -> llama.cpp `mimo2` (the converter's MimoV2Model).

Layers of two kinds, as layer_types says (the config class makes layer 0 and every 6th full attention, the rest
sliding; the releases state the same as hybrid_layer_pattern, 1 = sliding, which is what the converter writes as
the window pattern): sliding layers have twice the KV heads (swa_num_key_value_heads, one count per layer in
head_count_kv) and one learned attention sink per head (self_attn.attention_sink_bias, written as attn_sinks).
Query/key heads are head_dim wide, value heads v_head_dim (narrower): key_length and value_length differ. Rope
covers int(head_dim x partial_rotary_factor) dims of each head in the rotate-half layout (llama.cpp's mimo2 rotates
as neox: Q/K are presented as stored), with rope_theta on full and swa_rope_theta on sliding layers. The attention
output is scaled by attention_value_scale (transformers scales the values: the same product). A leading dense MLP
(mlp_layer_types), then a mixture: a sigmoid router with a per-expert selection bias (exp_probs_b), always
renormalised, no shared expert.

The next-token-prediction layers every release stores (model.mtp.layers.{0,1,2}: a sliding-window layer with a
dense MLP, plus enorm, hnorm, eh_proj and final_layernorm) are written as the converter writes them without
--no-mtp: it always counts three MTP blocks (block_count n + 3, nextn_predict_layers 3, the window pattern and KV
head counts extended with sliding entries) and maps mtp.layers.{i}.* to blk.{n + i}.*, whether or not the
checkpoint stores them (transformers saves a fine-tune without them). llama.cpp runs the n trunk layers, as
transformers' forward does. An MTP layer stored with a mixture (llama.cpp's mimo2 loads one) has its router
written at the outtype, as the converter writes it (mtp_router_at_outtype).

Under transformers 5.24 the pinned converter fails on every MiMo-V2-Flash config: MiMoV2FlashConfig presents
rope_parameters per layer kind, and MimoV2Model reads rope_parameters["partial_rotary_factor"] (KeyError). The
view presents what it writes from the config as released (top-level rope_theta, swa_rope_theta,
partial_rotary_factor, as its remote-code config class kept them; tests/test_family_mimo_v2_flash.py checks the
bytes against that run). MiMoV2FlashConfig ignores those top-level keys (its rope is rope_parameters, by default
5e6 / 1e4 / 0.334), and reads rms_norm_eps where the converter writes layernorm_epsilon: a config on which they
disagree is refused by name.

The converter class also registers MiMoV2ForCausalLM (model_type mimo_v2: MiMo-V2.5 / V2.6, with vision and audio
towers), which this family does not read: transformers has no class for it, so the converter takes its plain
config.json and writes the stated sliding_window (128) where MiMoV2Flash's function attends sliding_window_size + 1
(129) keys, and its releases store a fused qkv_proj sharded by tensor-parallel rank whose rows the converter
regroups only while dequantizing FP8.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Experts, Family, Refuse, RunnerFacts, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import f32, text_model_parameters, u32
from ._parts.checks import silu_only

ARCH = "mimo2"
N_MTP = 3  # the converter's _n_nextn: MiMo's three MTP layers, counted whether stored or not (without --no-mtp)

_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 5000000.0, "partial_rotary_factor": 0.334},
         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.334}}

# transformers 5.24's MiMoV2FlashConfig defaults (layer_types and mlp_layer_types are derived: normalise)
DEFAULTS = {
    "mimo_v2_flash": dict(vocab_size=152576, hidden_size=4096, intermediate_size=16384, num_hidden_layers=48,
                          num_attention_heads=64, num_key_value_heads=4, hidden_act="silu",
                          max_position_embeddings=131072, initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True,
                          tie_word_embeddings=False, rope_parameters=_ROPE, attention_bias=False,
                          attention_dropout=0.0, moe_intermediate_size=2048, num_experts_per_tok=8,
                          output_router_logits=False, n_routed_experts=256, routed_scaling_factor=1.0, n_group=1,
                          topk_group=1, norm_topk_prob=True, bos_token_id=1, eos_token_id=None, pad_token_id=None,
                          head_dim=192, v_head_dim=128, sliding_window=129, layer_types=None, mlp_layer_types=None,
                          attention_value_scale=0.707),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "v_head_dim", "max_position_embeddings", "rms_norm_eps", "hidden_act",
    "tie_word_embeddings", "attention_bias", "rope_parameters", "rope_scaling",
    "layer_types", "mlp_layer_types", "sliding_window", "attention_value_scale",
    "moe_intermediate_size", "num_experts_per_tok", "n_routed_experts", "routed_scaling_factor", "n_group",
    "topk_group", "norm_topk_prob",
    # the releases' own keys, which the converter reads (and the config class does not): checked against
    # what transformers computes
    "hybrid_layer_pattern", "moe_layer_freq", "swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim",
    "swa_v_head_dim", "rope_theta", "swa_rope_theta", "partial_rotary_factor", "layernorm_epsilon",
    "sliding_window_size", "scoring_func", "topk_method", "n_shared_experts",
})
# Keys of the released config.json that neither transformers' MiMoV2Flash nor the converter reads: SGLang's
# chunked-prefill size, the hybrid block size (null), and the sink switches at the values transformers builds
# (sinks on the sliding layers only)
HARMLESS: Harmless = {"attention_chunk_size": ANY, "hybrid_block_size": (None,),
                      "add_swa_attention_sink_bias": (True,), "add_full_attention_sink_bias": (False,)}

_L = "model.layers.{bid}."
_SOME = dict(required=False)  # in the layers of one kind only (stored_hparams checks the kinds)

# the MTP layers' own tensors, under blk.{n + i} (the converter's renames, then its tensor map)
NEXTN_TENSORS = (
    Tensor(_L + "eh_proj.weight", GGUF.NEXTN_EH_PROJ.weight, **_SOME),
    Tensor(_L + "enorm.weight", GGUF.NEXTN_ENORM.weight, **_SOME),
    Tensor(_L + "hnorm.weight", GGUF.NEXTN_HNORM.weight, **_SOME),
    Tensor(_L + "embed_tokens.weight", GGUF.NEXTN_EMBED_TOKENS.weight, **_SOME),
    Tensor(_L + "shared_head.head.weight", GGUF.NEXTN_SHARED_HEAD_HEAD.weight, **_SOME),
    Tensor(_L + "shared_head.norm.weight", GGUF.NEXTN_SHARED_HEAD_NORM.weight, **_SOME),
    Tensor(_L + "final_layernorm.weight", GGUF.LAYER_OUT_NORM.weight, **_SOME),
)

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    *(Tensor(f"{_L}self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{g}.weight")
      for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))),
    Tensor(_L + "self_attn.attention_sink_bias", GGUF.ATTN_SINKS.weight, **_SOME),
    *(Tensor(f"{_L}mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", **_SOME) for p in ("gate", "up", "down")),
    Tensor(_L + "mlp.gate.weight", GGUF.FFN_GATE_INP.weight, **_SOME),
    Tensor(_L + "mlp.gate.e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias, **_SOME),
    *(Experts(f"{_L}mlp.experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "n_routed_experts",
              **_SOME) for p in ("gate", "up", "down")),
    *NEXTN_TENSORS,
)

_MTP = re.compile(r"model\.mtp\.layers\.(\d+)\.(.+)")


def rename(name: str, h: dict) -> str:
    """The converter's MTP rename: model.mtp.layers.{i}.X read as model.layers.{num_hidden_layers + i}.X."""
    m = _MTP.fullmatch(name)
    return f"model.layers.{h['num_hidden_layers'] + int(m.group(1))}.{m.group(2)}" if m else name


def mtp_router_at_outtype(gguf_name: str, h: dict) -> bool:
    """An MTP layer's router (the releases' MTP layers are dense; llama.cpp's mimo2 loads a mixture there too): the
    converter renames model.mtp.layers.{i} to block n + i in modify_tensors, after its F32 list took block i off the
    stored name, so blk.{n + i}.ffn_gate_inp misses that list and goes out at the outtype."""
    n = h["num_hidden_layers"]
    return gguf_name in {GGUF.FFN_GATE_INP.weight.format(bid=n + i) for i in range(N_MTP)}


# the converter's reading of the rope (top-level keys, as released), kept beside transformers' rope_parameters
CONVERTER_ROPE_THETA = "rope_theta (as the converter reads it)"
# a rope_scaling (or flat rope_parameters) beside them: the converter would write its scaling, transformers'
# MiMoV2Flash computes with per-kind plain rope
STATED_ROPE_SCALING = "rope scaling (as stated)"
_PLAIN_ROPE = ("full_attention", "sliding_attention", "rope_theta", "partial_rotary_factor")


def layer_kinds(n: int) -> list[str]:
    """MiMoV2FlashConfig's default: full attention on layer 0 and every 6th layer, sliding elsewhere."""
    return ["full_attention" if i == 0 or (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]


def normalise(h: dict) -> dict:
    """What MiMoV2FlashConfig's __post_init__ computes: the layer kinds, the MLP kinds (one dense layer, then
    mixtures), its per-layer-kind rope where config.json names none (a top-level rope_theta is not read by it:
    kept for the converter), a null routed_scaling_factor as 1.0, and the window as sliding_window_size + 1."""
    n = h["num_hidden_layers"]
    if h.get("layer_types") is None:
        h["layer_types"] = layer_kinds(n)
    if h.get("mlp_layer_types") is None:
        h["mlp_layer_types"] = ["dense"] + ["sparse"] * (n - 1)
    rope = dict(h.get("rope_parameters") or {})
    h[CONVERTER_ROPE_THETA] = rope.get("rope_theta")  # a stated top-level rope_theta (hfview.config.with_defaults)
    h[STATED_ROPE_SCALING] = {k: v for k, v in rope.items() if k not in _PLAIN_ROPE}
    if "full_attention" in rope or "sliding_attention" in rope:
        h["rope_parameters"] = {kind: rope[kind] for kind in ("full_attention", "sliding_attention") if kind in rope}
    else:
        h["rope_parameters"] = {kind: dict(r) for kind, r in _ROPE.items()}
    if h.get("routed_scaling_factor") is None:
        h["routed_scaling_factor"] = 1.0
    if h.get("sliding_window_size") is not None:
        h["sliding_window"] = h["sliding_window_size"] + 1
    return h


def _pattern(h: dict) -> list[int]:
    return [1 if kind == "sliding_attention" else 0 for kind in h["layer_types"]]


def rope_dimension_count(h: dict) -> int:
    return int(h["head_dim"] * h["partial_rotary_factor"])


_KINDS = ("full_attention", "sliding_attention")

REFUSE = (
    silu_only(ARCH),
    Refuse("layer_types", lambda v: not set(v) - set(_KINDS), "MiMo-V2-Flash has full_attention and "
           "sliding_attention layers only"),
    Refuse("mlp_layer_types", lambda v: not set(v) - {"dense", "sparse"}, "MiMo-V2-Flash has dense and sparse layers "
           "only"),
    *(Refuse(key, stated, "not stated: the converter reads it (as every MiMo-V2-Flash release "
             "states it) and fails without it")
      for key in ("hybrid_layer_pattern", "swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim",
                  "swa_v_head_dim", "topk_method", "partial_rotary_factor")),
    Refuse("topk_method", ("noaux_tc",), "the converter requires noaux_tc (a selection bias on sigmoid scores), as "
           "every release states"),
    Refuse("scoring_func", ("sigmoid",), f"transformers' MiMoV2Flash and llama.cpp's {ARCH} score experts by sigmoid",
           default="sigmoid"),
    Refuse("norm_topk_prob", bool, f"llama.cpp's {ARCH} always renormalises the chosen experts' weights"),
    Refuse("routed_scaling_factor", lambda v: float(v) == 1.0, f"the converter writes no expert weight scale, so "
           f"llama.cpp's {ARCH} would not scale the experts"),
    Refuse("n_shared_experts", unset, "transformers' MiMoV2Flash has no shared expert (every release states null)"),
    Refuse("attention_bias", unset, "the view presents MiMo-V2-Flash without q/k/v biases (as released)"),
    Refuse("tie_word_embeddings", unset, f"llama.cpp's {ARCH} needs an output matrix of its own"),
    # the rope of each layer kind (normalise states them where config.json does not)
    Refuse("rope_parameters", lambda v: set(v) == set(_KINDS), "MiMoV2FlashConfig needs one rope per layer kind "
           "(full_attention, sliding_attention)"),
    *(Refuse(f"rope_parameters.{kind}.rope_type", ("default",), "the view presents MiMo-V2-Flash with plain rope "
             "only", default="default") for kind in _KINDS),
)


def check(h: dict, path: Path) -> None:
    n = h["num_hidden_layers"]
    for key in ("layer_types", "mlp_layer_types"):
        if len(h[key]) != n:
            raise ConfigError(f"{path}: {key} lists {len(h[key])} layers, num_hidden_layers is {n}")
    if list(h["hybrid_layer_pattern"]) != _pattern(h):
        raise ConfigError(f"{path}: hybrid_layer_pattern {h['hybrid_layer_pattern']} (the converter's window "
                          f"pattern, 1 = sliding) does not match layer_types {h['layer_types']} (transformers' "
                          f"layer kinds, {_pattern(h)}): they would run different layers as sliding")
    if h.get("moe_layer_freq") is not None and list(h["moe_layer_freq"]) != [
            int(kind == "sparse") for kind in h["mlp_layer_types"]]:
        raise ConfigError(f"{path}: moe_layer_freq {h['moe_layer_freq']} does not match mlp_layer_types "
                          f"{h['mlp_layer_types']} (transformers' MLP kinds): the config does not say which "
                          f"layers are mixtures")
    for swa, key in (("swa_num_attention_heads", "num_attention_heads"), ("swa_head_dim", "head_dim"),
                     ("swa_v_head_dim", "v_head_dim")):
        if h[swa] != h[key]:
            raise ConfigError(f"{path}: {swa} {h[swa]} differs from {key} {h[key]}: transformers' MiMoV2Flash "
                              f"sizes the sliding layers by {key} (and the converter requires them equal)")
    if h["swa_num_key_value_heads"] != 2 * h["num_key_value_heads"]:
        raise ConfigError(f"{path}: swa_num_key_value_heads {h['swa_num_key_value_heads']} is not twice "
                          f"num_key_value_heads {h['num_key_value_heads']}: transformers' MiMoV2Flash gives the "
                          f"sliding layers twice the KV heads, the converter writes the stated count")
    if (h.get("n_group") or 1) != 1 or (h.get("topk_group") or 1) != 1:
        raise ConfigError(f"{path}: n_group {h.get('n_group')!r}, topk_group {h.get('topk_group')!r}: llama.cpp's "
                          f"mimo2 never limits expert groups, so expert choices would differ; every release "
                          f"states 1 and 1")
    if not h.get("n_routed_experts") or not h.get("num_experts_per_tok"):
        raise ConfigError(f"{path}: n_routed_experts {h.get('n_routed_experts')!r} / num_experts_per_tok "
                          f"{h.get('num_experts_per_tok')!r}: llama.cpp's mimo2 needs routed experts")
    if "sliding_attention" in h["layer_types"] and not h.get("sliding_window"):
        raise ConfigError(f"{path}: sliding_window {h.get('sliding_window')!r}: sliding layers need a window")
    eps = h.get("layernorm_epsilon", 1e-5)
    if float(eps) != float(h["rms_norm_eps"]):
        raise ConfigError(f"{path}: layernorm_epsilon {eps} (what the converter writes) differs from rms_norm_eps "
                          f"{h['rms_norm_eps']} (what transformers' MiMoV2Flash computes with)")
    _check_rope(h, path)


def _check_rope(h: dict, path: Path) -> None:
    """transformers computes with rope_parameters (per layer kind), the converter writes the top-level rope_theta,
    swa_rope_theta and partial_rotary_factor: refused where they disagree."""
    rope = h["rope_parameters"]
    scaling = {k: v for k, v in h[STATED_ROPE_SCALING].items() if not (k in ("rope_type", "type") and v == "default")}
    if scaling:
        raise ConfigError(f"{path}: rope scaling {scaling} stated beside the per-kind rope: the converter would write "
                          f"it, transformers' MiMoV2Flash computes with plain rope per layer kind (rope_parameters)")
    for kind, stated_key, value in (("full_attention", "rope_theta", h[CONVERTER_ROPE_THETA]),
                                     ("sliding_attention", "swa_rope_theta", h.get("swa_rope_theta"))):
        r = rope[kind]
        if value is None or float(value) != float(r["rope_theta"]):
            raise ConfigError(f"{path}: {stated_key} {value!r} (what the converter writes) differs from "
                              f"rope_parameters.{kind}.rope_theta {r['rope_theta']} (what transformers' MiMoV2Flash "
                              f"computes with)")
        factor = r.get("partial_rotary_factor", 0.334)
        if float(factor) != float(h["partial_rotary_factor"]):
            raise ConfigError(f"{path}: partial_rotary_factor {h['partial_rotary_factor']} (what the converter "
                              f"writes) differs from rope_parameters.{kind}.partial_rotary_factor {factor} (what "
                              f"transformers' MiMoV2Flash computes with)")
    if rope_dimension_count(h) % 2 or not rope_dimension_count(h):
        raise ConfigError(f"{path}: head_dim x partial_rotary_factor = {rope_dimension_count(h)} rotary dims: "
                          f"rotation pairs need an even count, at least 2")


def stored_hparams(h: dict, stored: dict) -> dict:
    """Each trunk layer's tensors of the kind its config says: sinks on the sliding layers only, a dense MLP or a
    router as mlp_layer_types says (else transformers and llama.cpp would run different layers)."""
    names = set(stored)
    for i, (kind, mlp) in enumerate(zip(h["layer_types"], h["mlp_layer_types"])):
        sink = f"model.layers.{i}.self_attn.attention_sink_bias"
        if (sink in names) != (kind == "sliding_attention"):
            raise CheckpointError(f"tensor {sink!r} is {'stored' if sink in names else 'missing'}, but layer {i} is "
                                  f"{kind}: transformers' MiMoV2Flash has sinks on the sliding layers only")
        router = f"model.layers.{i}.mlp.gate.weight"
        if (router in names) != (mlp == "sparse"):
            raise CheckpointError(f"tensor {router!r} is {'stored' if router in names else 'missing'}, but "
                                  f"mlp_layer_types makes layer {i} {mlp}: the config does not describe these weights")
    return h


def _in_place(kv: list[KV], new: KV) -> list[KV]:
    """GGUFWriter's overwrite of a key already written: the new value in the key's first place."""
    return [new if k.key == new.key else k for k in kv]


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """MimoV2Model.set_gguf_parameters: TextModel's entries (block_count with the three MTP blocks), then per-layer
    KV head counts (in place), the window and its pattern (MTP blocks sliding), the value width (in place), the
    expert width, the rope width, layernorm_epsilon (in place), the value scale and the MTP layer count."""
    pattern = list(h["hybrid_layer_pattern"]) + [1] * N_MTP
    kv = text_model_parameters(h, ARCH, block_count, file_type)
    kv = _in_place(kv, KV(Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH), ValueType.ARRAY,
                          [h["swa_num_key_value_heads"] if p == 1 else h["num_key_value_heads"] for p in pattern],
                          ValueType.INT32))
    kv += [u32(Keys.Attention.SLIDING_WINDOW.format(arch=ARCH), h["sliding_window"]),
           KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch=ARCH), ValueType.ARRAY, pattern, ValueType.INT32)]
    kv = _in_place(kv, u32(Keys.Attention.VALUE_LENGTH.format(arch=ARCH), h["v_head_dim"]))
    kv += [u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_intermediate_size"]),
           u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), rope_dimension_count(h))]
    kv = _in_place(kv, f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch=ARCH), h.get("layernorm_epsilon", 1e-5)))
    if h.get("attention_value_scale") is not None:
        kv.append(f32(Keys.Attention.VALUE_SCALE.format(arch=ARCH), h["attention_value_scale"]))
    kv.append(u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=ARCH), N_MTP))
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    """TextModel.set_vocab: byte-level BPE."""
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="mimo_v2_flash",
    gguf_arch=ARCH,
    architectures=("MiMoV2FlashForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    extra_blocks=lambda h: N_MTP,
    stored_hparams=stored_hparams,
    rename=rename,
    f32_list_missed=mtp_router_at_outtype,
    # llama.cpp's mimo2 applies the window on the layers its pattern marks (LLAMA_SWA_TYPE_STANDARD), as
    # transformers does on layer_types' sliding layers
    runner=RunnerFacts(llama_cpp_applies_window=True),
)
