"""State-space and linear-attention layers: Mamba's squeezed conv1d and per-head / per-group views, Mamba-2's
dimensions, the vocab padding the converter applies, and Kimi Delta Attention's tensors and checks."""
from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from ...family import Tensor
from ...names import GGUF
from ...params import first
from ...views import NEG_EXP, Reshaped


# float32's largest finite value
_F32_MAX = 3.4028234663852886e38


def clamps_nothing(limit) -> bool:
    """For time_step_limit (Mamba-2's clamp of its step): unstated, or a range that holds every step. The step is a
    softplus, never below 0, so a lower bound at or below 0 clamps nothing; an upper bound at or past float32's largest
    value clamps nothing a float32 (or narrower) step can hold: [0.0, Infinity] and [0.0, 1e+308] alike."""
    return limit is None or (len(limit) == 2 and limit[0] <= 0.0 and limit[1] >= _F32_MAX)


def squeezed(sources, h):
    src = sources[0]
    return Reshaped(src, tuple(d for d in src.shape if d != 1), "squeezed")


def padded_vocab(h: dict) -> int:
    """The converter's vocabulary size: config.json's, rounded up to a multiple of pad_vocab_size_multiple."""
    pad = h.get("pad_vocab_size_multiple", 8)
    return -(h["vocab_size"] // -pad) * pad


def per_head(sources, h):
    src = sources[0]
    return Reshaped(src, (*src.shape, 1), "as [heads, 1]")


def by_group(sources, h):
    src = sources[0]
    groups = mamba2_dims(h)["n_group"]
    if src.shape[0] % groups:
        raise ConfigError(f"tensor {src.name!r} ({src.shape[0]} wide) does not split into n_groups = {groups}")
    return Reshaped(src, (groups, src.shape[0] // groups), f"as [{groups} groups, {src.shape[0] // groups}]")


def mamba2_dims(h: dict) -> dict:
    d_model = first(h, ["hidden_size", "d_model", "dim"])
    expand = first(h, ["mamba_expand", "expand"]) or 2
    return dict(d_model=d_model, d_inner=first(h, ["mamba_d_ssm", "intermediate_size", "d_inner"]) or expand * d_model,
                expand=expand, n_group=first(h, ["n_groups"]) or 1, d_conv=first(h, ["conv_kernel", "d_conv"]) or 4,
                d_state=first(h, ["state_size", "d_state"]) or 128, head_dim=first(h, ["mamba_d_head", "head_dim"]) or 64,
                eps=first(h, ["layer_norm_epsilon", "rms_norm_eps"]) or 1e-5)


_L = "model.layers.{bid}."


_A = _L + "self_attn."


def conv_weight(sources, h):
    """[channels, 1, kernel] (or [channels, kernel]) as the converter's (1, channels, 1, kernel)."""
    src = sources[0]
    return Reshaped(src, (1, src.shape[0], 1, src.shape[-1]), "as (1, channels, 1, kernel)")


# Kimi Delta Attention's tensors (its layers only: llama.cpp tells the kinds by head_count_kv), as GLM-5 Next has
# them too
KIMI_DELTA_ATTENTION = (
    *(Tensor(_A + f"{p}_proj.weight", f"blk.{{bid}}.attn_{p}.weight", required=False) for p in ("q", "k", "v")),
    *(Tensor(_A + f"{p}_conv1d.weight", f"blk.{{bid}}.ssm_conv1d_{p}.weight", conv_weight, required=False)
      for p in ("q", "k", "v")),
    Tensor(_A + "f_a_proj.weight", GGUF.SSM_F_A.weight, required=False),
    Tensor(_A + "f_b_proj.weight", GGUF.SSM_F_B.weight, required=False),
    Tensor(_A + "dt_bias", GGUF.SSM_DT.bias, required=False),
    Tensor(_A + "A_log", GGUF.SSM_A, steps=(NEG_EXP,), required=False),
    Tensor(_A + "b_proj.weight", GGUF.SSM_BETA.weight, required=False),
    Tensor(_A + "g_a_proj.weight", GGUF.SSM_G_A.weight, required=False),
    Tensor(_A + "g_b_proj.weight", GGUF.SSM_G_B.weight, required=False),
    Tensor(_A + "o_norm.weight", GGUF.SSM_NORM.weight, required=False),
)


def check_leading_dense(h: dict, path: Path, n: int, arch: str) -> int:
    """first_k_dense_replace (returned) within the layer count, and mlp_layer_types (where stated) the same leading
    dense layers: the only placement llama.cpp's mixture graphs (kimi-linear, bailingmoe3) compute."""
    dense = h["first_k_dense_replace"]
    if not 0 <= dense <= n:
        raise ConfigError(f"{path}: first_k_dense_replace {dense}: must lie between 0 and the {n} layers")
    mlp = h.get("mlp_layer_types")
    if mlp is not None and list(mlp) != ["dense" if i < dense else "sparse" for i in range(n)]:
        raise ConfigError(f"{path}: mlp_layer_types {list(mlp)} disagree with first_k_dense_replace {dense}: "
                          f"llama.cpp's {arch} makes exactly the first {dense} layers dense")
    return dense


def check_kimi_heads(h: dict, path: Path, arch: str, reference: str) -> None:
    """Kimi's delta and latent attention sized as llama.cpp's `arch` sizes them (kimi-linear, kimi-k3): the delta
    heads by the attention head count, the latent keys and values one per query head, as `reference` computes."""
    lac = h["linear_attn_config"]
    if lac["num_heads"] != h["num_attention_heads"]:
        raise ConfigError(f"{path}: linear_attn_config.num_heads {lac['num_heads']} is not num_attention_heads "
                          f"{h['num_attention_heads']}: llama.cpp's {arch} sizes the delta attention's heads by the "
                          f"attention head count (the converter writes no other)")
    if h["num_key_value_heads"] != h["num_attention_heads"]:
        raise ConfigError(f"{path}: num_key_value_heads {h['num_key_value_heads']} is not num_attention_heads "
                          f"{h['num_attention_heads']}: the converter splits kv_b_proj by num_key_value_heads, "
                          f"{reference} expands it per query head")


def by_mamba_n_groups(sources, h):
    src = sources[0]
    groups = h["mamba_n_groups"]
    if src.shape[0] % groups:
        raise ConfigError(f"tensor {src.name!r} ({src.shape[0]} wide) does not split into mamba_n_groups = {groups}")
    return Reshaped(src, (groups, src.shape[0] // groups), f"as [{groups} groups, {src.shape[0] // groups}]")
