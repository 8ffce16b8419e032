"""Step-3.5-Flash (Step3p5ForCausalLM, model_type step3p5, remote code) -> llama.cpp `step35` (the converter's
Step35Model, a TextModel).

A Llama-like block under Step's names: per-head q/k RMSNorm, a head-wise sigmoid gate on the attention output
(self_attn.g_proj), full-attention layers with num_attention_heads / num_attention_groups that rotate half their
head width (partial_rotary_factors 0.5) and sliding layers with attention_other_setting's head counts that rotate
all of it (1.0); NeoX rotation, so Q/K rows stay as stored. Dense layers keep mlp.*; mixture layers (moe_layers_enum)
store their experts already stacked (moe.gate_proj / up_proj / down_proj, [experts, out, in]), a router
(moe.gate), a selection bias (moe.router_bias, written as exp_probs_b.bias) and a shared expert (share_expert.*).
Every RMSNorm stores its scale as an offset from 1 (Step3p5RMSNorm multiplies by weight + 1), which the converter
adds back to every tensor whose name ends in norm.weight.

transformers 5.24 has no Step3p5 class, so the converter reads config.json as written. rope_theta may be a list
(one base per layer): the converter writes its first entry as the base and its second as the sliding layers'
base, so the view refuses a list whose full / sliding layers do not carry those two values. The release's router
renormalises the chosen weights always; the converter writes expert_weights_norm only from norm_expert_weight, so
a config without it true is refused (llama.cpp would not renormalise).

The next-token-prediction (MTP) layers the releases store after num_hidden_layers (num_nextn_predict_layers 3:
model.layers.45-47, dense sliding decoder layers) are written as the converter writes them without --no-mtp:
block_count counts them, their per-layer arrays (head counts, window pattern, SwiGLU clamps) run over them too,
layer_types / partial_rotary_factors padded with full_attention / 0.5 where the config stops short, their decoder
tensors under blk.{n}.*, their own under blk.{n}.nextn.* (eh_proj, enorm, hnorm, shared_head.norm and
shared_head.head, which Step stores as transformer.shared_head.output), norms + 1 like the trunk's, and
nextn_predict_layers in the KV. llama.cpp's step35 loads them and runs only the trunk, as the release's forward does.

The releases' rope scaling (rope_scaling llama3, yarn_only_types ["full_attention"]: the release scales the rope of
the layer types named there) is written as the converter writes it: no KV, a rope_freqs tensor of Llama 3's factors
for the full_attention layers' rotated dims, which llama.cpp's step35 applies to those layers only. So llama3 with
any other yarn_only_types, and any other kind of scaling (the converter writes none for step35), is refused by
name, as is softmax routing without a router bias (llama.cpp's step35 gates by sigmoid).
"""
from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, Tensor, stated
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..views import OFFSET_ONE
from ._parts.nextn import NEXTN_TENSORS, mtp_layers

ARCH = "step35"
ARCHITECTURES = ("Step3p5ForCausalLM",)
READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_attention_groups", "head_dim", "max_position_embeddings", "max_seq_len", "rms_norm_eps", "rope_theta",
    "rope_scaling", "rope_parameters", "layer_types", "partial_rotary_factors", "attention_other_setting",
    "sliding_window", "use_head_wise_attn_gate", "moe_num_experts", "moe_top_k", "moe_intermediate_size",
    "share_expert_dim", "moe_layers_enum", "moe_every_n_layer", "moe_router_activation",
    "moe_router_scaling_factor", "use_moe_router_bias", "norm_expert_weight", "swiglu_limits",
    "swiglu_limits_shared", "num_nextn_predict_layers", "tie_word_embeddings", "use_qk_norm", "yarn_only_types",
    "use_rope_layers",
})
# need_fp32_gate: the router's matmul precision only (llama.cpp keeps the router F32 anyway)
HARMLESS: Harmless = {"need_fp32_gate": ANY, "att_impl_type": ("GQA",)}

# The release's Step3p5Config (configuration_step3p5.py) defaults for what the converter needs stated
_REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "num_attention_groups", "head_dim", "rms_norm_eps", "layer_types", "partial_rotary_factors",
             "sliding_window", "moe_num_experts", "moe_top_k", "moe_intermediate_size", "share_expert_dim",
             "moe_layers_enum")

