"""JAIS 1 (JAISLMHeadModel, model_type jais, remote code) -> llama.cpp `jais` (the converter's JaisModel).

core42 / inceptionai jais-13b, jais-30b-v1/v3 and the jais-family-* models trained from scratch (jais-adapted-* are
Llama checkpoints, another family). GPT-2's block under GPT-2's names (transformer.h.{i}.ln_1 / attn.c_attn /
attn.c_proj / ln_2 / mlp.*), its Conv1D weights stored inputs-first and presented transposed, LayerNorm with bias and
biases everywhere, a SwiGLU MLP: c_fc is the up projection, c_fc2 the gate (c_fc(x) * silu(c_fc2(x))), c_proj down.
ALiBi positions: the release stores its per-head slopes (transformer.relative_pe.slopes); the converter drops the
tensor and writes the maximum bias its first slope implies (-round(log2(slope0) * 2^floor(log2(n_head)))), from
which llama.cpp computes the slopes again, so the stored ones must be that geometric sequence (checked).

muP, as the release's modeling code computes it: the embedding times embeddings_scale (mup_embeddings_scale in the
jais-family configs), attention scores divided by the head width (scale_qk_dot_by_d / mup_scale_qk_dot_by_d true:
llama.cpp's jais hard-codes 1/d), the logits times width_scale (mup_output_alpha * mup_width_scale). The converter
folds both multipliers into the weights (token_embd = wte * embeddings_scale, output = lm_head * width_scale), in
its working dtype (f16 as stored, the rest widened to f32), and so does the view. Where a config states both
spellings of a multiplier, the converter takes the mup_ one and the release's code (vLLM's copy of it) the other:
they must agree.

transformers 5.24 has no JAIS class, so the converter reads config.json as written (no JAISConfig defaults), and so
does the view: a key the converter reads must be stated (it fails on a missing n_inner or n_positions, asserts
activation_function swiglu, position_embedding_type alibi and a stated embedding and output multiplier).
llama.cpp's jais needs output.weight: a tied checkpoint saved without lm_head is refused.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, Skip, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import f32, u32
from ..views import Transposed, scaled, to_working

ARCHITECTURES = ("JAISLMHeadModel",)

READS = frozenset({
    "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "activation_function",
    "layer_norm_epsilon", "position_embedding_type", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
    "scale_qk_dot_by_d", "mup_scale_qk_dot_by_d", "embeddings_scale", "mup_embeddings_scale", "width_scale",
    "mup_width_scale", "mup_output_alpha", "alibi_scaling", "tie_word_embeddings",
})
# Dropouts; reorder_and_upcast_attn only upcasts attention to float32, which llama.cpp computes in anyway
HARMLESS: Harmless = {"resid_pdrop": ANY, "embd_pdrop": ANY, "attn_pdrop": ANY, "reorder_and_upcast_attn": ANY}

# The release's JAISConfig (configuration_jais.py, as vLLM's copy states it): where config.json leaves a key out,
# the remote code computes with these, while the converter reads config.json as written
REMOTE_DEFAULTS = dict(
    vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_inner=None,
    activation_function="gelu_new", layer_norm_epsilon=1e-5, scale_attn_weights=True,
    scale_attn_by_inverse_layer_idx=False, position_embedding_type="learned", mup_width_scale=1.0,
    mup_embeddings_scale=1.0, mup_output_alpha=1.0, mup_scale_qk_dot_by_d=False, alibi_scaling=None,
)
# read by the converter as hparams[key]: absent, it fails (KeyError / an assert)
_REQUIRED = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "layer_norm_epsilon",
             "activation_function", "position_embedding_type")


def embeddings_scale(h: dict) -> float:
    """JaisModel.__init__: mup_embeddings_scale, else embeddings_scale (one is required: check)."""
    return h["mup_embeddings_scale"] if "mup_embeddings_scale" in h else h["embeddings_scale"]


def width_scale(h: dict) -> float:
    """JaisModel.__init__: mup_output_alpha * mup_width_scale, else width_scale (one is required: check)."""
    if "mup_output_alpha" in h:
        return h["mup_output_alpha"] * h["mup_width_scale"]
    return h["width_scale"]


def transposed(sources, h):
    return Transposed(sources[0])


TENSORS = (
    Tensor("transformer.wte.weight", GGUF.TOKEN_EMBD.weight,
           steps=lambda h: (scaled(embeddings_scale(h), "embeddings_scale"),)),
    Tensor("transformer.ln_f.{wb}", GGUF.OUTPUT_NORM.wb),
    # llama.cpp's jais loads output.weight always: a head is required (stored_hparams says why where it is not)
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, steps=lambda h: (scaled(width_scale(h), "width_scale"),),
           required=False),
    Tensor("transformer.h.{bid}.ln_1.{wb}", GGUF.ATTN_NORM.wb),
    Tensor("transformer.h.{bid}.attn.c_attn.weight", GGUF.ATTN_QKV.weight, transposed),
    Tensor("transformer.h.{bid}.attn.c_attn.bias", GGUF.ATTN_QKV.bias),
    Tensor("transformer.h.{bid}.attn.c_proj.weight", GGUF.ATTN_OUT.weight, transposed),
    Tensor("transformer.h.{bid}.attn.c_proj.bias", GGUF.ATTN_OUT.bias),
    Tensor("transformer.h.{bid}.ln_2.{wb}", GGUF.FFN_NORM.wb),
    Tensor("transformer.h.{bid}.mlp.c_fc.weight", GGUF.FFN_UP.weight, transposed),
    Tensor("transformer.h.{bid}.mlp.c_fc.bias", GGUF.FFN_UP.bias),
    Tensor("transformer.h.{bid}.mlp.c_fc2.weight", GGUF.FFN_GATE.weight, transposed),
    Tensor("transformer.h.{bid}.mlp.c_fc2.bias", GGUF.FFN_GATE.bias),
    Tensor("transformer.h.{bid}.mlp.c_proj.weight", GGUF.FFN_DOWN.weight, transposed),
    Tensor("transformer.h.{bid}.mlp.c_proj.bias", GGUF.FFN_DOWN.bias),
    # read for the maximum ALiBi bias (stored_kv), written as no tensor
    Skip("transformer.relative_pe.slopes"),
    # the causal-mask buffer of older saves, which the converter's filter_tensors drops
    Skip("transformer.h.{bid}.attn.bias"),
)

SLOPES = "transformer.relative_pe.slopes"


def _qk_dot_by_d(h: dict):
    """The release's attention scale switch: scale_qk_dot_by_d where stated (vLLM copies it over), else
    mup_scale_qk_dot_by_d, else JAISConfig's False."""
    if "scale_qk_dot_by_d" in h:
        return h["scale_qk_dot_by_d"]
    return h.get("mup_scale_qk_dot_by_d", False)


