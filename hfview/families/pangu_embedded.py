"""openPangu-Embedded (PanguEmbeddedForCausalLM, model_type PanguEmbedded, remote code) -> llama.cpp
`pangu-embedded` (the converter's PanguEmbeddedModel, a plain TextModel).

Llama's block with a bias on q_proj, k_proj, v_proj and o_proj (config `bias`) and none in the MLP; Q/K stored
as they are (llama.cpp's pangu-embedded rotates halves, as the modeling code does). The converter writes
TextModel's keys, the vocabulary size and the rope width, and, where config.json states no head_dim, the key
and value widths after them; the SentencePiece vocabulary, then add_space_prefix from tokenizer_config.json.

transformers 5.24 has no PanguEmbedded class, so the converter reads config.json as written (no
PanguEmbeddedConfig defaults), and so does the view: a key whose config-class default differs from what the
converter's silence gives llama.cpp (rope_theta, whose default is 1.6e7, num_key_value_heads, 8) must be
stated. llama.cpp's pangu-embedded needs the attention output bias and has no sandwich norms or MLP biases:
bias false, sandwich_norm, mlp_bias and a qkv_bias other than bias are refused by name.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor, stated
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from ._parts.checks import silu_only
from ._parts.decoder import decoder_tensors

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "bias", "qkv_bias",
})
HARMLESS: Harmless = {"sandwich_norm": (False,), "mlp_bias": (False,)}
ARCHITECTURES = ("PanguEmbeddedForCausalLM",)
_tied = lambda h: bool(h.get("tie_word_embeddings"))  # noqa: E731
TENSORS = (
    *decoder_tensors("model."),
    Skip("lm_head.weight", when=_tied),  # the converter skips a tied head even where it is stored
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)
_ROPE_TYPES = ("default", "linear")
# read by name from config.json as written; absent, the converter writes nothing (or fails) where the config
# class has a value of its own
_REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "max_position_embeddings", "rms_norm_eps")


REFUSE = (
    silu_only("pangu-embedded"),
    # a stated null refused too: the KV below compute with these values
    *(Refuse(key, stated, "missing; the converter reads openPangu-Embedded's config.json as written "
             "(no PanguEmbeddedConfig defaults apply), so llama.cpp would not get it") for key in _REQUIRED),
    Refuse("rope_parameters.rope_theta", stated, "missing; PanguEmbeddedConfig then rotates at base "
           "1.6e7, while the converter writes no base and llama.cpp would rotate at 10000"),
    # `is True`, not (True,): 1 == True would pass a tuple
    Refuse("bias", lambda v: v is True, "llama.cpp's pangu-embedded architecture requires the attention output bias, "
           "so this checkpoint would not load", default=True),
    Refuse("rope_parameters.rope_type", _ROPE_TYPES, f"not one the view presents to llama.cpp's pangu-embedded "
           f"({', '.join(_ROPE_TYPES)})", default="default"),
)


def check(h: dict, path: Path) -> None:
    if "qkv_bias" in h and h["qkv_bias"] is not h.get("bias", True):
        raise ConfigError(f"{path}: qkv_bias {h['qkv_bias']!r} differs from bias; the view reads openPangu-Embedded "
                          f"as the release's modeling code computes it, with one bias switch for q, k, v and o")


def head_dim(h: dict) -> int:
    return h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]


def parameters(h: dict, block_count: int, file_type: int) -> list:
    arch = "pangu-embedded"
    kv = [*text_model_parameters(h, arch, block_count, file_type),
          u32(Keys.LLM.VOCAB_SIZE.format(arch=arch), h["vocab_size"]),
          u32(Keys.Rope.DIMENSION_COUNT.format(arch=arch), head_dim(h))]
    if h.get("head_dim") is None:
        kv += [u32(Keys.Attention.KEY_LENGTH.format(arch=arch), head_dim(h)),
               u32(Keys.Attention.VALUE_LENGTH.format(arch=arch), head_dim(h))]
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.errors import TokenizerError
    from hfview.tokenizer.special import read_json
    from hfview.tokenizer.vocab import ADD_SPACE_PREFIX, sentencepiece_vocab
    from hfview.tokenizer.writer import KVWriter

    w = KVWriter()
    w.extend(sentencepiece_vocab(model_dir, h))
    cfg_path = Path(model_dir) / "tokenizer_config.json"
    if cfg_path.is_file() and (prefix := read_json(cfg_path).get("add_prefix_space")) is not None:
        if not isinstance(prefix, bool):
            raise TokenizerError(f"{cfg_path}: add_prefix_space must be true or false, not {prefix!r}")
        w.add_bool(ADD_SPACE_PREFIX, prefix)
    return w.kvs()


FAMILY = Family(
    name="pangu_embedded",
    gguf_arch="pangu-embedded",
    architectures=ARCHITECTURES,
    defaults={"PanguEmbedded": {}},
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
)
