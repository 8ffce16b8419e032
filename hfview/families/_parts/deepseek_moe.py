"""DeepSeek's mixture (leading dense layers, routed experts stacked, fused shared experts) and the checks of its
router: softmax top-k (V2) or sigmoid scores with group limits (V3)."""
from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from ...family import Experts, Tensor
from ...names import GGUF


def mixture_tensors(prefix: str = "model.") -> tuple:
    """The leading dense FFNs, the router (and its selection bias), stacked experts and fused shared experts;
    each exists in some layers only (llama.cpp checks which by leading_dense_block_count)."""
    layer = f"{prefix}layers.{{bid}}.mlp."
    some = False
    return (
        *(Tensor(f"{layer}{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=some) for p in ("gate", "up", "down")),
        Tensor(f"{layer}gate.weight", GGUF.FFN_GATE_INP.weight, required=some),
        Tensor(f"{layer}gate.e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias, required=some),
        *(Experts(f"{layer}experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "n_routed_experts",
                  required=some) for p in ("down", "gate", "up")),
        *(Tensor(f"{layer}shared_experts.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=some)
          for p in ("gate", "up", "down")),
    )


def check_mixture(h: dict, path: Path) -> None:
    if h.get("moe_layer_freq", 1) != 1:
        raise ConfigError(f"{path}: moe_layer_freq {h['moe_layer_freq']!r}: the released code then makes every "
                          f"layer i with i % {h['moe_layer_freq']!r} != 0 dense; transformers, the converter and "
                          f"llama.cpp's deepseek2 make every layer after first_k_dense_replace a mixture")
    for key in ("n_routed_experts", "num_experts_per_tok"):
        if not h.get(key):
            raise ConfigError(f"{path}: {key} {h.get(key)!r}: llama.cpp's deepseek2 needs routed experts "
                              f"(n_expert and n_expert_used > 0)")
    if not h.get("n_shared_experts"):
        raise ConfigError(f"{path}: n_shared_experts {h.get('n_shared_experts')!r}: llama.cpp's deepseek2 needs "
                          f"shared-expert tensors in every mixture layer")


def check_sigmoid_router(h: dict, path: Path, model: str, arch: str = "deepseek2",
                         scoring_func_needed: bool = True) -> None:
    """DeepSeek-V3's router as transformers' `model` runs it (sigmoid scores, noaux_tc group limits) against
    what the converter writes for llama.cpp's `arch`: without a stated scoring_func it writes no gating
    function (`scoring_func_needed`: llama.cpp then scores otherwise, or fails to load)."""
    if "scoring_func" not in h and scoring_func_needed:
        raise ConfigError(f"{path}: no scoring_func: transformers' {model} scores experts by sigmoid, but without "
                          f"the key the converter writes no gating function and llama.cpp's {arch} then scores "
                          f"by softmax (or refuses to load); state scoring_func \"sigmoid\" as every release does "
                          f"(transformers 5 leaves it out when it saves a config)")
    if h.get("scoring_func", "sigmoid") != "sigmoid":
        raise ConfigError(f"{path}: scoring_func {h['scoring_func']!r}: transformers' {model} scores experts by "
                          f"sigmoid only, so the converter's {h['scoring_func']!r} gating would run otherwise")
    if h.get("topk_method", "noaux_tc") != "noaux_tc":
        raise ConfigError(f"{path}: topk_method {h['topk_method']!r}: transformers' {model} and llama.cpp's "
                          f"{arch} choose experts by noaux_tc (biased sigmoid scores, groups by their two best) "
                          f"only")


def check_groups(h: dict, path: Path) -> None:
    n_group, topk_group, n_expert = h.get("n_group"), h.get("topk_group"), h["n_routed_experts"]
    if not n_group or not topk_group or n_expert % n_group or n_expert // n_group < 2 or topk_group > n_group:
        raise ConfigError(f"{path}: n_group {n_group!r}, topk_group {topk_group!r} over {n_expert} experts: "
                          f"DeepSeek-V3's router keeps topk_group of n_group equal groups of at least two experts")
