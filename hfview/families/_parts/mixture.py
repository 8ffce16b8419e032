"""Qwen2-MoE-style mixtures: the stacked experts and router, the gated shared expert, the checks that every layer is
a mixture and how top-k weights are normalised, and the mixture's hyperparameter KV."""
from __future__ import annotations

from pathlib import Path

from ...errors import CheckpointError, ConfigError
from ...family import Experts, Stacked, Tensor
from ...names import GGUF, Keys
from ...params import text_model_parameters, u32
from ...views import RowSelection, expert_part
from .decoder import decoder_tensors


def attention_tensors(prefix: str = "model.", **kw) -> tuple[Tensor, ...]:
    """Qwen2's decoder without its dense FFN: embeddings, norms, attention (Q/K as stored)."""
    return tuple(r for r in decoder_tensors(prefix, **kw) if ".mlp." not in r.hf)


def mixture_tensors(count_key: str, prefix: str = "model.") -> tuple[Tensor | Stacked, ...]:
    """The router and the stacked experts of every block, in the converter's merge order (down, gate, up)."""
    layer = f"{prefix}layers.{{bid}}.mlp."
    return (
        Tensor(f"{layer}gate.weight", GGUF.FFN_GATE_INP.weight),
        *(Experts(f"{layer}experts.{{x}}.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}_exps.weight", count_key)
          for proj in ("down", "gate", "up")),
    )


SHARED_EXPERT = (
    Tensor("model.layers.{bid}.mlp.shared_expert_gate.weight", GGUF.FFN_GATE_INP_SHEXP.weight),
    Tensor("model.layers.{bid}.mlp.shared_expert.gate_proj.weight", GGUF.FFN_GATE_SHEXP.weight),
    Tensor("model.layers.{bid}.mlp.shared_expert.up_proj.weight", GGUF.FFN_UP_SHEXP.weight),
    Tensor("model.layers.{bid}.mlp.shared_expert.down_proj.weight", GGUF.FFN_DOWN_SHEXP.weight),
)


def check_every_layer_a_mixture(h: dict, path: Path, arch: str, count_key: str) -> None:
    """transformers makes layer i dense (one SwiGLU of intermediate_size) when i is in mlp_only_layers, when
    (i + 1) % decoder_sparse_step != 0, or when there are no experts. The converter reads neither list (on
    such a checkpoint it fails: "Can not map tensor 'model.layers.1.mlp.down_proj.weight'", tried for
    qwen2_moe and qwen3_moe) and llama.cpp's qwen2moe / qwen3moe / olmoe need a router in every layer."""
    dense = list(h.get("mlp_only_layers") or [])
    step = h.get("decoder_sparse_step", 1)
    if dense:
        raise ConfigError(f"{path}: mlp_only_layers {dense}: those layers are dense in transformers; the converter "
                          f"cannot map their tensors and llama.cpp's {arch} architecture has a mixture of experts in "
                          f"every layer, so they cannot run there")
    if step != 1:
        raise ConfigError(f"{path}: decoder_sparse_step {step!r}: transformers then makes every layer i with "
                          f"(i + 1) % {step!r} != 0 dense; llama.cpp's {arch} architecture has a mixture of "
                          f"experts in every layer, so they cannot run there")
    if not h.get(count_key):
        raise ConfigError(f"{path}: {count_key} {h.get(count_key)!r}: without experts every layer is dense, "
                          f"which llama.cpp's {arch} architecture cannot run")


def check_topk_norm(h: dict, path: Path, arch: str, llama_cpp_normalises: bool) -> None:
    """llama.cpp's architecture fixes whether the chosen experts' weights are renormalised to sum to one."""
    if bool(h.get("norm_topk_prob")) != llama_cpp_normalises:
        raise ConfigError(f"{path}: norm_topk_prob {h.get('norm_topk_prob')!r}: llama.cpp's {arch} architecture "
                          f"{'always' if llama_cpp_normalises else 'never'} renormalises the chosen experts' "
                          f"weights, so this checkpoint would run wrong")


def mixture_parameters(arch: str):
    """Qwen2MoeModel.set_gguf_parameters: TextModel's entries, then the expert and shared-expert widths
    where the config states them."""
    def parameters(h: dict, block_count: int, file_type: int) -> list:
        kv = text_model_parameters(h, arch, block_count, file_type)
        if h.get("moe_intermediate_size") is not None:
            kv.append(u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=arch), h["moe_intermediate_size"]))
        if h.get("shared_expert_intermediate_size") is not None:
            kv.append(u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=arch),
                          h["shared_expert_intermediate_size"]))
        return kv
    return parameters


def check_mlp_layer_types(h: dict, path: Path, model: str, arch: str) -> None:
    """transformers' `model` makes layers dense or mixtures by mlp_layer_types; the converter and llama.cpp's
    `arch` make the first first_k_dense_replace layers dense and the rest mixtures: the two must agree."""
    dense = h.get("first_k_dense_replace") or 0
    kinds = h["mlp_layer_types"]
    wanted = ["dense"] * dense + ["sparse"] * (h["num_hidden_layers"] - dense)
    if list(kinds) != wanted:
        raise ConfigError(f"{path}: mlp_layer_types {kinds!r} with first_k_dense_replace {h.get('first_k_dense_replace')!r}: "
                          f"transformers' {model} makes layers dense or mixtures by mlp_layer_types, the converter "
                          f"and llama.cpp's {arch} make the first first_k_dense_replace layers dense and the rest "
                          f"mixtures; state both alike (the releases state first_k_dense_replace and leave the "
                          f"layer kinds to it)")


def half_of_each(part: int):
    """The gate (0) or up (1) half of every expert's fused input_linear rows; a shared expert's 2-D one too."""
    def make(sources, h):
        src = sources[0]
        if src.shape[-2] % 2:
            raise CheckpointError(f"tensor {src.name!r}: {src.shape[-2]} fused rows do not split into gate and up")
        experts = src.shape[0] if len(src.shape) == 3 else 1
        rows = src.shape[-2]
        shape = (*src.shape[:-2], rows // 2, src.shape[-1])
        label = ("gate", "up")[part] + " half of each expert's input_linear rows"
        return RowSelection(src, expert_part(experts, rows, part, 2), label, shape if len(shape) > 2 else None)
    return make
