"""PLaMo 3 (Plamo3ForCausalLM / PLaMo3ForCausalLM, model_type plamo3, remote code) -> llama.cpp `plamo3` (the
converter's Plamo3Model, a TextModel).

Llama's block under PLaMo's names (model.layers.layers.{i}.mixer / .mlp) with sandwich norms. The GGUF keeps the
fused projections as stored: mixer.qkv_proj (all query rows, then key, then value) is attn_qkv and mlp.gate_up_proj
(gate rows above up rows) is ffn_up, which llama.cpp's plamo3 graph splits itself; its rotation is NeoX's, so Q/K
rows stay as stored. The norms store their scales as offsets, which the converter adds back: 1 for pre_mixer_norm,
pre_mlp_norm, q_norm, k_norm and the final norm, 1/5 for post_mixer_norm and 5^-1.5 for post_mlp_norm (the
constants the release's modeling code fixes).

transformers 5.24 has no PLaMo 3 class, so the converter reads config.json as written (no Plamo3Config defaults),
and so does the view. A key the release's Plamo3Config (configuration_plamo.py) fills in where the converter's
silence gives llama.cpp something else must therefore be stated (REMOTE_DEFAULTS lists those defaults, as data).
Every sliding_window_pattern-th layer attends fully at rope_theta (YaRN over initial_context_length positions,
beta 32 to 1, not truncated, where rope_scaling_factor is not 1: the converter's own rope_parameters); the others
attend through window_size and rotate at rope_local_theta (rope.freq_base_swa). llama.cpp's plamo3 graph has no
embedding scale and no other linear layers, so scale_embedding true and a linear_type other than normal are refused.

The window: llama.cpp's standard sliding window attends to window_size positions, the current one included, as vLLM
and SGLang read PLaMo 3's window_size. (mlx-lm widens it by one for configs that state no rope_scaling_factor; the
converter does not, and neither does the view.) A head stored beside tie_word_embeddings true is written, as the
converter writes it, where vLLM would use the embedding.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, Tensor, unset
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from ..views import OFFSET_ONE, offset

ARCHITECTURES = ("Plamo3ForCausalLM", "PLaMo3ForCausalLM")
READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings",
    "rope_theta", "rope_local_theta", "rope_scaling_factor", "initial_context_length", "window_size",
    "sliding_window", "sliding_window_pattern", "attention_bias", "hidden_activation", "scale_embedding",
    "linear_type", "interleaved_sliding_window",
})
# a vision wrapper's keys, unset on the text models
HARMLESS: Harmless = {"image_token_id": (None,), "image_feature_size": (None,), "image_proj_type": ("linear",)}

# The release's Plamo3Config (configuration_plamo.py, as vLLM's and mlx-lm's copies state it): where config.json
# leaves a key out, the remote code computes with these, the converter writes nothing.
REMOTE_DEFAULTS = dict(
    hidden_size=4096, num_hidden_layers=32, rms_norm_eps=1e-6, tie_word_embeddings=True, num_attention_heads=32,
    num_key_value_heads=4, head_dim=128, max_position_embeddings=2048, window_size=128, sliding_window_pattern=8,
    rope_theta=150000, rope_local_theta=10000, rope_scaling_factor=1, initial_context_length=None,
    attention_bias=False, intermediate_size=13312, hidden_activation="swiglu", vocab_size=32000,
)
# absent, the converter writes nothing (or fails) where the remote code has a value of its own
_REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
             "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta",
             "rope_local_theta", "window_size", "sliding_window_pattern")

_L = "model.layers.layers.{bid}."
_tied = lambda h: h.get("tie_word_embeddings", True) is not False  # noqa: E731
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=(OFFSET_ONE,)),
    # tied (the remote default) releases store no head; a stored one is written, as the converter does
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=lambda h: not _tied(h)),
    Tensor(_L + "pre_mixer_norm.weight", GGUF.ATTN_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "mixer.qkv_proj.weight", GGUF.ATTN_QKV.weight),
    Tensor(_L + "mixer.q_norm.weight", GGUF.ATTN_Q_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "mixer.k_norm.weight", GGUF.ATTN_K_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "mixer.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(_L + "post_mixer_norm.weight", GGUF.ATTN_POST_NORM, steps=(offset(1 / 5, "1/5"),)),
    Tensor(_L + "pre_mlp_norm.weight", GGUF.FFN_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "mlp.gate_up_proj.weight", GGUF.FFN_UP.weight),
    Tensor(_L + "mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Tensor(_L + "post_mlp_norm.weight", GGUF.FFN_POST_NORM,
           steps=(offset(1 / 5 ** 1.5, "5^-1.5"),)),
    Skip(_L + "mixer.rotary_emb.inv_freq"),
)
# The two post norms' GGUF names carry no ".weight": gguf-py's PLaMo mapping names them with the suffix, so the
# converter's renaming consumes it, and llama.cpp's plamo3 loads them by those bare names.


def window(h: dict) -> int:
    """The converter's find_hparam(["window_size", "sliding_window"]): window_size (required, check)."""
    return h["window_size"]


