"""Mamba-2 (Mamba2ForCausalLM: Mamba-Codestral) -> llama.cpp `mamba2` (the converter's Mamba2Model).

The structured multi-head state-space mixer: in_proj yields gate, stream, B, C (n_groups pairs) and a step per
head; a causal depthwise conv1d; one scalar decay per head (A = -exp(A_log), presented [heads, 1], as D);
dt_bias as the dt "projection"'s bias; a gated RMSNorm over each group (presented [groups, d_inner / groups]).
The converter reads config.json as written (not through Mamba2Config) and pads the vocabulary to a multiple of
pad_vocab_size_multiple (16).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Tensor
from ..params import f32, first, u32
from ..views import NEG_EXP, Reshaped
from .mamba import padded_vocab, squeezed


def per_head(sources, h):
    src = sources[0]
    return Reshaped(src, (*src.shape, 1), "as [heads, 1]")


def by_group(sources, h):
    src = sources[0]
    groups = _dims(h)["n_group"]
    if src.shape[0] % groups:
        raise ConfigError(f"tensor {src.name!r} ({src.shape[0]} wide) does not split into n_groups = {groups}")
    return Reshaped(src, (groups, src.shape[0] // groups), f"as [{groups} groups, {src.shape[0] // groups}]")


# None: config.json is read as written (Mamba2Model avoids AutoConfig); absent keys take the converter's fallbacks.
DEFAULTS = {"mamba2": {}}

READS = frozenset({
    "vocab_size", "pad_vocab_size_multiple", "hidden_size", "d_model", "num_hidden_layers", "n_layer", "expand",
    "intermediate_size", "d_inner", "n_groups", "conv_kernel", "d_conv", "state_size", "d_state", "head_dim",
    "num_heads", "layer_norm_epsilon", "rms_norm_eps", "use_bias", "use_conv_bias", "hidden_act",
    "tie_word_embeddings", "time_step_limit", "time_step_rank", "norm_before_gate",
})
# dt initialisation, residual rescaling at init, the scan's chunk length (the same result in chunks), and
# residual_in_fp32 (half precision only).
HARMLESS: Harmless = {"time_step_min": ANY, "time_step_max": ANY, "time_step_floor": ANY,
    "rescale_prenorm_residual": ANY, "chunk_size": ANY, "residual_in_fp32": ANY}

TENSORS = (
    Tensor("backbone.embeddings.weight", "token_embd.weight"),
    Tensor("backbone.norm_f.weight", "output_norm.weight"),
    Tensor("lm_head.weight", "output.weight", required=False),
    Tensor("backbone.layers.{bid}.norm.weight", "blk.{bid}.attn_norm.weight"),
    Tensor("backbone.layers.{bid}.mixer.in_proj.weight", "blk.{bid}.ssm_in.weight"),
    Tensor("backbone.layers.{bid}.mixer.conv1d.weight", "blk.{bid}.ssm_conv1d.weight", squeezed),
    Tensor("backbone.layers.{bid}.mixer.conv1d.bias", "blk.{bid}.ssm_conv1d.bias"),
    Tensor("backbone.layers.{bid}.mixer.dt_bias", "blk.{bid}.ssm_dt.bias"),
    Tensor("backbone.layers.{bid}.mixer.A_log", "blk.{bid}.ssm_a", per_head, steps=(NEG_EXP,)),
    Tensor("backbone.layers.{bid}.mixer.D", "blk.{bid}.ssm_d", per_head),
    Tensor("backbone.layers.{bid}.mixer.norm.weight", "blk.{bid}.ssm_norm.weight", by_group),
    Tensor("backbone.layers.{bid}.mixer.out_proj.weight", "blk.{bid}.ssm_out.weight"),
)


def _dims(h: dict) -> dict:
    d_model = first(h, ["hidden_size", "d_model", "dim"])
    expand = first(h, ["mamba_expand", "expand"]) or 2
    return dict(d_model=d_model, d_inner=first(h, ["mamba_d_ssm", "intermediate_size", "d_inner"]) or expand * d_model,
                expand=expand, n_group=first(h, ["n_groups"]) or 1, d_conv=first(h, ["conv_kernel", "d_conv"]) or 4,
                d_state=first(h, ["state_size", "d_state"]) or 128, head_dim=first(h, ["mamba_d_head", "head_dim"]) or 64,
                eps=first(h, ["layer_norm_epsilon", "rms_norm_eps"]) or 1e-5)


def check(h: dict, path: Path) -> None:
    d = _dims(h)
    if d["d_inner"] != d["expand"] * d["d_model"] or d["d_inner"] % d["head_dim"]:
        raise ConfigError(f"{path}: inner size {d['d_inner']}: the converter needs expand x hidden "
                          f"({d['expand']} x {d['d_model']}) in whole heads of head_dim {d['head_dim']}")
    if h.get("num_heads", d["d_inner"] // d["head_dim"]) != d["d_inner"] // d["head_dim"]:
        raise ConfigError(f"{path}: num_heads {h['num_heads']}: the converter counts d_inner / head_dim = "
                          f"{d['d_inner'] // d['head_dim']} heads")
    # keys whose absence the converter and Mamba2Config read differently (its default n_groups is 8, the converter's 1)
    missing = [k for k in ("n_groups", "state_size", "head_dim") if k not in h]
    if missing:
        raise ConfigError(f"{path}: {', '.join(missing)} not stated: the converter and transformers default them "
                          f"differently; state them in config.json")
    if padded_vocab({"pad_vocab_size_multiple": 16, **h}) != h["vocab_size"]:
        raise ConfigError(f"{path}: vocab_size {h['vocab_size']}: the converter pads the vocabulary to a multiple of "
                          f"{h.get('pad_vocab_size_multiple', 16)} but not the embedding, and llama.cpp refuses such a file")
    limit = h.get("time_step_limit")
    if limit is not None and list(limit) != [0.0, float("inf")]:
        raise ConfigError(f"{path}: time_step_limit {limit}: llama.cpp's mamba2 does not clamp the step")
    wrong = [f"{k} {h[k]!r}" for k, ok in (("use_bias", False), ("use_conv_bias", True), ("hidden_act", "silu"),
                                            ("norm_before_gate", False)) if k in h and h[k] != ok]
    if wrong:
        raise ConfigError(f"{path}: {', '.join(wrong)}: llama.cpp's mamba2 has no projection biases, needs the "
                          f"conv1d bias, computes SiLU and gates before the norm; this checkpoint would run wrong")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    d = _dims(h)
    return [u32("mamba2.context_length", 2 ** 20), u32("mamba2.embedding_length", d["d_model"]),
            u32("mamba2.feed_forward_length", 0), u32("mamba2.attention.head_count", 0),
            u32("mamba2.block_count", block_count), u32("mamba2.ssm.conv_kernel", d["d_conv"]),
            u32("mamba2.ssm.inner_size", d["d_inner"]), u32("mamba2.ssm.state_size", d["d_state"]),
            u32("mamba2.ssm.time_step_rank", d["d_inner"] // d["head_dim"]),
            u32("mamba2.ssm.group_count", d["n_group"]),
            f32("mamba2.attention.layer_norm_rms_epsilon", d["eps"]), u32("general.file_type", file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    """tokenizer.model's SentencePiece (Mamba-Codestral), else tokenizer.json's byte-level BPE, as
    Mamba2Model.set_vocab picks."""
    from tokenizer.vocab import gpt2_vocab, sentencepiece_vocab
    if (model_dir / "tokenizer.model").is_file():
        return sentencepiece_vocab(model_dir, h)
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="mamba2",
    gguf_arch="mamba2",
    architectures=("Mamba2ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    check=check,
)