_L = "model.layers.{bid}."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor(_L + "self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor(_L + "self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor(_L + "self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(_L + "self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "self_attn.g_proj.weight", GGUF.ATTN_GATE.weight,
           required=lambda h: bool(h.get("use_head_wise_attn_gate"))),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight, steps=(OFFSET_ONE,)),
    # dense layers (those not in moe_layers_enum) and mixture layers store different modules
    Tensor(_L + "mlp.gate_proj.weight", GGUF.FFN_GATE.weight, required=False),
    Tensor(_L + "mlp.up_proj.weight", GGUF.FFN_UP.weight, required=False),
    Tensor(_L + "mlp.down_proj.weight", GGUF.FFN_DOWN.weight, required=False),
    Tensor(_L + "moe.gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Tensor(_L + "moe.router_bias", GGUF.FFN_EXP_PROBS_B.bias, required=False),
    Tensor(_L + "moe.gate_proj.weight", GGUF.FFN_GATE_EXP.weight, required=False),
    Tensor(_L + "moe.up_proj.weight", GGUF.FFN_UP_EXP.weight, required=False),
    Tensor(_L + "moe.down_proj.weight", GGUF.FFN_DOWN_EXP.weight, required=False),
    Tensor(_L + "share_expert.gate_proj.weight", GGUF.FFN_GATE_SHEXP.weight, required=False),
    Tensor(_L + "share_expert.up_proj.weight", GGUF.FFN_UP_SHEXP.weight, required=False),
    Tensor(_L + "share_expert.down_proj.weight", GGUF.FFN_DOWN_SHEXP.weight, required=False),
    Skip(_L + "self_attn.rotary_emb.inv_freq"),
    # the MTP layers' own tensors; the converter adds 1 to every name ending in norm.weight, theirs included
    *(replace(t, steps=(OFFSET_ONE,)) if t.hf.endswith("norm.weight") else t for t in NEXTN_TENSORS),
)


def rename(name: str, h: dict) -> str:
    """Step35Model.filter_tensors on an MTP layer (index >= num_hidden_layers): its shared head, stored under
    transformer.shared_head.{norm,output}, read as shared_head.{norm,head}."""
    m = re.match(r"model\.layers\.(\d+)\.", name)
    if m is None or int(m.group(1)) < h["num_hidden_layers"]:
        return name
    return name.replace(".transformer.", ".").replace("shared_head.output", "shared_head.head")


def moe_layers(h: dict) -> list[int]:
    return sorted(int(i) for i in str(h["moe_layers_enum"]).strip().split(",") if i.strip())


def _padded(values: list, n: int, pad: object) -> list:
    """Step35Model's per-layer lists over its n blocks (MTP layers included): cut at n, else padded with `pad`."""
    return (list(values) + [pad] * n)[:n]


def _layer_types(h: dict, n: int) -> list[str]:
    return _padded(h["layer_types"], n, "full_attention")


def _sliding(h: dict, n: int) -> list[bool]:
    return [t == "sliding_attention" for t in _layer_types(h, n)]


def normalise(h: dict) -> dict:
    """rope_parameters as Step35Model.set_gguf_parameters makes them: a per-layer rope_theta list gives the base
    (entry 0) and the sliding layers' base (entry 1)."""
    theta = h["rope_parameters"].get("rope_theta")
    if isinstance(theta, list) and len(theta) >= 2:
        # the rest (a rope_type, a factor) is kept for check to refuse
        h["rope_parameters"] = {**h["rope_parameters"], "rope_theta": float(theta[0]),
                                "sliding_attention": {"rope_theta": float(theta[1])}, "theta_per_layer": list(theta)}
    return h


REFUSE = (
    *(Refuse(key, stated, "missing; the converter reads Step-3.5's config.json as written (no "
             "Step3p5Config defaults apply)") for key in _REQUIRED),
    Refuse("use_qk_norm", bool, "the release's attention always normalises q and k", default=True),
    # `is True`: 1 is not the flag the release states
    Refuse("norm_expert_weight", lambda v: v is True, "the release renormalises the chosen experts' weights always, "
           "llama.cpp only where norm_expert_weight is true"),
    Refuse("moe_every_n_layer", (1,), "the release places its mixtures by moe_layers_enum alone", default=1),
)


