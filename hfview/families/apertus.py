"""Apertus (ApertusForCausalLM) -> llama.cpp `apertus` (the converter's ApertusModel, a LlamaModel that
keeps Q/K as stored).

Rotate-half rope (Llama 3 frequency scaling by default: rope_freqs generated), per-head Q/K norms, its own
norm names (attention_layernorm, feedforward_layernorm), an ungated FFN through xIELU. xIELU's four
scalars per layer (alpha_p, alpha_n, beta, eps) are not tensors in the GGUF: the converter reads them out
of the checkpoint into `xielu.*` arrays, added while it prepares tensors (so right after
general.architecture), each when its last layer's value is read.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import CheckpointError
from ..family import Family, Refuse, Skip, Tensor
from ..gguf_layout import KV, ValueType
from ..names import GGUF
from ._parts.checks import check_no_pooling, rope_types
from ._parts.decoder import LM_HEAD, llama_parameters
from ._parts.rope import llama3_rope_freqs
from ._parts.vocab import llama_vocab

DEFAULTS = {
    "apertus": dict(vocab_size=131072, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=None, hidden_act="xielu",
                    max_position_embeddings=65536, initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True,
                    pad_token_id=3, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                    rope_parameters={"rope_type": "llama3", "rope_theta": 12000000.0, "factor": 8.0,
                                     "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0},
                    attention_bias=False, attention_dropout=0.0),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias",
})

ARCHITECTURES = ("ApertusForCausalLM",)
_L = "model.layers.{bid}."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    LM_HEAD,
    Tensor(_L + "attention_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb),
    Tensor(_L + "self_attn.k_proj.{wb}", GGUF.ATTN_K.wb),
    Tensor(_L + "self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor(_L + "self_attn.o_proj.{wb}", GGUF.ATTN_OUT.wb),
    Tensor(_L + "self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor(_L + "self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight),
    Tensor(_L + "feedforward_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor(_L + "mlp.up_proj.{wb}", GGUF.FFN_UP.wb),
    Tensor(_L + "mlp.down_proj.{wb}", GGUF.FFN_DOWN.wb),
    *(Skip(_L + f"mlp.act_fn.{p}") for p in ("alpha_p", "alpha_n", "beta", "eps")),  # -> xielu.* KVs
)
_XIELU = ("alpha_p", "alpha_n", "beta", "eps")


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


REFUSE = (
    Refuse("hidden_act", ("xielu",), "llama.cpp's apertus computes xIELU only"),
    rope_types("apertus", ("default", "linear", "yarn", "llama3")),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)


def _scalar(tensor) -> float:
    """The stored scalar as the converter's .float().item() gives it."""
    if tensor.shape not in ((), (1,)):
        raise CheckpointError(f"{tensor.path.name}: {tensor.name!r} has shape {tensor.shape}; xIELU's parameters "
                              f"are scalars")
    raw = tensor.read().reshape(())
    if tensor.dtype == "BF16":
        return float((np.uint32(raw) << np.uint32(16)).view(np.float32))
    return float(raw)


def stored_kv(h: dict, stored: dict) -> list:
    """ApertusModel.modify_tensors: each xIELU scalar kind becomes one array over the layers (in layer
    order), added when the last layer's value of that kind is read."""
    n_layers = h["num_hidden_layers"]
    seen: dict[str, dict[int, float]] = {p: {} for p in _XIELU}
    out = []
    for name, tensor in stored.items():
        parts = name.split(".")
        if len(parts) == 6 and parts[:2] == ["model", "layers"] and parts[3:5] == ["mlp", "act_fn"] \
                and parts[5] in _XIELU and parts[2].isdecimal():
            values = seen[parts[5]]
            values[int(parts[2])] = _scalar(tensor)
            if len(values) == n_layers:
                out.append(KV(f"xielu.{parts[5]}", ValueType.ARRAY, [values[k] for k in sorted(values)],
                              item_type=ValueType.FLOAT32))
    missing = [p for p in _XIELU if len(seen[p]) != n_layers]
    if missing:
        raise CheckpointError(f"xIELU parameter mlp.act_fn.{missing[0]} is stored for {len(seen[missing[0]])} of "
                              f"{n_layers} layers; a shard may be missing")
    return out


parameters = llama_parameters("apertus")


FAMILY = Family(
    name="apertus",
    gguf_arch="apertus",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless={},
    tensors=TENSORS,
    parameters=parameters,
    vocab=llama_vocab,
    generated=llama3_rope_freqs,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    stored_kv=stored_kv,
)
