"""Qwen2 (Qwen2ForCausalLM, the bare Qwen2Model) -> llama.cpp `qwen2` (the converter's Qwen2Model). Qwen2-Audio
(Qwen2AudioForConditionalGeneration) is read as its Qwen2 text model; its audio tower and projector are left out.

Rotate-half rope is what llama.cpp's qwen2 computes (NeoX style), so Q/K are stored as they are; q/k/v
carry biases. Also the building blocks of the other plain rotary decoders (qwen3, smollm3, ...): the
tensor table of a Llama-layout decoder without Q/K regrouping, and the shared checks.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..family import Family
from ..params import text_model_parameters
from ._parts.checks import architecture, check_no_pooling, check_no_sliding, rope_types, silu_only
from ._parts.decoder import LM_HEAD, OTHER_TOWERS, decoder_tensors
from ._parts.vocab import gpt2_or_sentencepiece_vocab

DEFAULTS = {
    "qwen2": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=32, hidden_act="silu", max_position_embeddings=32768,
                  initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, tie_word_embeddings=False,
                  rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, use_sliding_window=False,
                  sliding_window=None, max_window_layers=28, attention_dropout=0.0, pad_token_id=None,
                  bos_token_id=None, eos_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings",
    "use_sliding_window", "sliding_window", "max_window_layers", "layer_types",  # checked: no sliding layer
})
HARMLESS: Harmless = {}


# the last: Qwen2-Audio's Qwen2 text model, as the converter's Qwen2Model writes it (its Whisper-style audio tower and
# projector left out, their configuration ignored)
ARCHITECTURES = ("Qwen2ForCausalLM", "Qwen2Model", "Qwen2AudioForConditionalGeneration")
_bare = lambda h: architecture(h) == "Qwen2Model"  # noqa: E731  the converter prefixes its names with "model."
_causal = lambda h: not _bare(h)  # noqa: E731

TENSORS = (*decoder_tensors("model.", required=_causal), LM_HEAD, *decoder_tensors("", required=_bare), *OTHER_TOWERS)


REFUSE = (silu_only("qwen2"), rope_types("qwen2"))


def check(h: dict, path: Path) -> None:
    check_no_sliding(h, path, "qwen2")
    check_no_pooling(path)


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return text_model_parameters(h, "qwen2", block_count, file_type)


FAMILY = Family(
    name="qwen2",
    gguf_arch="qwen2",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_or_sentencepiece_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)
