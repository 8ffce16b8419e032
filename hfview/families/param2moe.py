"""Param2 MoE (bharatgenai/Param2-17B-A2.4B-Thinking: Param2MoEForCausalLM, model_type "param2moe"; remote code)
-> llama.cpp `bailingmoe2`, under hfview's own mapping: transformers 5.24 has no class for it and the pinned
converter no class for Param2MoEForCausalLM.

Read from Param2's modeling code as its public copies state it (vLLM's and SGLang's param2moe.py, the Megatron
bridge, transformers' later Param2MoE class), the forward is Ling 2.0's (hfview.families.bailing_moe_v2) under
Ling's tensor names: fused query_key_value split q|k|v, per-head q/k RMSNorms (query_layernorm / key_layernorm)
before a rotate-half (neox) rope over the first head_dim x partial_rotary_factor dims, RMSNorm pre-norm blocks,
first_k_dense_replace dense SwiGLU layers, then mixtures: a sigmoid router (mlp.gate, scored in f32) whose top-k
choice adds mlp.gate.expert_bias (vLLM centres it first, which changes no choice), the chosen unbiased scores
renormalised where norm_topk_prob says and times routed_scaling_factor, plus always-on shared experts. Expert
groups (n_group / topk_group; 1 / 1 in all Param2's defaults) are scored by each group's two best biased scores, as
vLLM's and SGLang's grouped top-k, transformers' later Param2MoE class and llama.cpp score them. No sliding
window (max_window_layers is bookkeeping no copy reads), no MTP layers in any inference copy.

What is Param2's own, and how the view says it to llama.cpp:

* Defaults are Param2's: partial_rotary_factor 1.0 (the whole head rotates; the converter's BailingMoeV2Model
  would take 0.5), score_function sigmoid, norm_topk_prob true. Keys whose default differs between Param2's own
  copies (use_qk_norm: vLLM/SGLang false, the bridge true; tie_word_embeddings; num_shared_experts;
  routed_scaling_factor) must be stated, as the released config.json states them.
* Two shared experts, stored as ONE SwiGLU `mlp.shared_experts` of moe_shared_expert_intermediate_size (the total
  width; else moe_intermediate_size x num_shared_experts), as every copy builds it. llama.cpp's bailingmoe2 loads
  the shared FFN expert_shared_feed_forward_length x expert_shared_count wide, while the converter writes the total
  width there: for two shared experts the converter's file is twice too wide for the stored tensors and llama.cpp
  refuses to load it. The view writes the per-expert width (total / count) with the count, which loads the stored
  tensor as it is: the one thing it states otherwise than the converter would.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse
from . import bailing_moe_v2, sarvam_moe

ARCHITECTURES = ("Param2MoEForCausalLM",)

# Param2's defaults where its copies agree (vLLM's getattr defaults, the bridge's, transformers' Param2MoEConfig)
DEFAULTS = {"param2moe": dict(partial_rotary_factor=1.0, score_function="sigmoid", norm_topk_prob=True)}

READS = frozenset(sarvam_moe.READS | {"partial_rotary_factor", "rotary_dim", "use_bias", "use_rmsnorm",
                                      "sliding_window", "scoring_func"})
HARMLESS: Harmless = {
    # dropout rates and training-only settings: no forward pass reads them
    "embedding_dropout": ANY, "output_dropout": ANY, "mtp_loss_scaling_factor": ANY, "router_aux_loss_coef": ANY,
    # the router's precision (llama.cpp scores in f32 as "fp32" asks); whether a selection bias exists is told by
    # the stored mlp.gate.expert_bias (llama.cpp's exp_probs_b is optional)
    "router_dtype": ANY, "moe_router_enable_expert_bias": ANY,
    # window bookkeeping the bridge writes and no copy's attention reads (sliding_window itself is checked)
    "max_window_layers": ANY, "use_sliding_window": (False,),
}
ALIASES = dict(sarvam_moe.ALIASES)

# stated in every config the bridge writes; absent, Param2's own copies disagree (or the converter needs it)
_NEEDED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
           "num_key_value_heads", "rms_norm_eps", "max_position_embeddings", "n_routed_experts", "num_experts_per_tok",
           "moe_intermediate_size", "n_shared_experts", "first_k_dense_replace", "routed_scaling_factor",
           "use_qk_norm", "tie_word_embeddings")

TENSORS = bailing_moe_v2.TENSORS  # Ling's names; the selection bias as stored (the converter's BailingMoeV2Model)


def rotary_factor(h: dict) -> float:
    return h["partial_rotary_factor"]


def rope_dim(h: dict) -> int:
    return int(sarvam_moe.head_dim(h) * rotary_factor(h))


def shared_width(h: dict) -> int:
    """The one fused shared SwiGLU's width, as vLLM / SGLang build it."""
    stated = h.get("moe_shared_expert_intermediate_size")
    return stated if stated is not None else h["moe_intermediate_size"] * h["n_shared_experts"]