REFUSE = (
    *(Refuse(key, stated, "missing; the converter reads JAIS's config.json as written (no "
             "JAISConfig defaults apply) and needs it stated") for key in _REQUIRED),
    Refuse("activation_function", ("swiglu",), "llama.cpp's jais computes SwiGLU (c_fc * silu(c_fc2)) only, and the "
           "converter asserts swiglu"),
    Refuse("position_embedding_type", ("alibi",), "llama.cpp's jais has ALiBi positions only (no learned position "
           "table), and the converter asserts alibi"),
    Refuse("alibi_scaling", (None,), "the release's code scales the ALiBi distances, which neither the converter "
           "writes nor llama.cpp computes"),
    Refuse("scale_attn_by_inverse_layer_idx", unset, "llama.cpp's jais does not scale attention by the layer index"),
)


def check(h: dict, path: Path) -> None:
    if h["n_embd"] % h["n_head"]:
        raise ConfigError(f"{path}: n_embd {h['n_embd']} does not split into n_head {h['n_head']} heads")
    if h.get("scale_attn_weights", True) is not True or _qk_dot_by_d(h) is not True:
        raise ConfigError(f"{path}: scale_attn_weights {h.get('scale_attn_weights', True)} / scale_qk_dot_by_d "
                          f"(mup_scale_qk_dot_by_d) {_qk_dot_by_d(h)}: llama.cpp's jais divides attention scores "
                          f"by the head width (muP's 1/d), which the release computes only with both true")
    if "mup_embeddings_scale" not in h and "embeddings_scale" not in h:
        raise ConfigError(f"{path}: neither mup_embeddings_scale nor embeddings_scale is stated; the converter "
                          f"folds one into the token embedding and fails without it")
    if "mup_output_alpha" not in h and "width_scale" not in h:
        raise ConfigError(f"{path}: neither mup_output_alpha (with mup_width_scale) nor width_scale is stated; the "
                          f"converter folds one into the output head and fails without it")
    if "mup_output_alpha" in h and "mup_width_scale" not in h:
        raise ConfigError(f"{path}: mup_output_alpha without mup_width_scale; the output scale is their product "
                          f"(the converter asserts both)")
    pairs = (("mup_embeddings_scale", "embeddings_scale", embeddings_scale(h), h.get("embeddings_scale")),
             ("mup_output_alpha * mup_width_scale", "width_scale", width_scale(h), h.get("width_scale")))
    for ours, theirs, value, other in pairs:
        if other is not None and (ours.split(" ")[0] in h) and not math.isclose(value, other, rel_tol=1e-6):
            raise ConfigError(f"{path}: {ours} = {value!r} but {theirs} = {other!r}: the converter folds the first "
                              f"in, the release's code multiplies by the second; state one")


