"""Qwen3 (Qwen3ForCausalLM, the bare Qwen3Model) -> llama.cpp `qwen3` (the converter's Qwen3Model).

Qwen2's layout plus per-head RMS norms on Q and K (q_norm / k_norm, width head_dim), no biases by
default, head_dim stated apart from hidden_size / heads.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..family import Family, Tensor
from ..names import GGUF
from ..params import text_model_parameters
from ._parts.checks import architecture, check_no_pooling, check_no_sliding, rope_types, silu_only
from ._parts.decoder import LM_HEAD, decoder_tensors
from ._parts.vocab import gpt2_or_sentencepiece_vocab

DEFAULTS = {
    "qwen3": dict(vocab_size=151936, hidden_size=4096, intermediate_size=22016, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=32, head_dim=128, hidden_act="silu",
                  max_position_embeddings=32768, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                  tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                  attention_bias=False, use_sliding_window=False, sliding_window=None, max_window_layers=28,
                  attention_dropout=0.0, pad_token_id=None, bos_token_id=None, eos_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias",
    "use_sliding_window", "sliding_window", "max_window_layers", "layer_types",  # checked: no sliding layer
})

ARCHITECTURES = ("Qwen3ForCausalLM", "Qwen3Model")
_bare = lambda h: architecture(h) == "Qwen3Model"  # noqa: E731  the converter prefixes its names with "model."
_causal = lambda h: not _bare(h)  # noqa: E731


def _qk_norms(prefix: str, required) -> tuple[Tensor, ...]:
    layer = f"{prefix}layers.{{bid}}.self_attn."
    return (Tensor(f"{layer}q_norm.weight", GGUF.ATTN_Q_NORM.weight, required=required),
            Tensor(f"{layer}k_norm.weight", GGUF.ATTN_K_NORM.weight, required=required))


TENSORS = (*decoder_tensors("model.", required=_causal, extra=_qk_norms("model.", _causal)), LM_HEAD,
           *decoder_tensors("", required=_bare, extra=_qk_norms("", _bare)))

_RERANKER_HINTS = ("qwen3-reranker", "qwen3-vl-reranker")


def _reranker_hint(h: dict, path: Path) -> str | None:
    """What would make the converter treat the checkpoint as a Qwen3 reranker (README title or names)."""
    readme = path.parent / "README.md"
    if readme.is_file():
        text = readme.read_text(encoding="utf-8", errors="replace").lower()
        if any(f"# {hint}" in text for hint in _RERANKER_HINTS):
            return f"{readme} is titled as a Qwen3 reranker"
    # the converter's hints: the directory name, AutoConfig's _name_or_path (the directory path as given:
    # its ancestors count too), the model type and the architecture
    for hint in (path.parent.name, str(path.parent.resolve()), str(architecture(h) or "")):
        if any(r in hint.lower() for r in _RERANKER_HINTS):
            return f"the name {hint!r} marks a Qwen3 reranker"
    return None


REFUSE = (silu_only("qwen3"), rope_types("qwen3"))


def check(h: dict, path: Path) -> None:
    check_no_sliding(h, path, "qwen3")
    check_no_pooling(path)
    if (hint := _reranker_hint(h, path)) is not None:
        raise ConfigError(f"{path}: {hint}; the converter then writes a ranking head (cls_out) and pooling, "
                          f"which the view does not present; rename the directory if it is not a reranker")


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return text_model_parameters(h, "qwen3", block_count, file_type)


FAMILY = Family(
    name="qwen3",
    gguf_arch="qwen3",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless={},
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_or_sentencepiece_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)
