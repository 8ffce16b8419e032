"""Ling 2.0 / Ring 2.0 (Ling-mini-2.0, Ling-flash-2.0, Ring-mini-2.0: BailingMoeV2ForCausalLM, model_type
"bailing_moe" as released) -> llama.cpp `bailingmoe2` (the converter's BailingMoeV2Model).

Remote code only: transformers 5.24 has no class, so the converter reads config.json as it is. The block is
Sarvam-MoE's (hfview.families.sarvam_moe, which is the BailingMoeV2 block under Sarvam's name): fused
query_key_value, per-head q/k RMSNorms before rope, rotate-half rope over the first partial_rotary_factor of
each head (the converter's default 0.5), leading dense layers, a sigmoid router whose choice adds
`mlp.gate.expert_bias` (here presented as stored: only Sarvam's class centres it), group limits, the chosen
weights renormalised and times routed_scaling_factor, one shared expert. Ling's remote code renormalises the
chosen weights whenever more than one is chosen, so a config saying otherwise is refused.

BailingMoeForCausalLM (Ling 1.x) shares the model_type "bailing_moe" but is llama.cpp's `bailingmoe`, another
architecture: hfview.families.bailing_moe presents it, the registry choosing by `architectures`.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor
from . import sarvam_moe
from ._parts.checks import architecture

DEFAULTS = {"bailing_moe": {}, "bailing_moe_v2": {}}  # no transformers class: nothing is filled in

READS = frozenset(sarvam_moe.READS | {"partial_rotary_factor", "rotary_dim", "use_bias", "norm_head",
                                      "norm_softmax", "use_rmsnorm", "using_split_qkv_in_self_attention"})
HARMLESS: Harmless = {
    # dropout rates and training-only settings: no forward pass reads them
    "embedding_dropout": ANY, "output_dropout": ANY, "mtp_loss_scaling_factor": ANY,
    # the router's precision: llama.cpp scores experts in f32 as "fp32" asks; the bias is there or not (tensors)
    "router_dtype": ANY, "moe_router_enable_expert_bias": ANY,
    # Qwen-style window bookkeeping Ling's code never reads (it has no sliding window)
    "max_window_layers": ANY,
}
ALIASES = dict(sarvam_moe.ALIASES)

_NEEDED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
           "num_key_value_heads", "rms_norm_eps", "max_position_embeddings", "n_routed_experts", "num_experts_per_tok",
           "moe_intermediate_size", "n_shared_experts", "first_k_dense_replace", "routed_scaling_factor",
           "norm_topk_prob")

# as Sarvam's, with the selection bias as stored
TENSORS = tuple(Tensor(r.hf, r.gguf, r.view, (), r.required, r.when) if getattr(r, "steps", ()) else r
                for r in sarvam_moe.TENSORS)


def rotary_factor(h: dict) -> float:
    """The converter's partial rotary: rope_parameters' (from rope_scaling), else the stated key, else 0.5."""
    rope = h.get("rope_parameters") or {}
    if "partial_rotary_factor" in rope:
        return rope["partial_rotary_factor"]
    return h.get("partial_rotary_factor", 0.5)


def rope_dim(h: dict) -> int:
    return int(sarvam_moe.head_dim(h) * rotary_factor(h))


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None and h.get("num_attention_heads") is not None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


REFUSE = (
    # unstated too: Ling 1.x shares the model_type (a stated other class is the engine's refusal)
    Refuse("architectures", lambda v: architecture({"architectures": v}) == "BailingMoeV2ForCausalLM",
           "the bailing_moe_v2 family reads BailingMoeV2ForCausalLM"),
    # `is`: the layout flag must be the boolean itself (1 or 0 are refused); absent is the layout's value
    *(Refuse(key, lambda v, off=off: v is off, f"Ling 2.0's layout has it {str(off).lower()}, which is what "
             f"llama.cpp's bailingmoe2 computes", default=off)
      for key, off in (("use_bias", False), ("norm_head", False), ("norm_softmax", False), ("use_rmsnorm", True),
                       ("using_split_qkv_in_self_attention", False))),
)


def check(h: dict, path: Path) -> None:
    missing = [k for k in _NEEDED if h.get(k) is None]
    if missing:
        raise ConfigError(f"{path}: Ling 2.0 needs {missing[0]!r} (read as stated: transformers has no class to fill "
                          f"it in); add it as the released config.json has it")
    h = {"hidden_act": "silu", "attention_bias": False, "use_qk_norm": True, **h}
    sarvam_moe.check_block(h, path)
    if not h["norm_topk_prob"] and h["num_experts_per_tok"] > 1:
        raise ConfigError(f"{path}: norm_topk_prob false: Ling 2.0's code renormalises the chosen experts' weights "
                          f"whenever more than one is chosen, while the converter would tell llama.cpp not to")
    factor = rotary_factor(h)
    if not 0 < factor <= 1 or rope_dim(h) % 2:
        raise ConfigError(f"{path}: partial_rotary_factor {factor!r}: an even number of rotated dims per head is "
                          f"needed (head_dim {sarvam_moe.head_dim(h)})")
    if h.get("rotary_dim") is not None and h["rotary_dim"] != rope_dim(h):
        raise ConfigError(f"{path}: rotary_dim {h['rotary_dim']} is not head_dim x partial_rotary_factor = "
                          f"{rope_dim(h)}, which the converter writes")


FAMILY = Family(
    name="bailing_moe_v2",
    gguf_arch=sarvam_moe.ARCH,
    architectures=("BailingMoeV2ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=sarvam_moe.bailing_v2_parameters(rope_dim),
    vocab=sarvam_moe.gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    stored_kv=sarvam_moe.check_layers,
    aliases=ALIASES,
)