def as_llama_cpp_reads(h: dict) -> dict:
    """The shared width per shared expert, which llama.cpp's bailingmoe2 multiplies by their count again."""
    return dict(h, moe_shared_expert_intermediate_size=shared_width(h) // h["n_shared_experts"])


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return sarvam_moe.bailing_v2_parameters(rope_dim)(as_llama_cpp_reads(h), block_count, file_type)


def check_layers(h: dict, stored: dict) -> list:
    """No KV: each layer holds the FFN llama.cpp's bailingmoe2 loads for it, the shared one as wide as the config
    says (llama.cpp would refuse it otherwise, past the view)."""
    sarvam_moe.check_layers(h, stored)
    for i in range(h["first_k_dense_replace"], h["num_hidden_layers"]):
        name = f"model.layers.{i}.mlp.shared_experts.gate_proj.weight"
        if stored[name].shape[0] != shared_width(h):
            raise CheckpointError(f"tensor {name!r} is {stored[name].shape[0]} wide, but the config's shared experts "
                                  f"are {shared_width(h)} (moe_shared_expert_intermediate_size, else "
                                  f"moe_intermediate_size x num_shared_experts): the config does not describe "
                                  f"these weights")
    return []


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None and h.get("num_attention_heads") is not None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


_ABSENT = object()  # a partial_rotary_factor in rope_parameters is refused where stated at all

REFUSE = (
    # transformers' later Param2MoEConfig spelling
    Refuse("scoring_func", (None, "sigmoid"), "Param2's router scores experts by sigmoid (score_function), as "
           "llama.cpp's bailingmoe2 is told"),
    # `is`: the layout flag must be the boolean itself (1 or 0 are refused); absent is the layout's value
    *(Refuse(key, lambda v, off=off: v is off, f"Param2's layout has it {str(off).lower()}, which is what llama.cpp's "
             f"bailingmoe2 computes (it loads no output/FFN biases and norms by RMS)", default=off)
      for key, off in (("use_bias", False), ("use_rmsnorm", True))),
    Refuse("sliding_window", lambda v: v is None, "Param2's inference code (vLLM, SGLang) attends over the whole "
           "context, and so does llama.cpp's bailingmoe2; a window would be ignored"),
    Refuse("rope_parameters.partial_rotary_factor", lambda v: v is _ABSENT, "stated inside rope_scaling: Param2's "
           "code reads it at the top level only (the converter would take this one)", default=_ABSENT),
)


def check(h: dict, path: Path) -> None:
    missing = [k for k in _NEEDED if h.get(k) is None]
    if missing:
        raise ConfigError(f"{path}: Param2 needs {missing[0]!r} stated (transformers has no class to fill it in, and "
                          f"Param2's own copies default it differently); add it as the released config.json has it")
    h = {"hidden_act": "silu", "attention_bias": False, **h}
    sarvam_moe.check_block(h, path, one_shared=False)
    factor = rotary_factor(h)
    if not 0 < factor <= 1 or rope_dim(h) % 2:
        raise ConfigError(f"{path}: partial_rotary_factor {factor!r}: an even number of rotated dims per head is "
                          f"needed (head_dim {sarvam_moe.head_dim(h)})")
    if h.get("rotary_dim") is not None and h["rotary_dim"] != rope_dim(h):
        raise ConfigError(f"{path}: rotary_dim {h['rotary_dim']} is not head_dim x partial_rotary_factor = "
                          f"{rope_dim(h)}: Param2's copies disagree on which one wins (vLLM: the factor, SGLang: the "
                          f"factor where stated)")
    # code, not a Refuse: read once the presence check above has named it if absent
    n_shared = h["n_shared_experts"]
    if n_shared < 1:
        raise ConfigError(f"{path}: num_shared_experts {n_shared}: llama.cpp's bailingmoe2 always adds a shared FFN")
    if shared_width(h) % n_shared:
        raise ConfigError(f"{path}: moe_shared_expert_intermediate_size {shared_width(h)} is not a multiple of "
                          f"num_shared_experts {n_shared}: llama.cpp's bailingmoe2 sizes the shared FFN as a width "
                          f"per shared expert times their count")


FAMILY = Family(
    name="param2moe",
    gguf_arch=sarvam_moe.ARCH,
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=sarvam_moe.gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    stored_kv=check_layers,
    aliases=ALIASES,
    no_converter="the pinned converter has no class for Param2MoEForCausalLM; hfview's own mapping presents it as "
                 "llama.cpp's bailingmoe2 (Ling 2.0's BailingMoeV2Model, whose block Param2's is), with Param2's "
                 "defaults (full rotary) and its shared experts' width written per shared expert",
)
