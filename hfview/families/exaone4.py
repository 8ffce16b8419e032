"""EXAONE 4.0 (Exaone4ForCausalLM) -> llama.cpp `exaone4` (the converter's Exaone4Model).

Per-head q/k RMS norms, norms after attention and after the MLP (none before), and hybrid attention:
`layer_types` marks sliding layers (rotary) and global ones (no rotary in EXAONE 4). llama.cpp's exaone4
honours that pattern for 64-layer models only (32B); any other depth it runs as the 1.2B (rope on every
layer, no window), so a sliding window at another depth is refused. Q/K as stored: llama.cpp's exaone4 rotates halves.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, Tensor, stated
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from ._parts.checks import silu_only
from ._parts.rope import llama3_rope_factors

# transformers 5.24's Exaone4Config defaults, as data (layer_types is derived: see normalise).
DEFAULTS = {
    "exaone4": dict(vocab_size=102400, hidden_size=4096, intermediate_size=16384, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=32, hidden_act="silu", max_position_embeddings=2048,
                    initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True, bos_token_id=0, eos_token_id=2,
                    pad_token_id=None, tie_word_embeddings=False, attention_dropout=0.0, sliding_window=4096,
                    sliding_window_pattern=4, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "sliding_window", "sliding_window_pattern",
    "layer_types",
})
HARMLESS: Harmless = {}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Tensor("model.layers.{bid}.post_feedforward_layernorm.weight", GGUF.FFN_POST_NORM.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


def normalise(h: dict) -> dict:
    """Exaone4Config's constructor: layer_types, when unstated, from an integer sliding_window_pattern
    (every pattern-th layer global)."""
    if h.get("layer_types") is None and h.get("sliding_window") is not None:
        pattern = h["sliding_window_pattern"]
        if isinstance(pattern, int) and pattern > 0:
            h["layer_types"] = ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
                                for i in range(h["num_hidden_layers"])]
    return h


# llama.cpp's exaone4 reads the sliding-window pattern only at this depth (EXAONE 4.0 32B)
_HYBRID_DEPTH = 64


def head_dim(h: dict) -> int:
    return h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]


REFUSE = (
    silu_only("exaone4"),
    Refuse("layer_types", stated, "not stated, nor a sliding_window with an integer "
           "sliding_window_pattern: transformers cannot derive the layer pattern (it fails reading this config); "
           "state layer_types"),
    Refuse("rope_parameters.rope_type", ("default", "linear", "yarn", "llama3"), "not one llama.cpp's exaone4 "
           "architecture computes", default="default"),
)


def check(h: dict, path: Path) -> None:
    if len(h["layer_types"]) != h["num_hidden_layers"]:
        raise ConfigError(f"{path}: layer_types lists {len(h['layer_types'])} layers, num_hidden_layers is "
                          f"{h['num_hidden_layers']}")
    if h["num_attention_heads"] * head_dim(h) != h["hidden_size"]:
        raise ConfigError(f"{path}: num_attention_heads x head_dim = {h['num_attention_heads'] * head_dim(h)} != "
                          f"hidden_size {h['hidden_size']}: llama.cpp's exaone4 architecture assumes they are equal")
    if h.get("sliding_window") is not None and h["num_hidden_layers"] != _HYBRID_DEPTH:
        raise ConfigError(f"{path}: sliding_window {h['sliding_window']} with {h['num_hidden_layers']} layers: "
                          f"llama.cpp's exaone4 applies sliding windows (and leaves rope out of the global "
                          f"layers) only for {_HYBRID_DEPTH}-layer models (EXAONE 4.0 32B); this one would run wrong")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    kv = [*text_model_parameters(h, "exaone4", block_count, file_type),
          u32(Keys.LLM.VOCAB_SIZE.format(arch="exaone4"), h["vocab_size"])]
    if h.get("sliding_window") is not None:
        kv.append(u32(Keys.Attention.SLIDING_WINDOW.format(arch="exaone4"), h["sliding_window"]))
        kv.append(KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch="exaone4"), ValueType.ARRAY,
                     [t == "sliding_attention" for t in h["layer_types"]], ValueType.BOOL))
    return kv


def generated(h: dict) -> list:
    rope = h["rope_parameters"]
    if rope.get("rope_type", "").lower() == "llama3":
        # the converter's EXAONE 4 default factor is 16 (Llama 3's is 8)
        return [(GGUF.ROPE_FREQS.weight, llama3_rope_factors({"factor": 16.0, **rope}, head_dim(h)))]
    return []


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="exaone4",
    gguf_arch="exaone4",
    architectures=("Exaone4ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    generated=generated,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    runner=RunnerFacts(llama_cpp_applies_window=True),  # llama.cpp's exaone4 slides on the layers the pattern names
)
