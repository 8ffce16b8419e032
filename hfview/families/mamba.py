"""Mamba and Falcon-Mamba (MambaForCausalLM, FalconMambaForCausalLM) -> llama.cpp `mamba` (the converter's
MambaModel).

A selective state-space block per layer (in_proj, a causal depthwise conv1d, x_proj, dt_proj, A, D, out_proj)
after an RMSNorm; no attention, no positions. The converter reads config.json as written (not through
MambaConfig), falls back to Mamba's own defaults where a key is absent, pads the vocabulary to a multiple of
pad_vocab_size_multiple (refused where that changes it: the embedding keeps vocab_size rows and llama.cpp
could not load the file), presents conv1d squeezed and A as -exp(A_log), and omits a tied lm_head.
Falcon-Mamba normalises dt, B and C without a scale (ssm.dt_b_c_rms); llama.cpp does so with the layer norms'
epsilon, not mixer_rms_eps (1e-6 against 1e-5 as released), which moved the logits by NMSE 9e-12 in the tests.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF, Keys
from ..params import boolean, f32, first, u32
from ..views import NEG_EXP
from ._parts.state_space import padded_vocab, squeezed

# None: the converter reads config.json as written (MambaModel avoids AutoConfig), so an absent key is the
# converter's own fallback, below, never a config class's default.
DEFAULTS = {"mamba": {}, "falcon_mamba": {}}

READS = frozenset({
    "vocab_size", "pad_vocab_size_multiple", "hidden_size", "d_model", "num_hidden_layers", "n_layer",
    "conv_kernel", "d_conv", "intermediate_size", "d_inner", "expand", "state_size", "d_state", "time_step_rank",
    "dt_rank", "layer_norm_epsilon", "rms_norm_eps", "use_bias", "use_conv_bias", "hidden_act",
    "tie_word_embeddings", "mixer_rms_eps",
})
# Initialisation of dt and of the residual (training only), and how transformers computes the same scan
# (a reference loop, mamba.py, an associative scan); residual_in_fp32 only matters under half precision.
HARMLESS: Harmless = {"time_step_scale": ANY, "time_step_min": ANY, "time_step_max": ANY,
    "time_step_init_scheme": ANY, "time_step_floor": ANY, "rescale_prenorm_residual": ANY, "use_mambapy": ANY,
    "use_associative_scan": ANY, "residual_in_fp32": ANY}

TENSORS = (
    Tensor("backbone.embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("backbone.norm_f.weight", GGUF.OUTPUT_NORM.weight),
    Skip("lm_head.weight", when=lambda h: h.get("tie_word_embeddings", True)),  # the converter omits a tied head
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),
    Tensor("backbone.layers.{bid}.norm.weight", GGUF.ATTN_NORM.weight),
    Tensor("backbone.layers.{bid}.mixer.in_proj.weight", GGUF.SSM_IN.weight),
    Tensor("backbone.layers.{bid}.mixer.conv1d.weight", GGUF.SSM_CONV1D.weight, squeezed),
    Tensor("backbone.layers.{bid}.mixer.conv1d.bias", GGUF.SSM_CONV1D.bias),
    Tensor("backbone.layers.{bid}.mixer.x_proj.weight", GGUF.SSM_X.weight),
    Tensor("backbone.layers.{bid}.mixer.dt_proj.{wb}", GGUF.SSM_DT.wb),
    Tensor("backbone.layers.{bid}.mixer.A_log", GGUF.SSM_A, steps=(NEG_EXP,)),
    Tensor("backbone.layers.{bid}.mixer.D", GGUF.SSM_D),
    Tensor("backbone.layers.{bid}.mixer.out_proj.weight", GGUF.SSM_OUT.weight),
)


def _dims(h: dict) -> dict:
    d_model = first(h, ["hidden_size", "d_model"])
    return dict(d_model=d_model, d_conv=first(h, ["conv_kernel", "d_conv"]) or 4,
                d_inner=first(h, ["intermediate_size", "d_inner"]) or 2 * d_model,
                d_state=first(h, ["state_size", "d_state"]) or 16,
                dt_rank=first(h, ["time_step_rank", "dt_rank"]) or -(d_model // -16),
                eps=first(h, ["layer_norm_epsilon", "rms_norm_eps"]) or 1e-5)


REFUSE = tuple(Refuse(key, (ok,), "llama.cpp's mamba has no in/out projection biases, needs the conv1d bias and "
                      "computes SiLU; this checkpoint would run wrong", default=ok)
               for key, ok in (("use_bias", False), ("use_conv_bias", True), ("hidden_act", "silu")))


def check(h: dict, path: Path) -> None:
    d = _dims(h)
    if d["d_inner"] != 2 * d["d_model"] or h.get("expand", 2) != 2:
        raise ConfigError(f"{path}: inner size {d['d_inner']} (expand {h.get('expand', 2)}): the converter accepts "
                          f"Mamba blocks of expansion 2 only")
    if padded_vocab(h) != h["vocab_size"]:
        raise ConfigError(f"{path}: vocab_size {h['vocab_size']}: the converter pads the vocabulary to "
                          f"{padded_vocab(h)} tokens (pad_vocab_size_multiple {h.get('pad_vocab_size_multiple', 8)}) "
                          f"but not the embedding's {h['vocab_size']} rows, and llama.cpp refuses such a file")
    if not isinstance(d["dt_rank"], int):
        raise ConfigError(f"{path}: time_step_rank {d['dt_rank']!r}: the converter needs a number here")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    d = _dims(h)
    return [u32(Keys.LLM.CONTEXT_LENGTH.format(arch="mamba"), 2 ** 20),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="mamba"), d["d_model"]),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="mamba"), 0),
            u32(Keys.Attention.HEAD_COUNT.format(arch="mamba"), 0),
            u32(Keys.LLM.BLOCK_COUNT.format(arch="mamba"), block_count),
            u32(Keys.SSM.CONV_KERNEL.format(arch="mamba"), d["d_conv"]),
            u32(Keys.SSM.INNER_SIZE.format(arch="mamba"), d["d_inner"]),
            u32(Keys.SSM.STATE_SIZE.format(arch="mamba"), d["d_state"]),
            u32(Keys.SSM.TIME_STEP_RANK.format(arch="mamba"), d["dt_rank"]),
            f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="mamba"), d["eps"]),
            boolean(Keys.SSM.DT_B_C_RMS.format(arch="mamba"), h.get("model_type") == "falcon_mamba"),
            u32(Keys.General.FILE_TYPE, file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    """tokenizer.json's byte-level BPE, else tokenizer.model's SentencePiece, as MambaModel.set_vocab picks."""
    from hfview.tokenizer.vocab import gpt2_vocab, sentencepiece_vocab
    if (model_dir / "tokenizer.json").is_file() or not (model_dir / "tokenizer.model").is_file():
        return gpt2_vocab(model_dir, h)
    return sentencepiece_vocab(model_dir, h)


FAMILY = Family(
    name="mamba",
    gguf_arch="mamba",
    architectures=("MambaForCausalLM", "FalconMambaForCausalLM"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
)
