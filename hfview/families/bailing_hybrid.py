"""Ling 3.0 (Ling-3.0-tiny, Ling-3.0-flash: BailingMoeV3ForCausalLM, model_type "bailing_hybrid" as released; a config
naming transformers 5.24's own class BailingHybridForCausalLM, which the converter does not register, is refused
by name) -> llama.cpp `bailingmoe3` (the converter's
BailingMoeV3Model).

A hybrid: Kimi Delta Attention layers (q/k/v projections, each through its own causal depthwise short convolution,
stored [channels, 1, kernel] and presented (1, channels, 1, kernel) as for kimi_linear; a full-rank forget gate
f_proj with a per-channel dt_bias (written as the dt "projection"'s bias) and one decay rate per head written as
exp(A_log), computed on read, bounded by kda_lower_bound; beta from b_proj; a sigmoid-gated RMSNorm per head
(o_norm) over the full-rank g_proj) and, at every layer_group_size-th layer, DeepSeek's latent attention (an optional
query bottleneck, kv_b_proj split into attn_k_b / attn_v_b as for deepseek2) with a head-wise sigmoid output gate
(its own g_proj, written attn_gate). Over each layer a leading dense SwiGLU for first_k_dense_replace layers, then
a sigmoid router with a selection bias (mlp.gate.expert_bias) over stacked experts and shared experts, group
limited, renormalised, times routed_scaling_factor. KV heads per layer: 0 on delta-attention layers, 1 on latent.
The next-token-prediction layers the releases store after num_hidden_layers (num_nextn_predict_layers) are
written as extra blocks, as the converter writes them unless --no-mtp (a latent-attention layer with its mixture,
eh_proj, enorm, hnorm and final_layernorm as layer_output_norm).

Under transformers 5.24 the pinned converter fails on every released layout: BailingHybridConfig refuses
Ling-3.0-tiny's integer kda_lower_bound (-5; strict dataclass), which also stops its AutoTokenizer, and where the
config class loads (-5.0) its to_dict renames norm_topk_prob away (KeyError) and writes head_dim as
qk_rope_head_dim. The converter was written against config.json read as it is (its fallback, as under any
transformers that does not know bailing_hybrid): that reading is what the view presents, and its bytes are proved
against the converter run on a copy whose model_type transformers does not know (tests/test_family_bailing_hybrid.py).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, Skip, Split, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..views import EXP, Reshaped
from ._parts.latent import key_half, value_half
from ._parts.state_space import check_leading_dense, conv_weight

ARCH = "bailingmoe3"

# The converter reads config.json as it is (transformers 5.24's class refuses or renames the released keys, see
# above): nothing is filled in, and what the converter needs must be stated (check)
DEFAULTS = {"bailing_hybrid": {}}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "moe_shared_expert_intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
    "rms_norm_eps", "hidden_act", "tie_word_embeddings", "rope_theta", "rope_parameters", "rope_scaling",
    "partial_rotary_factor", "rotary_dim", "layer_group_size", "short_conv_kernel_size", "no_kda_lora",
    "use_kda_lora", "kda_safe_gate", "kda_lower_bound", "gated_attention_proj_granularity_type", "q_lora_rank",
    "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "qk_head_dim", "v_head_dim", "num_experts",
    "num_experts_per_tok", "num_shared_experts", "n_group", "topk_group", "first_k_dense_replace",
    "routed_scaling_factor", "norm_topk_prob", "score_function", "scoring_func", "topk_method",
    "expert_swiglu_limit_list", "share_expert_swiglu_limit_list", "num_nextn_predict_layers", "layer_types",
    "mlp_layer_types", "attention_bias",
})
# The released remote code's switches at the values every Ling 3.0 release states (the computation transformers'
# BailingHybridForCausalLM and llama.cpp's bailingmoe3 both do), training-only settings, and the window
# bookkeeping no Ling code reads
HARMLESS: Harmless = {
    "embedding_dropout": ANY, "output_dropout": ANY, "mtp_loss_scaling_factor": ANY, "seq_aux": ANY,
    "router_dtype": ANY, "max_window_layers": ANY,
    "moe_router_enable_expert_bias": (True,), "rope_interleave": (True,), "linear_silu": (True,),
    "use_qk_norm": (True,), "use_qkv_bias": (False,), "use_bias": (False,), "use_mla_nope": (False,),
    "use_nGPT": (False,), "up_proj_norm": (False,), "value_norm": (False,), "scale_router_input": (False,),
    "mtp_use_kda": (False,), "group_norm_size": (1,), "num_kv_heads_for_linear_attn": (0,),
}

# keys the converter reads without a default (KeyError) or that llama.cpp's bailingmoe3 cannot load without
_NEEDED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "head_dim",
           "max_position_embeddings", "rms_norm_eps", "layer_group_size", "short_conv_kernel_size", "kda_lower_bound",
           "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "moe_intermediate_size",
           "moe_shared_expert_intermediate_size", "num_experts", "num_experts_per_tok", "first_k_dense_replace",
           "routed_scaling_factor", "norm_topk_prob")

_L = "model.layers.{bid}."
_A = _L + "attention."
some = False  # each exists on the layers of one kind only (llama.cpp tells the kinds by head_count_kv)
_FULL_GATE = "attention.head_gate.weight"  # the latent layers' g_proj, renamed (rename) apart from the KDA one's


def decay_rate(sources, h):
    """A_log [heads] as the converter's exp(A_log).reshape(-1, 1): [heads, 1] (the exponential is a value step)."""
    src = sources[0]
    return Reshaped(src, (math.prod(src.shape), 1), "as (heads, 1)")