def alibi_slopes(n_head: int, max_bias: float) -> np.ndarray:
    """The slopes llama.cpp computes from the maximum bias (llama-graph / ggml_soft_max_ext), in float64."""
    n_log2 = 2 ** math.floor(math.log2(n_head))
    m0, m1 = 2.0 ** (-max_bias / n_log2), 2.0 ** (-max_bias / 2 / n_log2)
    return np.array([m0 ** (h + 1) if h < n_log2 else m1 ** (2 * (h - n_log2) + 1) for h in range(n_head)])


# how far a stored slope may be from llama.cpp's: a bfloat16 checkpoint stores them rounded to 8 significant bits
# (2^-9 relative), while two slopes of one sequence differ by 2^-8/n or more (8% at 64 heads)
SLOPE_RTOL = 2.0 ** -8


def bias_from_slopes(values: np.ndarray, n_head: int, where: str) -> float:
    """The converter's maximum bias from the stored slopes (float32 values, one per head), refused unless the slopes
    llama.cpp computes from it are the stored ones."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(values)) or not np.all(values > 0):
        raise CheckpointError(f"{where}: {SLOPES!r} holds a slope that is not a positive number")
    bias = float(-round(math.log2(float(np.float32(values[0]))) * 2 ** math.floor(math.log2(n_head))))
    expected = alibi_slopes(n_head, bias)
    if bias <= 0 or not np.allclose(values, expected, rtol=SLOPE_RTOL, atol=0):
        raise CheckpointError(f"{where}: {SLOPES!r} are not the ALiBi slopes llama.cpp computes from the maximum "
                              f"bias {bias} the converter writes (first slope {values[0]!r}; llama.cpp's "
                              f"{expected.tolist()!r}); these positions would run wrong")
    return bias


def max_alibi_bias(h: dict, stored: dict) -> float:
    """JaisModel.modify_tensors: -round(log2(first slope) * 2^floor(log2(n_head))), 8 where no slopes are stored."""
    t = stored.get(SLOPES)
    if t is None:
        return 8.0
    n_head = h["n_head"]
    if t.shape not in ((n_head, 1), (n_head,)):
        raise CheckpointError(f"{t.path.name}: {SLOPES!r} has shape {list(t.shape)}; ALiBi stores one slope per head "
                              f"({n_head} x 1)")
    return bias_from_slopes(to_working(t.read(), t.dtype), n_head, t.path.name)


def stored_kv(h: dict, stored: dict) -> list:
    """JaisModel.prepare_tensors adds the maximum ALiBi bias after the tensors: right after general.architecture."""
    return [KV(Keys.Attention.MAX_ALIBI_BIAS.format(arch="jais"), ValueType.FLOAT32, max_alibi_bias(h, stored))]


def stored_hparams(h: dict, stored: dict) -> dict:
    if "lm_head.weight" not in stored:
        raise CheckpointError("tensor 'lm_head.weight' is missing: llama.cpp's jais loads an output head "
                              "(output.weight, the converter's lm_head times width_scale) and has no tied "
                              "fallback to the embedding; a checkpoint saved tied without its head cannot load")
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """JaisModel.set_gguf_parameters, its own short list in its order."""
    return [u32(Keys.LLM.BLOCK_COUNT.format(arch="jais"), block_count),
            u32(Keys.LLM.CONTEXT_LENGTH.format(arch="jais"), h["n_positions"]),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="jais"), h["n_embd"]),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="jais"), h["n_inner"]),
            u32(Keys.Attention.HEAD_COUNT.format(arch="jais"), h["n_head"]),
            f32(Keys.Attention.LAYERNORM_EPS.format(arch="jais"), h["layer_norm_epsilon"]),
            u32(Keys.General.FILE_TYPE, file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="jais",
    gguf_arch="jais",
    architectures=ARCHITECTURES,
    defaults={"jais": {}},
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    stored_kv=stored_kv,
    stored_hparams=stored_hparams,
    notes={"muP": "token_embd = wte x embeddings_scale, output = lm_head x width_scale, folded as the converter does",
           "ALiBi": "max_alibi_bias from the stored slopes; llama.cpp recomputes the slopes from it"},
)