def check(h: dict, path: Path) -> None:
    n = h["num_hidden_layers"]
    types, factors = h["layer_types"], h["partial_rotary_factors"]
    if len(types) < n or any(t not in ("full_attention", "sliding_attention") for t in types[:n]):
        raise ConfigError(f"{path}: layer_types must name full_attention or sliding_attention for each of the "
                          f"{n} layers")
    if "full_attention" not in types[:n]:
        raise ConfigError(f"{path}: layer_types has no full_attention layer; the converter needs one")
    blocks = n + mtp_layers(h)  # the converter asserts this over its MTP layers too, both lists padded
    if [float(f) for f in _padded(factors, blocks, 0.5)] != [
            1.0 if t == "sliding_attention" else 0.5 for t in _layer_types(h, blocks)]:
        raise ConfigError(f"{path}: partial_rotary_factors {factors!r}: llama.cpp's step35 rotates half the head "
                          f"on full_attention layers and all of it on sliding ones (0.5 / 1.0), as the converter "
                          f"asserts (over the {blocks} layers with the MTP ones)")
    rope = h["rope_parameters"]
    if _llama3(h):
        if list(h.get("yarn_only_types") or []) != ["full_attention"]:
            raise ConfigError(f"{path}: yarn_only_types {h.get('yarn_only_types')!r} with llama3 rope scaling: the "
                              f"release scales the rope of the layer types it names, llama.cpp's step35 that of the "
                              f"full_attention layers only (the converter's rope_freqs); only ['full_attention'] is "
                              f"computed alike")
    elif h.get("yarn_only_types") or rope.get("rope_type", "default") not in ("default", None) or any(
            k in rope for k in ("factor", "type")):
        raise ConfigError(f"{path}: rope scaling {rope!r} (rope_scaling / rope_parameters / yarn_only_types): only "
                          f"llama3 scaling is presented by hfview's step3p5 (the converter writes no other kind for "
                          f"step35)")
    if (per_layer := rope.get("theta_per_layer")) is not None:
        if len(per_layer) < n:
            raise ConfigError(f"{path}: rope_theta lists {len(per_layer)} bases for {n} layers")
        for i, (sliding, theta) in enumerate(zip(_sliding(h, n), per_layer)):
            want = rope["sliding_attention"]["rope_theta"] if sliding else rope["rope_theta"]
            if float(theta) != want:
                raise ConfigError(f"{path}: rope_theta[{i}] {theta}: the converter writes rope_theta[0] {per_layer[0]}"
                                  f" for every full_attention layer and rope_theta[1] {per_layer[1]} for every "
                                  f"sliding one, which is all llama.cpp reads")
    if (rope_layers := h.get("use_rope_layers")) and not all(rope_layers[:n]):
        raise ConfigError(f"{path}: use_rope_layers {rope_layers!r}: the release skips rotation on the layers it "
                          f"marks false, llama.cpp's step35 rotates every layer")
    if not h.get("use_moe_router_bias") and h.get("moe_router_activation") != "sigmoid":
        raise ConfigError(f"{path}: softmax routing (no use_moe_router_bias, moe_router_activation "
                          f"{h.get('moe_router_activation')!r}): llama.cpp's step35 gates by sigmoid")
    layers = moe_layers(h)
    if layers != sorted(set(layers)) or any(i < 0 or i >= n for i in layers):
        raise ConfigError(f"{path}: moe_layers_enum {h['moe_layers_enum']!r}: layer indices below {n} are needed")
    for key in ("swiglu_limits", "swiglu_limits_shared"):
        if (limits := h.get(key)) is not None and len(limits) < n:
            raise ConfigError(f"{path}: {key} lists {len(limits)} values for {n} layers")
    if h.get("swiglu_limits_shared") and any(h["swiglu_limits_shared"][i] for i in range(n) if i not in layers):
        raise ConfigError(f"{path}: swiglu_limits_shared clamps a dense layer's MLP, which llama.cpp's step35 "
                          f"does not clamp")
    other = h.get("attention_other_setting") or {}
    for heads, groups in ((h["num_attention_heads"], h["num_attention_groups"]),
                          (other.get("num_attention_heads", h["num_attention_heads"]),
                           other.get("num_attention_groups", h["num_attention_groups"]))):
        if heads % groups:
            raise ConfigError(f"{path}: {heads} attention heads do not split into {groups} groups")


def _llama3(h: dict) -> bool:
    rope = h["rope_parameters"].get("full_attention", h["rope_parameters"])
    return (rope.get("rope_type") or "").lower() == "llama3"