TENSORS = (
    Tensor("model.word_embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    # Kimi Delta Attention
    *(Tensor(_A + f"{p}_proj.weight", f"blk.{{bid}}.attn_{p}.weight", required=some) for p in ("q", "k", "v")),
    *(Tensor(_A + f"{p}_conv1d.weight", f"blk.{{bid}}.ssm_conv1d_{p}.weight", conv_weight, required=some)
      for p in ("q", "k", "v")),
    Tensor(_A + "f_proj.weight", GGUF.SSM_F_A.weight, required=some),
    Tensor(_A + "dt_bias", GGUF.SSM_DT.bias, required=some),
    Tensor(_A + "A_log", GGUF.SSM_A, decay_rate, steps=(EXP,), required=some),
    Tensor(_A + "b_proj.weight", GGUF.SSM_BETA.weight, required=some),
    Tensor(_A + "g_proj.weight", GGUF.SSM_G_A.weight, required=some),
    Tensor(_A + "o_norm.weight", GGUF.SSM_NORM.weight, required=some),
    # latent attention with its head-wise gate
    Tensor(_A + "q_proj_full.weight", GGUF.ATTN_Q.weight, required=some),
    Tensor(_A + "q_a_proj.weight", GGUF.ATTN_Q_A.weight, required=some),
    Tensor(_A + "q_a_layernorm.weight", GGUF.ATTN_Q_A_NORM.weight, required=some),
    Tensor(_A + "q_b_proj.weight", GGUF.ATTN_Q_B.weight, required=some),
    Tensor(_A + "kv_a_proj_with_mqa.weight", GGUF.ATTN_KV_A_MQA.weight, required=some),
    Tensor(_A + "kv_a_layernorm.weight", GGUF.ATTN_KV_A_NORM.weight, required=some),
    Split(_A + "kv_b_proj.weight", ((GGUF.ATTN_K_B.weight, key_half),
                                    (GGUF.ATTN_V_B.weight, value_half)), required=some),
    Tensor(_L + _FULL_GATE, GGUF.ATTN_GATE.weight, required=some),
    # the output projection both mixers have
    Tensor(_A + "dense.weight", GGUF.ATTN_OUT.weight),
    # the leading dense layers and the mixture
    *(Tensor(_L + f"mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=some) for p in ("gate", "up", "down")),
    Tensor(_L + "mlp.gate.weight", GGUF.FFN_GATE_INP.weight, required=some),
    Tensor(_L + "mlp.gate.expert_bias", GGUF.FFN_EXP_PROBS_B.bias, required=some),
    *(Experts(_L + f"mlp.experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "num_experts",
              required=some) for p in ("down", "gate", "up")),
    *(Tensor(_L + f"mlp.shared_experts.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=some)
      for p in ("gate", "up", "down")),
    # the next-token-prediction layers' own tensors
    Tensor(_L + "eh_proj.weight", GGUF.NEXTN_EH_PROJ.weight, required=some),
    Tensor(_L + "enorm.weight", GGUF.NEXTN_ENORM.weight, required=some),
    Tensor(_L + "hnorm.weight", GGUF.NEXTN_HNORM.weight, required=some),
    Tensor(_L + "final_layernorm.weight", GGUF.LAYER_OUT_NORM.weight, required=some),
    Skip(_A + "rotary_emb.inv_freq"),
)


def is_full_attention(h: dict, bid: int) -> bool:
    """BailingMoeV3Model.is_full_attention: the MTP blocks, every layer_group_size-th layer, and any layers after
    the last whole group (which no release has: check refuses a layer count that is not whole groups)."""
    n, size = h["num_hidden_layers"], h["layer_group_size"]
    return bid >= n or (bid + 1) % size == 0 or bid >= n // size * size


_LAYER = re.compile(r"model\.layers\.(\d+)\.attention\.(g_proj|q_proj|f_proj)\.weight$")
_ON_LATENT = {"g_proj": _FULL_GATE, "q_proj": "attention.q_proj_full.weight",
              # a forget gate on a latent layer: the converter stops (ValueError); no rule matches the name, so the
              # view refuses the tensor by name
              "f_proj": "attention.f_proj.on_a_latent_attention_layer"}


def rename(name: str, h: dict) -> str:
    """A latent layer's g_proj is its head-wise gate (attn_gate) and its q_proj the query without bottleneck
    (attn_q); a delta layer's are ssm_g_a and attn_q: told apart by the layer's kind, as the converter does."""
    m = _LAYER.match(name)
    if m and is_full_attention(h, int(m.group(1))):
        return f"model.layers.{m.group(1)}." + _ON_LATENT[m.group(2)]
    return name


def mtp_layers(h: dict) -> int:
    return h.get("num_nextn_predict_layers") or 0


def _kinds(h: dict) -> list[str]:
    return ["full_attention" if is_full_attention(h, i) else "linear_attention" for i in range(h["num_hidden_layers"])]


def _negative_bound(v) -> bool:
    # None passes here: check names it among the keys not stated
    return v is None or (not isinstance(v, bool) and isinstance(v, (int, float)) and v < 0)


REFUSE = (
    Refuse("no_kda_lora", bool, "the converter writes only the full-rank KDA gates (it refuses KDA LoRA "
           "projections), and transformers' class has no other; every Ling 3.0 release states true"),
    Refuse("use_kda_lora", unset, "KDA LoRA projections, which neither the converter nor transformers' "
           "BailingHybridForCausalLM computes"),
    # `is True`: a tuple (True,) would also let 1 and 1.0 pass
    Refuse("kda_safe_gate", lambda v: v is True, f"the converter writes only the bounded forget gate "
           f"(lower_bound x sigmoid), which llama.cpp's {ARCH} asserts"),
    Refuse("kda_lower_bound", _negative_bound, f"llama.cpp's {ARCH} needs a negative bound (it asserts "
           f"kda.gate_lower_bound < 0); every Ling 3.0 release states -5"),
    Refuse("gated_attention_proj_granularity_type", ("head_wise",), "the converter writes only the head-wise "
           "attention gate (\"head_wise\", as every Ling 3.0 release states)"),
    Refuse("hidden_act", ("silu",), f"llama.cpp's {ARCH} computes SiLU", default="silu"),
    Refuse("tie_word_embeddings", unset, "transformers' BailingHybridForCausalLM ties nothing (its lm_head stays "
           "its own), while llama.cpp would read the embeddings as the output; every Ling 3.0 release is untied"),
    Refuse("attention_bias", unset, f"llama.cpp's {ARCH} has no attention biases"),
    # None passes here: check names it among the keys not stated
    Refuse("norm_topk_prob", lambda v: v is None or bool(v), "every Ling 3.0 release renormalises the chosen "
           "weights; the view presents only what releases state"),
    *(Refuse(key, (None,), "the converter writes these SwiGLU clamps, which transformers' "
             "BailingHybridForCausalLM does not compute (every release: null)")
      for key in ("expert_swiglu_limit_list", "share_expert_swiglu_limit_list")),
    Refuse("rope_parameters.rope_theta", stated, "not stated: transformers' class defaults it to "
           "6000000, the converter writes none and llama.cpp would rotate by 10000; state it as every Ling 3.0 "
           "release does"),
)


def check(h: dict, path: Path) -> None:
    missing = [k for k in _NEEDED if h.get(k) is None]
    if missing:
        raise ConfigError(f"{path}: no {', '.join(missing)}: the converter reads config.json as it is and needs "
                          f"{'it' if len(missing) == 1 else 'them'} (KeyError, or a file llama.cpp's bailingmoe3 "
                          f"cannot load); state {'it' if len(missing) == 1 else 'them'} as every Ling 3.0 release does")
    n, size = h["num_hidden_layers"], h["layer_group_size"]
    if size < 1 or n % size:
        raise ConfigError(f"{path}: num_hidden_layers {n} is not a whole number of layer_group_size {size} groups: "
                          f"the converter makes the layers after the last whole group latent attention, "
                          f"transformers delta attention, so the file would run another model")
    kinds = _kinds(h)
    if "linear_attention" not in kinds:
        raise ConfigError(f"{path}: layer_group_size {size}: every layer latent attention; llama.cpp's bailingmoe3 "
                          f"needs its recurrent layers (no Ling 3.0 release is all latent attention)")
    if h.get("layer_types") is not None and list(h["layer_types"]) != kinds:
        raise ConfigError(f"{path}: layer_types {list(h['layer_types'])} disagree with layer_group_size {size}: "
                          f"transformers runs layer_types, the converter writes every {size}th layer as latent "
                          f"attention, so the file would run another model")
    check_leading_dense(h, path, n, ARCH)
    func = h.get("score_function") or h.get("scoring_func")
    if func is None:
        raise ConfigError(f"{path}: no score_function or scoring_func: transformers' router scores by sigmoid, but "
                          f"without the key the converter writes no gating function and llama.cpp's bailingmoe3 "
                          f"cannot load the file; state \"sigmoid\" as every release does")
    if func != "sigmoid" or h.get("topk_method", "noaux_tc") != "noaux_tc":
        raise ConfigError(f"{path}: router {func!r} / topk_method {h.get('topk_method')!r}: transformers' "
                          f"BailingHybridForCausalLM scores by sigmoid with a selection bias (noaux_tc) only")
    shared = h.get("num_shared_experts", 1)
    if shared < 1 or h["moe_shared_expert_intermediate_size"] != h["moe_intermediate_size"] * shared:
        raise ConfigError(f"{path}: moe_shared_expert_intermediate_size {h['moe_shared_expert_intermediate_size']} "
                          f"is not moe_intermediate_size {h['moe_intermediate_size']} x num_shared_experts {shared}: "
                          f"transformers sizes the shared experts so, the converter writes the stated width")
    if (h.get("n_group") is None) != (h.get("topk_group") is None):
        raise ConfigError(f"{path}: n_group {h.get('n_group')!r} and topk_group {h.get('topk_group')!r}: state both "
                          f"(transformers limits the groups by both, the converter writes each only where stated)")
    rope, qk_rope = h.get("rope_parameters") or {}, h["qk_rope_head_dim"]
    if rope.get("rope_type", "default") != "default" or rope.get("factor") is not None:
        raise ConfigError(f"{path}: rope_parameters {rope!r}: Ling 3.0 releases use the default rope; the converter "
                          f"writes no scaling for bailingmoe3")
    if h.get("rotary_dim") is not None and h["rotary_dim"] != qk_rope:
        raise ConfigError(f"{path}: rotary_dim {h['rotary_dim']} is not qk_rope_head_dim {qk_rope}: transformers "
                          f"rotates qk_rope_head_dim dimensions, the rest of the latent key is not rotated")
    factor = h.get("partial_rotary_factor", rope.get("partial_rotary_factor"))
    if factor is not None and factor * h["head_dim"] != qk_rope:
        raise ConfigError(f"{path}: partial_rotary_factor {factor} x head_dim {h['head_dim']} is not "
                          f"qk_rope_head_dim {qk_rope} (as released: 0.5 x 128 = 64)")
    if h.get("qk_head_dim") is not None and h["qk_head_dim"] != h["qk_nope_head_dim"] + qk_rope:
        raise ConfigError(f"{path}: qk_head_dim {h['qk_head_dim']} is not qk_nope_head_dim + qk_rope_head_dim "
                          f"{h['qk_nope_head_dim'] + qk_rope}")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """BailingMoeV3Model.set_gguf_parameters: TextModel's entries with one KV head, the per-layer KV heads written
    over that entry, the vocabulary size, the short-conv kernel, the delta heads' width and gate, the latent ranks
    and widths (key_length written over TextModel's), the expert widths and counts, the router's scale and
    renormalisation, and the MTP layer count."""
    kv = text_model_parameters(dict(h, num_key_value_heads=1), ARCH, block_count, file_type)
    heads = [1 if is_full_attention(h, i) else 0 for i in range(block_count)]
    at = next(i for i, e in enumerate(kv) if e.key == f"{ARCH}.attention.head_count_kv")
    kv[at] = KV(Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH), ValueType.ARRAY, heads, ValueType.INT32)
    kv_lora, rope = h["kv_lora_rank"], h["qk_rope_head_dim"]
    key_at = next(i for i, e in enumerate(kv) if e.key == f"{ARCH}.attention.key_length")
    kv[key_at] = u32(Keys.Attention.KEY_LENGTH.format(arch=ARCH), kv_lora + rope)
    kv += [u32(Keys.LLM.VOCAB_SIZE.format(arch=ARCH), h["vocab_size"]),
           u32(Keys.SSM.CONV_KERNEL.format(arch=ARCH), h["short_conv_kernel_size"]),
           u32(Keys.KDA.HEAD_DIM.format(arch=ARCH), h["head_dim"]),
           boolean(Keys.KDA.SAFE_GATE.format(arch=ARCH), h["kda_safe_gate"]),
           f32(Keys.KDA.GATE_LOWER_BOUND.format(arch=ARCH), h["kda_lower_bound"])]
    if h.get("q_lora_rank") is not None:
        kv.append(u32(Keys.Attention.Q_LORA_RANK.format(arch=ARCH), h["q_lora_rank"]))
    kv += [u32(Keys.Attention.KV_LORA_RANK.format(arch=ARCH), kv_lora),
           u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), rope),
           u32(Keys.Attention.KEY_LENGTH_MLA.format(arch=ARCH), h["qk_nope_head_dim"] + rope),
           u32(Keys.Attention.VALUE_LENGTH_MLA.format(arch=ARCH), h["v_head_dim"]),
           u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_intermediate_size"]),
           u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_shared_expert_intermediate_size"]),
           u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=ARCH), h.get("num_shared_experts", 1)),
           u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=ARCH), h["first_k_dense_replace"]),
           f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=ARCH), h["routed_scaling_factor"]),
           boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=ARCH), h["norm_topk_prob"])]
    if mtp_layers(h):
        kv.append(u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=ARCH), mtp_layers(h)))
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    """BailingMoeV3Model.set_vocab: tokenizer.json's byte-level BPE (_set_vocab_gpt2)."""
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="bailing_hybrid",
    gguf_arch=ARCH,
    architectures=("BailingMoeV3ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    rename=rename,
    extra_blocks=mtp_layers,
)
