"""Arcee (ArceeForCausalLM, AFM) -> llama.cpp `arcee` (the converter's ArceeModel, a LlamaModel).

Llama's attention (Q/K regrouped into rotation pairs) with an ungated FFN: down(relu(up(x))^2).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts
from ._parts.checks import check_no_pooling, rope_types
from ._parts.decoder import LM_HEAD, decoder_tensors, llama_parameters
from ._parts.rope import llama3_rope_freqs
from ._parts.vocab import llama_vocab

DEFAULTS = {
    "arcee": dict(vocab_size=32000, hidden_size=2560, intermediate_size=18432, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=None, hidden_act="relu2", max_position_embeddings=4096,
                  initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True, pad_token_id=None, bos_token_id=128000,
                  eos_token_id=128001, tie_word_embeddings=False,
                  rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_bias=False,
                  attention_dropout=0.0, mlp_bias=False, head_dim=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias",
})

HARMLESS: Harmless = {}
ARCHITECTURES = ("ArceeForCausalLM",)
TENSORS = (*decoder_tensors("model.", pairs=True, gate=False), LM_HEAD)


def normalise(h: dict) -> dict:
    """ArceeConfig: KV heads default to the head count, head_dim to hidden / heads."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    return h


REFUSE = (
    Refuse("hidden_act", ("relu2",), "llama.cpp's arcee computes relu(x)^2 only; this checkpoint would run wrong"),
    rope_types("arcee", ("default", "linear", "yarn", "llama3")),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    if h.get("mlp_bias") or h.get("attention_bias"):
        raise ConfigError(f"{path}: attention_bias / mlp_bias: llama.cpp's arcee has no biases")


parameters = llama_parameters("arcee")


FAMILY = Family(
    name="arcee",
    gguf_arch="arcee",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=llama_vocab,
    generated=llama3_rope_freqs,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    runner=RunnerFacts(applies_ffn_scales=False),  # llama.cpp's arcee graph passes its FFNs no scale
)
