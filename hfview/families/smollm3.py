"""SmolLM3 (SmolLM3ForCausalLM) -> llama.cpp `smollm3` (the converter's SmolLM3Model, a LlamaModel).

Llama's layout and Q/K regrouping into rotation pairs; every 4th layer has no rope (NoPE). llama.cpp
hard-codes that interval (4), so a checkpoint whose no_rope_layers say otherwise is refused.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.decoder import LM_HEAD, decoder_tensors, llama_parameters
from ._parts.vocab import llama_vocab

DEFAULTS = {
    "smollm3": dict(vocab_size=128256, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                    num_attention_heads=16, num_key_value_heads=4, hidden_act="silu", max_position_embeddings=32768,
                    initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, pad_token_id=128004,
                    bos_token_id=128000, eos_token_id=128001,
                    rope_parameters={"rope_theta": 2000000.0, "rope_type": "default"}, use_sliding_window=False,
                    sliding_window=None, no_rope_layer_interval=4, attention_bias=False, attention_dropout=0.0,
                    mlp_bias=False, tie_word_embeddings=True),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias",
    "no_rope_layers", "no_rope_layer_interval",  # checked against llama.cpp's fixed interval
    "use_sliding_window", "sliding_window", "layer_types", "max_window_layers",  # checked: no sliding layer
})

HARMLESS: Harmless = {}
ARCHITECTURES = ("SmolLM3ForCausalLM",)
TENSORS = (*decoder_tensors("model.", pairs=True), LM_HEAD)
_LLAMA_CPP_NOPE_STEP = 4  # llama.cpp's smollm3: layer il has no rope when (il + 1) % 4 == 0


def normalise(h: dict) -> dict:
    """What SmolLM3Config computes: the KV head count, the per-layer rope flags, the layer types."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    n = h["num_hidden_layers"]
    if h.get("no_rope_layers") is None:
        h["no_rope_layers"] = [int((i + 1) % h["no_rope_layer_interval"] != 0) for i in range(n)]
    if h.get("layer_types") is None:
        sliding = h.get("use_sliding_window") and h.get("sliding_window") is not None
        h["layer_types"] = ["sliding_attention" if sliding and not rope else "full_attention"
                            for rope in h["no_rope_layers"]]
    return h


REFUSE = (
    silu_only("smollm3"),
    rope_types("smollm3"),
    Refuse("layer_types", lambda v: "sliding_attention" not in v, "sliding-window layers; llama.cpp's smollm3 attends "
           "to the whole context, so they would run wrong"),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    expected = [int((i + 1) % _LLAMA_CPP_NOPE_STEP != 0) for i in range(h["num_hidden_layers"])]
    if list(h["no_rope_layers"]) != expected:
        raise ConfigError(f"{path}: no_rope_layers {h['no_rope_layers']} (1 = rope): llama.cpp's smollm3 leaves "
                          f"the rope out of every {_LLAMA_CPP_NOPE_STEP}th layer only ({expected}); "
                          f"this checkpoint would run wrong")
    if h.get("mlp_bias") or h.get("attention_bias"):
        raise ConfigError(f"{path}: attention_bias / mlp_bias: llama.cpp's smollm3 has no biases")


parameters = llama_parameters("smollm3")


FAMILY = Family(
    name="smollm3",
    gguf_arch="smollm3",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=llama_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    runner=RunnerFacts(applies_ffn_scales=False),  # llama.cpp's smollm3 graph passes its FFNs no scale
)