def layer_windows(h: dict) -> list:
    """Plamo3Config's interleaved_sliding_window: None for every sliding_window_pattern-th layer, else the window."""
    n = h["sliding_window_pattern"]
    return [None if (i + 1) % n == 0 else h["window_size"] for i in range(h["num_hidden_layers"])]


def normalise(h: dict) -> dict:
    """rope_parameters as the converter builds them from PLaMo 3's flat keys: the global layers' base (YaRN where
    rope_scaling_factor is not 1), the sliding layers' rope_local_theta."""
    rope = {"rope_theta": h["rope_parameters"].get("rope_theta"),
            "sliding_attention": {"rope_theta": h.get("rope_local_theta")}}
    factor = h.get("rope_scaling_factor", 1)
    if factor is not None and factor != 1:
        rope.update(rope_type="yarn", factor=float(factor),
                    original_max_position_embeddings=h.get("initial_context_length"), beta_fast=32.0, beta_slow=1.0,
                    truncate=False)
    h["rope_parameters"] = rope
    return h


def _layer_count(v) -> bool:
    # None passes here: check names it among the keys not stated
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)


REFUSE = (
    Refuse("sliding_window_pattern", _layer_count, "a positive layer count is needed (every "
           "sliding_window_pattern-th layer attends fully)"),
    Refuse("linear_type", ("normal",), "llama.cpp's plamo3 has plain linear layers only (linear_type normal)",
           default="normal"),
    Refuse("scale_embedding", unset, "the remote code multiplies the embedding by sqrt(hidden_size), which "
           "llama.cpp's plamo3 graph does not and the converter does not fold in"),
    Refuse("attention_bias", unset, "llama.cpp's plamo3 has no attention biases"),
    Refuse("hidden_activation", ("swiglu",), "llama.cpp's plamo3 computes SwiGLU only", default="swiglu"),
)


def check(h: dict, path: Path) -> None:
    for key in _REQUIRED:
        if h.get(key) is None and not (key == "rope_theta" and h["rope_parameters"].get("rope_theta") is not None):
            raise ConfigError(f"{path}: {key} is missing; the converter reads PLaMo 3's config.json as written (no "
                              f"Plamo3Config defaults apply), so llama.cpp would not get the remote code's "
                              f"{REMOTE_DEFAULTS[key]!r}")
    if h.get("sliding_window") is not None and h["sliding_window"] != h["window_size"]:
        raise ConfigError(f"{path}: sliding_window {h['sliding_window']} differs from window_size "
                          f"{h['window_size']}; the converter writes window_size, mlx-lm's PLaMo 3 attends through "
                          f"sliding_window")
    pattern = h["sliding_window_pattern"]
    # Plamo3Config computes this list from window_size and the pattern, but a stated one overrides its attribute
    # (vLLM reads it per layer); the converter and llama.cpp know only the two keys, so it must agree with them
    if (stated := h.get("interleaved_sliding_window")) is not None and stated != layer_windows(h):
        raise ConfigError(f"{path}: interleaved_sliding_window {stated!r} is not the per-layer windows window_size "
                          f"{h['window_size']} and sliding_window_pattern {pattern} give over "
                          f"{h['num_hidden_layers']} layers ({layer_windows(h)!r}), which is all llama.cpp reads")
    factor = h.get("rope_scaling_factor", 1)
    if factor is not None and factor != 1 and h.get("initial_context_length") is None:
        raise ConfigError(f"{path}: rope_scaling_factor {factor} without initial_context_length: PLaMo 3's YaRN "
                          f"scales from initial_context_length positions")
    if h["num_attention_heads"] % h["num_key_value_heads"]:
        raise ConfigError(f"{path}: num_attention_heads {h['num_attention_heads']} is not a multiple of "
                          f"num_key_value_heads {h['num_key_value_heads']}")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's list, then Plamo3Model's vocabulary size and sliding window with its pattern."""
    arch = "plamo3"
    return [*text_model_parameters(h, arch, block_count, file_type),
            u32(Keys.LLM.VOCAB_SIZE.format(arch=arch), h["vocab_size"]),
            u32(Keys.Attention.SLIDING_WINDOW.format(arch=arch), window(h)),
            u32(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch=arch), h["sliding_window_pattern"])]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import plamo3_vocab
    return plamo3_vocab(model_dir, h)


FAMILY = Family(
    name="plamo3",
    gguf_arch="plamo3",
    architectures=ARCHITECTURES,
    defaults={"plamo3": {}},
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    notes={"fused projections": "attn_qkv and ffn_up (gate rows, then up rows) as stored; llama.cpp splits them",
           "norm offsets": "1 + w, 1/5 + w (post_mixer_norm), 5^-1.5 + w (post_mlp_norm), as the converter adds"},
    # llama.cpp's plamo3 slides on all but every sliding_window_pattern-th layer
    runner=RunnerFacts(llama_cpp_applies_window=True),
)
