"""Phi-3 (Phi3ForCausalLM) -> llama.cpp `phi3` (the converter's Phi3MiniModel).

The converter keeps Phi-3's fused tensors as they are: qkv_proj -> attn_qkv, gate_up_proj -> ffn_up
(llama.cpp splits them at run time), and writes no Q/K permutation (phi3 uses NeoX rope). It writes its
own hyperparameter list (not TextModel's) and, for longrope checkpoints, the long/short rope factors as
tensors plus an attention factor KV that it adds while preparing tensors.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF, Keys
from ..params import f32, first, u32

# transformers 5.24's Phi3Config defaults
DEFAULTS = {
    "phi3": dict(vocab_size=32064, hidden_size=3072, intermediate_size=8192, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=None, resid_pdrop=0.0, embd_pdrop=0.0,
                 attention_dropout=0.0, hidden_act="silu", max_position_embeddings=4096,
                 original_max_position_embeddings=4096, initializer_range=0.02, rms_norm_eps=1e-05,
                 use_cache=True, tie_word_embeddings=False, bos_token_id=1, eos_token_id=32000,
                 pad_token_id=32000, sliding_window=None,
                 rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "original_max_position_embeddings", "rms_norm_eps",
    "rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor", "sliding_window",
    "tie_word_embeddings", "hidden_act",
})
# Dropout is off at inference. Phi3Config has no bias options: transformers ignores these keys, and a
# checkpoint that had biases would carry tensors this family refuses by name.
HARMLESS: Harmless = {"resid_pdrop": ANY, "embd_pdrop": ANY, "attention_bias": ANY, "mlp_bias": ANY,
                      "lm_head_bias": ANY,
                      # Phi-4-mini's remote-code keys, at the values under which that code computes what
                      # transformers' Phi3 does: every layer full attention, no position interpolation
                      "full_attn_mod": (1,), "interpolate_factor": (1,)}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.qkv_proj.weight", GGUF.ATTN_QKV.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor("model.layers.{bid}.mlp.gate_up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


def normalise(h: dict) -> dict:
    """What Phi3Config's constructor and the converter's TextModel do to the rope parameters."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    rope = h["rope_parameters"] = dict(h["rope_parameters"])
    rope.setdefault("partial_rotary_factor", h.get("partial_rotary_factor", 1.0))
    if rope.get("rope_type") == "yarn":  # Phi3Config reads an old "yarn" as longrope
        rope["rope_type"] = "longrope"
    if rope.get("rope_type") == "longrope":
        # Phi3Config gives the top-level original_max_position_embeddings priority for scaled rope
        rope["original_max_position_embeddings"] = h["original_max_position_embeddings"]
    return h


def original_context(h: dict) -> int:
    """The converter's rope original_max_position_embeddings: mirrored from the top level when the rope
    parameters lack it."""
    return h["rope_parameters"].get("original_max_position_embeddings", h["original_max_position_embeddings"])


def rope_dims(h: dict) -> int:
    return int(h["rope_parameters"].get("partial_rotary_factor", 1.0) * h["hidden_size"]) // h["num_attention_heads"]


REFUSE = (
    Refuse("hidden_act", ("silu",), "llama.cpp's phi3 architecture computes SwiGLU (SiLU) only; this checkpoint "
           "would run wrong", default="silu"),
    Refuse("rope_parameters.rope_type", lambda t: t != "su", "transformers 5.24 cannot load this config (it renames "
           "'su' to 'longrope' only after checking for original_max_position_embeddings), so the converter's reading "
           "of it is not defined here; write \"type\": \"longrope\" as current Phi-3 releases do"),
    Refuse("rope_parameters.rope_type", ("default", "longrope"), "Phi-3 computes default or longrope rope only"),
)


def check(h: dict, path: Path) -> None:
    rope = h["rope_parameters"]
    if rope.get("long_factor"):
        want = rope_dims(h) // 2
        for key in ("long_factor", "short_factor"):
            if not isinstance(rope.get(key), list) or len(rope[key]) != want:
                raise ConfigError(f"{path}: rope {key} must be a list of {want} numbers (half the rotary "
                                  f"dimensions); found {rope.get(key)!r}")


def _scale(h: dict) -> float:
    return first(h, ["n_positions", "max_position_embeddings"]) / original_context(h)


def tensor_time_kv(h: dict) -> list:
    rope = h["rope_parameters"]
    if not rope.get("long_factor"):
        return []
    scale = _scale(h)
    orig = original_context(h)
    attn_factor = math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0
    return [f32(Keys.Rope.SCALING_ATTN_FACTOR.format(arch="phi3"), attn_factor)]


def generated(h: dict) -> list:
    rope = h["rope_parameters"]
    if not rope.get("long_factor"):
        return []
    return [(GGUF.ROPE_FACTORS_LONG.weight, np.asarray(rope["long_factor"], dtype=np.float32)),
            (GGUF.ROPE_FACTORS_SHORT.weight, np.asarray(rope["short_factor"], dtype=np.float32))]


def parameters(h: dict, block_count: int, file_type: int) -> list:
    rope = h["rope_parameters"]
    return [
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch="phi3"), first(h, ["n_positions", "max_position_embeddings"])),
        u32(Keys.Rope.SCALING_ORIG_CTX_LEN.format(arch="phi3"), original_context(h)),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="phi3"), h["hidden_size"]),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="phi3"), h["intermediate_size"]),
        u32(Keys.LLM.BLOCK_COUNT.format(arch="phi3"), block_count),
        u32(Keys.Attention.HEAD_COUNT.format(arch="phi3"), h["num_attention_heads"]),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch="phi3"), h["num_key_value_heads"]),
        f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="phi3"), h["rms_norm_eps"]),
        u32(Keys.Rope.DIMENSION_COUNT.format(arch="phi3"), rope_dims(h)),
        f32(Keys.Rope.FREQ_BASE.format(arch="phi3"), rope.get("full_attention", rope)["rope_theta"]),
        u32(Keys.General.FILE_TYPE, file_type),
        # 0 (no window) tells llama.cpp's phi3 loader this is not a Phi-4-style full-attention model
        u32(Keys.Attention.SLIDING_WINDOW.format(arch="phi3"), h.get("sliding_window") or 0),
    ]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.phi3 import phi3_vocab
    return phi3_vocab(model_dir, h)


FAMILY = Family(
    name="phi3",
    gguf_arch="phi3",
    architectures=("Phi3ForCausalLM",),
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
    tensor_time_kv=tensor_time_kv,
    notes={"fused": "qkv_proj and gate_up_proj are presented fused, as the converter writes them"},
)
