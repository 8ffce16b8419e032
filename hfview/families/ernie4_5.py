"""ERNIE 4.5 dense (Ernie4_5ForCausalLM) -> llama.cpp `ernie4_5` (the converter's Ernie4_5Model).

Llama's layout with rope over interleaved pairs in transformers too, so Q/K are stored as they are;
SentencePiece vocabulary. The converter also splits Paddle-era fused qkv_proj / up_gate_proj tensors;
the view reads the transformers layout (separate projections) and names any other tensor it meets.
"""
from __future__ import annotations

from pathlib import Path

from ..family import Family, Refuse, unset
from ..names import Keys
from ..params import boolean, text_model_parameters
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.decoder import LM_HEAD, decoder_tensors

DEFAULTS = {
    "ernie4_5": dict(vocab_size=103424, hidden_size=1024, intermediate_size=3072, num_hidden_layers=18,
                     num_attention_heads=16, num_key_value_heads=2, hidden_act="silu", max_position_embeddings=131072,
                     initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True, pad_token_id=0, bos_token_id=1,
                     eos_token_id=2, tie_word_embeddings=True,
                     rope_parameters={"rope_theta": 500000.0, "rope_type": "default"}, use_bias=False, head_dim=128),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "use_bias",
})

ARCHITECTURES = ("Ernie4_5ForCausalLM", "Ernie4_5_ForCausalLM")
TENSORS = (*decoder_tensors("model."), LM_HEAD)


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


REFUSE = (
    silu_only("ernie4_5"),
    rope_types("ernie4_5"),
    Refuse("use_bias", unset, "llama.cpp's ernie4_5 has no biases on its FFN; this checkpoint would run wrong"),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return text_model_parameters(h, "ernie4_5", block_count, file_type)


def vocab(model_dir: Path, h: dict) -> list:
    """Ernie4_5Model.set_vocab: the SentencePiece vocabulary, then tokenizer_config's add_prefix_space."""
    from hfview.tokenizer.vocab import sentencepiece_vocab
    kv = sentencepiece_vocab(model_dir, h)
    cfg_path = model_dir / "tokenizer_config.json"
    if cfg_path.is_file():
        from hfview.tokenizer.special import read_json
        cfg = read_json(cfg_path)
        if "add_prefix_space" in cfg:
            kv.append(boolean(Keys.Tokenizer.ADD_PREFIX, cfg["add_prefix_space"]))
    return kv


FAMILY = Family(
    name="ernie4_5",
    gguf_arch="ernie4_5",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless={},
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)
