"""Qwen2 (Qwen2ForCausalLM, the bare Qwen2Model) -> llama.cpp `qwen2` (the converter's Qwen2Model).

Rotate-half rope is what llama.cpp's qwen2 computes (NeoX style), so Q/K are stored as they are; q/k/v
carry biases. Also the building blocks of the other plain rotary decoders (qwen3, smollm3, ...): the
tensor table of a Llama-layout decoder without Q/K regrouping, and the shared checks.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Tensor, rope_pairs, stored
from ..params import text_model_parameters

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


def decoder_tensors(prefix: str = "model.", *, required=True, extra=(), pairs: bool = False,
                    gate: bool = True, ffn_norm: str = "ffn_norm") -> tuple[Tensor, ...]:
    """The Llama-layout decoder's tensors under `prefix`. Q/K as stored (rotate-half rope in llama.cpp),
    or with `pairs` regrouped into interleaved rotation pairs as the converter's LlamaModel does.
    `required` may be a predicate on the hyperparameters (for tables that apply to one architecture).
    `extra`: further per-block rules (e.g. Q/K norms); `gate`: False for an ungated FFN (up, down only);
    `ffn_norm`: the GGUF name of post_attention_layernorm in this architecture."""
    p, layer = prefix, f"{prefix}layers.{{bid}}."
    q_view = rope_pairs("num_attention_heads") if pairs else stored
    k_view = rope_pairs("num_key_value_heads") if pairs else stored
    return (
        Tensor(f"{p}embed_tokens.weight", "token_embd.weight", required=required),
        Tensor(f"{p}norm.weight", "output_norm.weight", required=required),
        Tensor(f"{layer}input_layernorm.weight", "blk.{bid}.attn_norm.weight", required=required),
        Tensor(f"{layer}self_attn.q_proj.{{wb}}", "blk.{bid}.attn_q.{wb}", q_view, required=required),
        Tensor(f"{layer}self_attn.k_proj.{{wb}}", "blk.{bid}.attn_k.{wb}", k_view, required=required),
        Tensor(f"{layer}self_attn.v_proj.{{wb}}", "blk.{bid}.attn_v.{wb}", required=required),
        Tensor(f"{layer}self_attn.o_proj.{{wb}}", "blk.{bid}.attn_output.{wb}", required=required),
        Tensor(f"{layer}post_attention_layernorm.weight", f"blk.{{bid}}.{ffn_norm}.weight", required=required),
        *([Tensor(f"{layer}mlp.gate_proj.{{wb}}", "blk.{bid}.ffn_gate.{wb}", required=required)] if gate else []),
        Tensor(f"{layer}mlp.up_proj.{{wb}}", "blk.{bid}.ffn_up.{wb}", required=required),
        Tensor(f"{layer}mlp.down_proj.{{wb}}", "blk.{bid}.ffn_down.{wb}", required=required),
        *extra,
    )


LM_HEAD = Tensor("lm_head.weight", "output.weight", required=False)  # absent when tied to the embeddings


def architecture(h: dict) -> str | None:
    archs = h.get("architectures") or [None]
    return archs[0]


def check_architecture(h: dict, path: Path, family: str, known: tuple[str, ...]) -> None:
    """The converter picks its class by architectures[0]; another class (a classifier head, ...) would
    be converted differently or not at all."""
    arch = architecture(h)
    if arch not in known:
        raise ConfigError(f"{path}: architectures[0] is {arch!r}; the {family} family reads "
                          f"{', '.join(known)} only")


def check_silu(h: dict, path: Path, arch: str) -> None:
    if h.get("hidden_act", "silu") != "silu":
        raise ConfigError(f"{path}: hidden_act {h['hidden_act']!r}: llama.cpp's {arch} architecture computes "
                          f"SiLU only; this checkpoint would run wrong")


def check_rope(h: dict, path: Path, arch: str, allowed=("default", "linear", "yarn")) -> None:
    rope_type = h["rope_parameters"].get("rope_type", "default")
    if rope_type not in allowed:
        raise ConfigError(f"{path}: rope_parameters.rope_type {rope_type!r} is not one the view presents for "
                          f"llama.cpp's {arch} architecture ({', '.join(allowed)})")


def check_no_sliding(h: dict, path: Path, arch: str) -> None:
    """Qwen2-style configs state a sliding window that transformers applies only with
    use_sliding_window; llama.cpp's architecture has none, so a sliding layer would run wrong."""
    types = h.get("layer_types") or []
    if h.get("use_sliding_window") or "sliding_attention" in types:
        raise ConfigError(f"{path}: sliding-window attention layers (use_sliding_window / layer_types); "
                          f"llama.cpp's {arch} architecture attends to the whole context, so they would run wrong")


def check_no_pooling(path: Path) -> None:
    """A sentence-transformers checkpoint (modules.json naming a Pooling module) makes the converter write
    a pooling type, which the view does not present."""
    modules = path.parent / "modules.json"
    if modules.is_file() and "Pooling" in modules.read_text(encoding="utf-8"):
        raise ConfigError(f"{modules}: a sentence-transformers pooling module; the view presents decoders for "
                          f"generation only and does not write the converter's pooling type")


def gpt2_or_sentencepiece_vocab(model_dir: Path, h: dict) -> list:
    """Qwen2Model.set_vocab: tokenizer.model when there is one, else byte-level BPE."""
    from tokenizer.vocab import gpt2_vocab, sentencepiece_vocab
    try:
        return sentencepiece_vocab(model_dir, h)
    except FileNotFoundError:
        return gpt2_vocab(model_dir, h)


ARCHITECTURES = ("Qwen2ForCausalLM", "Qwen2Model")
_bare = lambda h: architecture(h) == "Qwen2Model"  # noqa: E731  the converter prefixes its names with "model."
_causal = lambda h: not _bare(h)  # noqa: E731

TENSORS = (*decoder_tensors("model.", required=_causal), LM_HEAD, *decoder_tensors("", required=_bare))


def check(h: dict, path: Path) -> None:
    check_architecture(h, path, "qwen2", ARCHITECTURES)
    check_silu(h, path, "qwen2")
    check_rope(h, path, "qwen2")
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
    check=check,
    normalise=normalise,
)