def rope_freqs(h: dict) -> list:
    """Step35Model.generate_extra_tensors: with llama3 rope scaling, rope_freqs.weight holds Llama 3's factors for
    the full_attention layers' rotated dims (half the head, at the first base), padded with 1.0 to half the head
    (llama.cpp's step35 applies it to the full_attention layers only). The converter computes the frequencies in
    float32 and the factors in Python floats, rounded to float32 at the end; so does this, rather than
    _parts.rope.llama3_rope_factors, which follows LlamaModel's float32 steps (another arithmetic)."""
    if not _llama3(h):
        return []
    rope = h["rope_parameters"].get("full_attention", h["rope_parameters"])
    d = h["head_dim"]
    rotated = int(d * 0.5)  # check: full_attention layers rotate half the head
    exponents = (np.arange(0, rotated, 2, dtype=np.float32) / np.float32(rotated)).astype(np.float64)
    freqs = np.float32(1) / np.power(float(h["rope_parameters"]["rope_theta"]), exponents).astype(np.float32)
    factor = float(rope.get("factor", 8.0))
    low, high = float(rope.get("low_freq_factor", 1.0)), float(rope.get("high_freq_factor", 4.0))
    old_ctx = int(rope.get("original_max_position_embeddings", 8192))
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / float(freq)
        if wavelen < old_ctx / high:
            factors.append(1.0)
        elif wavelen > old_ctx / low:
            factors.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            factors.append(1.0 / ((1.0 - smooth) / factor + smooth))
    return [(GGUF.ROPE_FREQS.weight, np.array(_padded(factors, d // 2, 1.0), dtype=np.float32))]


def _array(key: str, values: list, item: ValueType) -> KV:
    return KV(f"{ARCH}.{key}", ValueType.ARRAY, values, item)


def _in_place(kv: list[KV], new: KV) -> list[KV]:
    """GGUFWriter's overwrite of a key already written: the new value in the key's first place."""
    if any(k.key == new.key for k in kv):
        return [new if k.key == new.key else k for k in kv]
    return [*kv, new]


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's list, then Step35Model.set_gguf_parameters: per-layer head counts (head_count in place), the
    window and its per-layer pattern, the value width, the mixture's sizes and routing, the leading dense count,
    the norm epsilon (in place), the per-layer SwiGLU clamps (per-layer lists over every block, MTP layers
    included) and the MTP layer count."""
    n = block_count
    sliding = _sliding(h, n)
    other = h.get("attention_other_setting") or {}
    heads = [other.get("num_attention_heads", h["num_attention_heads"]) if s else h["num_attention_heads"]
             for s in sliding]
    groups = [other.get("num_attention_groups", h["num_attention_groups"]) if s else h["num_attention_groups"]
              for s in sliding]
    kv = text_model_parameters(h, ARCH, block_count, file_type)
    kv = _in_place(kv, _array("attention.head_count", heads, ValueType.INT32))
    kv = _in_place(kv, _array("attention.head_count_kv", groups, ValueType.INT32))
    kv = _in_place(kv, u32(Keys.Attention.SLIDING_WINDOW.format(arch=ARCH), h["sliding_window"]))
    kv = _in_place(kv, _array("attention.sliding_window_pattern", sliding, ValueType.BOOL))
    kv = _in_place(kv, u32(Keys.Attention.VALUE_LENGTH.format(arch=ARCH), h["head_dim"]))
    kv = _in_place(kv, u32(Keys.LLM.EXPERT_COUNT.format(arch=ARCH), h["moe_num_experts"]))
    kv = _in_place(kv, u32(Keys.LLM.EXPERT_USED_COUNT.format(arch=ARCH), h["moe_top_k"]))
    kv = _in_place(kv, u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_intermediate_size"]))
    kv = _in_place(kv, u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=ARCH), h["share_expert_dim"]))
    if (scale := h.get("moe_router_scaling_factor")) is not None:
        kv = _in_place(kv, f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=ARCH), scale))
    if (norm := h.get("norm_expert_weight")) is not None:
        kv = _in_place(kv, boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=ARCH), norm))
    layers = moe_layers(h)
    kv = _in_place(kv, u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=ARCH), max(0, layers[0]) if layers else 0))
    kv = _in_place(kv, u32(Keys.LLM.MOE_EVERY_N_LAYERS.format(arch=ARCH), int(h.get("moe_every_n_layer", 1))))
    kv = _in_place(kv, f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch=ARCH), h.get("rms_norm_eps", 1e-5)))
    for key, gguf_key in (("swiglu_limits", "swiglu_clamp_exp"), ("swiglu_limits_shared", "swiglu_clamp_shexp")):
        if (limits := h.get(key)) is not None:
            kv = _in_place(kv, _array(gguf_key, _padded([0.0 if v is None else float(v) for v in limits], n, 0.0),
                                      ValueType.FLOAT32))
    if mtp_layers(h):
        kv = _in_place(kv, u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=ARCH), mtp_layers(h)))
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    """TextModel.set_vocab: byte-level BPE (the release ships a tokenizer.json)."""
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="step3p5",
    gguf_arch=ARCH,
    architectures=ARCHITECTURES,
    defaults={"step3p5": {}},
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    generated=rope_freqs,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    extra_blocks=mtp_layers,
    layer_lists_over_extra_blocks=True,
    rename=rename,
    notes={"norm offsets": "1 + w on every RMSNorm, as the converter adds",
           "experts": "stored stacked ([experts, out, in]); written as stored",
           "router bias": "moe.router_bias as exp_probs_b.bias",
           "mtp layers": "num_nextn_predict_layers blocks after the trunk, their own tensors as blk.{n}.nextn.*"},
    # llama.cpp's step35 slides on the layers layer_types names sliding
    runner=RunnerFacts(llama_cpp_applies_window=True),
)
