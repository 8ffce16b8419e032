"""Granite SWA (GraniteSWAForCausalLM) -> llama.cpp `granite_swa` (the converter's GraniteSWAModel).

Granite (Llama's tensors, Q/K in rotation pairs, head_dim dropped, four multipliers as scales) plus
interleaved sliding-window layers (layer_types) and a learned attention sink per head (`self_attn.sinks`).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Tensor
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import f32, text_model_parameters, u32
from ._parts.checks import rope_types, silu_only
from .granite import TENSORS as _GRANITE_TENSORS

# transformers 5.24's GraniteSWAConfig defaults, as data (layer_types and layer_rope_theta are derived).
DEFAULTS = {
    "granite_swa": dict(vocab_size=100352, hidden_size=2560, intermediate_size=8192, num_hidden_layers=24,
                        num_attention_heads=20, num_key_value_heads=4, hidden_act="silu", max_position_embeddings=8192,
                        initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True, pad_token_id=None,
                        bos_token_id=100257, eos_token_id=100257, tie_word_embeddings=True,
                        rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_bias=False,
                        attention_dropout=0.0, mlp_bias=False, embedding_multiplier=1.0, logits_scaling=1.0,
                        residual_multiplier=1.0, attention_multiplier=1.0, sliding_window=128),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias", "embedding_multiplier",
    "logits_scaling", "residual_multiplier", "attention_multiplier", "sliding_window", "layer_types",
    "layer_rope_theta", "no_rope_layers",
})
HARMLESS: Harmless = {"head_dim": ANY}  # dropped by the converter, derived from hidden_size by transformers

TENSORS = (*_GRANITE_TENSORS,
           Tensor("model.layers.{bid}.self_attn.sinks", GGUF.ATTN_SINKS.weight))

_ARCH = "granite_swa"
_MULTIPLIERS = (("attention_multiplier", "attention.scale"), ("embedding_multiplier", "embedding_scale"),
                ("residual_multiplier", "residual_scale"), ("logits_scaling", "logit_scale"))


def normalise(h: dict) -> dict:
    """GraniteSWAConfig's constructor: layer_types (global every 4th layer from layer 0), KV heads, and one
    rope base per layer; head_dim is dropped as the converter drops it."""
    if h.get("layer_types") is None:
        h["layer_types"] = ["full_attention" if i % 4 == 0 else "sliding_attention"
                            for i in range(h["num_hidden_layers"])]
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("layer_rope_theta") is None:
        h["layer_rope_theta"] = [h["rope_parameters"]["rope_theta"]] * h["num_hidden_layers"]
    h.pop("head_dim", None)
    return h


# Granite's refusals (hfview.families.granite's), then the window's
REFUSE = (
    silu_only("granite"),
    rope_types("granite"),
    Refuse("no_rope_layers", lambda v: not v or all(v), "marks NoPE layers, which llama.cpp would honour but "
           "transformers' GraniteSWA does not read (it takes layer_rope_theta); refused as ambiguous"),
)


def check(h: dict, path: Path) -> None:
    if len(h["layer_types"]) != h["num_hidden_layers"]:
        raise ConfigError(f"{path}: layer_types lists {len(h['layer_types'])} layers, num_hidden_layers is "
                          f"{h['num_hidden_layers']}")
    theta = h["rope_parameters"]["rope_theta"]
    if any(t != theta for t in h["layer_rope_theta"]):
        raise ConfigError(f"{path}: layer_rope_theta {h['layer_rope_theta']} differs from rope_theta {theta}: the "
                          f"converter writes one rope base (and no NoPE layers), so this checkpoint would run wrong")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    kv = [*text_model_parameters(h, _ARCH, block_count, file_type),
          u32(Keys.LLM.VOCAB_SIZE.format(arch=_ARCH), h["vocab_size"]),
          u32(Keys.Rope.DIMENSION_COUNT.format(arch=_ARCH), h["hidden_size"] // h["num_attention_heads"])]
    kv += [f32(f"{_ARCH}.{key}", h[name]) for name, key in _MULTIPLIERS if h.get(name)]
    kv.append(u32(Keys.Attention.SLIDING_WINDOW.format(arch=_ARCH), h.get("sliding_window", 128)))
    kv.append(KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch=_ARCH), ValueType.ARRAY,
                 [t == "sliding_attention" for t in h["layer_types"]], ValueType.BOOL))
    if h.get("no_rope_layers"):
        kv.append(KV(Keys.Attention.ROPE_PATTERN.format(arch=_ARCH), ValueType.ARRAY,
                     [bool(x) for x in h["no_rope_layers"]],
                     ValueType.BOOL))
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import llama_vocab
    return llama_vocab(model_dir, h)


FAMILY = Family(
    name="granite_swa",
    gguf_arch=_ARCH,
    architectures=("GraniteSWAForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    # llama.cpp's granite_swa slides on the layers layer_types names, and passes its FFNs no scale
    runner=RunnerFacts(llama_cpp_applies_window=True, applies_ffn_scales=False),
)
