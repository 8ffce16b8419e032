"""Cohere 2 (Command R7B) -> llama.cpp `cohere2` (the converter's Cohere2Model).

As Command-R (weight-only LayerNorms, parallel attention and MLP, logit_scale, interleaved rope pairs,
output through the embeddings, rope scaling "none"), plus a sliding window: llama.cpp makes every 4th layer
global and applies rope on the sliding layers only, as Cohere 2 does. The converter also writes the
vocab size and a rope width of rotary_pct x head_dim; rotary_pct is a key of the released config.json
that transformers 5's config class no longer has (the converter fails where it is missing; the view reads
it as 1.0, the whole head, which is what transformers computes).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Tensor, stated
from ..names import GGUF, Keys
from ..params import f32, string, text_model_parameters, u32
from ._parts.gemma_common import alternating_layers
from .cohere import cohere_refusals

# transformers 5.24's Cohere2Config defaults, as data (tests/test_family_cohere2.py compares them);
# head_dim is not among them: the config class always computes it (normalise).
DEFAULTS = {
    "cohere2": dict(vocab_size=256000, hidden_size=8192, intermediate_size=22528, logit_scale=0.0625,
                    num_hidden_layers=40, num_attention_heads=64, num_key_value_heads=None, hidden_act="silu",
                    max_position_embeddings=8192, initializer_range=0.02, layer_norm_eps=1e-05, use_cache=True,
                    pad_token_id=0, bos_token_id=5, eos_token_id=255001, tie_word_embeddings=True,
                    rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_bias=False,
                    attention_dropout=0.0, sliding_window=4096),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "layer_norm_eps", "logit_scale", "hidden_act",
    "tie_word_embeddings", "attention_bias", "rope_parameters", "rope_scaling", "rope_theta", "sliding_window",
    "layer_types", "sliding_window_pattern", "rotary_pct",
})
# Keys of Command R7B's released config.json that transformers' Cohere 2 does not use (it always runs the
# interleaved rope, tied embeddings, gated SiLU MLP in parallel with attention); cache_implementation is
# generate()'s cache.
HARMLESS: Harmless = {"cache_implementation": ANY, "position_embedding_type": ANY,
    "use_embedding_sharing": ANY, "use_gated_activation": ANY, "use_parallel_block": ANY,
    "use_parallel_embedding": ANY, "layer_switch": ANY, "order_of_interleaved_layers": ANY}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
)


def normalise(h: dict) -> dict:
    """What Cohere2Config's constructor computes: KV heads, head_dim (always hidden/heads), layer kinds."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    if h.get("layer_types") is None:
        h["layer_types"] = alternating_layers(h["num_hidden_layers"], h.pop("sliding_window_pattern", 4))
    h.pop("sliding_window_pattern", None)  # consumed by the config class
    return h


REFUSE = (
    *cohere_refusals("cohere2"),
    Refuse("sliding_window", stated, "the converter needs the window size"),
    Refuse("rotary_pct", (1.0,), "transformers' Cohere 2 rotates the whole head whatever it says, the converter "
           "would write a narrower rope; they would disagree", default=1.0),
)


def check(h: dict, path: Path) -> None:
    if list(h["layer_types"]) != alternating_layers(h["num_hidden_layers"], 4):
        raise ConfigError(f"{path}: layer_types {h['layer_types']}: llama.cpp's cohere2 makes every 4th layer "
                          f"global and the others sliding, and the converter writes no pattern")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    rotary_pct = h.get("rotary_pct", 1.0)
    return [*text_model_parameters(h, "cohere2", block_count, file_type),
            f32(Keys.LLM.LOGIT_SCALE.format(arch="cohere2"), h["logit_scale"]),
            u32(Keys.Attention.SLIDING_WINDOW.format(arch="cohere2"), h["sliding_window"]),
            u32(Keys.LLM.VOCAB_SIZE.format(arch="cohere2"), h["vocab_size"]),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch="cohere2"),
                int(rotary_pct * (h["hidden_size"] // h["num_attention_heads"]))),
            string(Keys.Rope.SCALING_TYPE.format(arch="cohere2"), "none")]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="cohere2",
    gguf_arch="cohere2",
    architectures=("Cohere2ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    notes={"rotary_pct": "read as 1.0 where config.json lacks it (the converter fails there: KeyError)"},
    # llama.cpp's cohere2 slides on three layers of four, as the model does
    runner=RunnerFacts(llama_cpp_applies_window=True),
)
