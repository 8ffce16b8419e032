"""The hyperparameter KV entries every text model writes (the converter's TextModel.set_gguf_parameters),
as one function families call and extend."""
from __future__ import annotations

from typing import Any, Iterable

from .errors import ConfigError
from .gguf_layout import KV, ValueType as T
from .names import Keys


def first(h: dict, keys: Iterable[str]) -> Any:
    """The value of the first key present (None when none is), as the converter's find_hparam reads."""
    for k in keys:
        if k in h:
            return h[k]
    return None


def u32(key: str, value: int) -> KV:
    return KV(key, T.UINT32, int(value))


def f32(key: str, value: float) -> KV:
    return KV(key, T.FLOAT32, float(value))


def string(key: str, value: str) -> KV:
    return KV(key, T.STRING, value)


def boolean(key: str, value: bool) -> KV:
    return KV(key, T.BOOL, bool(value))


# transformers' GELU variants. ggml computes each by its tanh approximation; the exact (erf) GELU differs from
# that by well under 1e-3, inside the logits oracle (the Pythia fixture's exact GELU: NMSE 7e-8 at f32).
GELU = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh")

ROPE_SCALING_GGUF = {"linear": "linear", "yarn": "yarn", "su": "longrope", "longrope": "longrope"}


def text_model_parameters(h: dict, arch: str, block_count: int, file_type: int) -> list[KV]:
    kv = [u32(Keys.LLM.BLOCK_COUNT.format(arch=arch), block_count)]
    if (n_ctx := first(h, ["max_position_embeddings", "n_ctx", "n_positions", "max_length",
                            "max_sequence_length", "model_max_length"])) is not None:
        kv.append(u32(Keys.LLM.CONTEXT_LENGTH.format(arch=arch), n_ctx))
    if (n_embd := first(h, ["hidden_size", "n_embd", "dim"])) is not None:
        kv.append(u32(Keys.LLM.EMBEDDING_LENGTH.format(arch=arch), n_embd))
    if (n_ff := first(h, ["prefix_dense_intermediate_size", "dense_intermediate_size", "intermediate_size",
                          "n_inner", "hidden_dim"])) is not None:
        kv.append(u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch=arch), n_ff))
    if (n_head := first(h, ["num_attention_heads", "n_head", "n_heads"])) is not None:
        kv.append(u32(Keys.Attention.HEAD_COUNT.format(arch=arch), n_head))
    if (n_kv := first(h, ["num_key_value_heads", "n_kv_heads"])) is not None:
        kv.append(u32(Keys.Attention.HEAD_COUNT_KV.format(arch=arch), n_kv))
    if h.get("is_causal") is False:
        kv.append(boolean(Keys.Attention.CAUSAL.format(arch=arch), False))

    rope_all = h.get("rope_parameters") or {}
    rope = rope_all.get("full_attention", rope_all)
    if (rope_type := rope.get("rope_type")) is not None:
        factor = rope.get("factor")
        if rope_type in ("linear", "yarn") and factor is not None:
            kv.append(string(Keys.Rope.SCALING_TYPE.format(arch=arch), rope_type))
            kv.append(f32(Keys.Rope.SCALING_FACTOR.format(arch=arch), factor))
            if rope_type == "yarn":
                if "original_max_position_embeddings" not in rope:
                    raise ConfigError("yarn rope scaling needs rope_parameters.original_max_position_embeddings")
                kv.append(u32(Keys.Rope.SCALING_ORIG_CTX_LEN.format(arch=arch),
                              rope["original_max_position_embeddings"]))
                for key, gguf_key in (("extrapolation_factor", "yarn_ext_factor"),
                                      ("attention_factor", "yarn_attn_factor"),
                                      ("beta_fast", "yarn_beta_fast"), ("beta_slow", "yarn_beta_slow")):
                    value = rope.get(key, rope.get("attn_factor")) if key == "attention_factor" else rope.get(key)
                    if value is not None:
                        kv.append(f32(f"{arch}.rope.scaling.{gguf_key}", value))
        elif rope_type in ("su", "longrope"):
            kv.append(string(Keys.Rope.SCALING_TYPE.format(arch=arch), "longrope"))
    if (theta := rope.get("rope_theta")) is not None:
        kv.append(f32(Keys.Rope.FREQ_BASE.format(arch=arch), theta))
    if (swa_theta := rope_all.get("sliding_attention", {}).get("rope_theta")) is not None:
        kv.append(f32(Keys.Rope.FREQ_BASE_SWA.format(arch=arch), swa_theta))
    if (eps := first(h, ["rms_norm_eps", "norm_eps"])) is not None:
        kv.append(f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch=arch), eps))
    if (eps := first(h, ["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"])) is not None:
        kv.append(f32(Keys.Attention.LAYERNORM_EPS.format(arch=arch), eps))
    if (n := first(h, ["num_local_experts", "num_experts", "n_routed_experts"])) is not None:
        kv.append(u32(Keys.LLM.EXPERT_COUNT.format(arch=arch), n))
    if (n := first(h, ["num_experts_per_tok", "num_experts_per_token", "top_k_experts"])) is not None:
        kv.append(u32(Keys.LLM.EXPERT_USED_COUNT.format(arch=arch), n))
    kv += expert_routing_parameters(h, arch)
    if (head_dim := h.get("head_dim")) is not None:
        kv.append(u32(Keys.Attention.KEY_LENGTH.format(arch=arch), head_dim))
        kv.append(u32(Keys.Attention.VALUE_LENGTH.format(arch=arch), head_dim))
    kv.append(u32(Keys.General.FILE_TYPE, file_type))
    return kv


# TextModel's gating-function names (score_function, scoring_func, ...) -> gguf's ExpertGatingFuncType values
EXPERT_GATING = {"softmax": 1, "sigmoid": 2, "sqrtsoftplus": 4}
SCORE_FUNCTION_KEYS = ("score_function", "scoring_func", "score_func", "moe_router_activation",
                       "moe_router_activation_func", "expert_selection_fn")


def expert_routing_parameters(h: dict, arch: str) -> list[KV]:
    """TextModel's expert-group counts (n_group, topk_group) and the router's scoring function, as stated."""
    kv = []
    if (n := h.get("n_group")) is not None:
        kv.append(u32(Keys.LLM.EXPERT_GROUP_COUNT.format(arch=arch), n))
    if (n := h.get("topk_group")) is not None:
        kv.append(u32(Keys.LLM.EXPERT_GROUP_USED_COUNT.format(arch=arch), n))
    if (func := first(h, SCORE_FUNCTION_KEYS)) is not None:
        if func not in EXPERT_GATING:
            raise ConfigError(f"expert scoring function {func!r}: the converter writes only "
                              f"{', '.join(EXPERT_GATING)}")
        kv.append(u32(Keys.LLM.EXPERT_GATING_FUNC.format(arch=arch), EXPERT_GATING[func]))
    return kv
