"""MiniCPM3 (MiniCPM3-4B: MiniCPM3ForCausalLM) -> llama.cpp `minicpm3` (the converter's MiniCPM3Model).

DeepSeek-V2's latent attention (queries through q_a_proj / q_a_layernorm / q_b_proj, keys and values from the
compressed kv_a_proj_with_mqa expanded by kv_b_proj), written as stored: the converter keeps kv_b_proj whole
(attn_kv_b, no key/value split) and the rope part rotate-half, as llama.cpp's minicpm3 computes it. Over
it MiniCPM's dense decoder (embeddings times scale_emb, each residual branch times scale_depth / sqrt(layers),
the final hidden state divided by hidden_size / dim_model_base), whose multipliers llama.cpp's minicpm3 fixes at
MiniCPM3-4B's values (12, 1.4, 256) and the converter does not write: other values are refused by name.
Longrope's short and long factors, where stated, are generated tensors (the converter's
generate_extra_tensors); the vocabulary is the SentencePiece model, as MiniCPM's (hfview/families/minicpm.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor, stated
from ..names import GGUF, Keys
from ..params import f32, u32
from ._parts.checks import silu_only
from .minicpm import vocab as minicpm_vocab

ARCH = "minicpm3"

# transformers 5.24's MiniCPM3Config defaults (head_dim and qk_head_dim are computed: normalise)
DEFAULTS = {
    "minicpm3": dict(vocab_size=73448, hidden_size=2560, intermediate_size=6400, num_hidden_layers=62,
                     num_attention_heads=40, num_key_value_heads=40, hidden_act="silu", max_position_embeddings=32768,
                     initializer_range=0.1, rms_norm_eps=1e-05, use_cache=True, pad_token_id=None, bos_token_id=1,
                     eos_token_id=2, pretraining_tp=1, tie_word_embeddings=True,
                     rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_bias=False,
                     attention_dropout=0.0, mlp_bias=False, kv_lora_rank=256, q_lora_rank=768, qk_nope_head_dim=64,
                     qk_rope_head_dim=32, v_head_dim=64, scale_emb=12, scale_depth=1.4, dim_model_base=256),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "scale_emb", "scale_depth", "dim_model_base",
})
# recomputed by the config class from qk_rope_head_dim / qk_nope_head_dim whatever is stated
HARMLESS: Harmless = {"head_dim": ANY, "qk_head_dim": ANY}

_L = "model.layers.{bid}."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor(f"{_L}input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(f"{_L}self_attn.q_a_proj.weight", GGUF.ATTN_Q_A.weight),
    Tensor(f"{_L}self_attn.q_a_layernorm.weight", GGUF.ATTN_Q_A_NORM.weight),
    Tensor(f"{_L}self_attn.q_b_proj.weight", GGUF.ATTN_Q_B.weight),
    Tensor(f"{_L}self_attn.kv_a_proj_with_mqa.weight", GGUF.ATTN_KV_A_MQA.weight),
    Tensor(f"{_L}self_attn.kv_a_layernorm.weight", GGUF.ATTN_KV_A_NORM.weight),
    Tensor(f"{_L}self_attn.kv_b_proj.weight", GGUF.ATTN_KV_B.weight),
    Tensor(f"{_L}self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(f"{_L}post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    *(Tensor(f"{_L}mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight") for p in ("gate", "up", "down")),
    Skip(f"{_L}self_attn.rotary_emb.inv_freq"),
)

# llama.cpp's minicpm3 graph fixes these at MiniCPM3-4B's values; the converter writes none of them
_FIXED = {"scale_emb": 12, "scale_depth": 1.4, "dim_model_base": 256}


REFUSE = (
    silu_only(ARCH),
    *(Refuse(key, (value,), f"llama.cpp's {ARCH} architecture computes with {key} {value} (MiniCPM3-4B's) whatever "
             f"the file says, and the converter writes none, so this checkpoint would run wrong")
      for key, value in _FIXED.items()),
    Refuse("q_lora_rank", stated, f"llama.cpp's {ARCH} architecture reads queries through the "
           f"q_a_proj / q_b_proj bottleneck only"),
    Refuse("rope_parameters.rope_theta", (10000.0,), "the converter writes no rope base for MiniCPM3 and llama.cpp "
           "then rotates with 10000", default=10000.0),
    Refuse("rope_parameters.rope_type", ("default", "longrope"), "the converter writes no rope scaling for MiniCPM3, "
           "only longrope's factors as tensors", default="default"),
)


def check(h: dict, path: Path) -> None:
    if h["v_head_dim"] * h["num_attention_heads"] != h["hidden_size"]:
        raise ConfigError(f"{path}: v_head_dim {h['v_head_dim']} x {h['num_attention_heads']} heads is not "
                          f"hidden_size {h['hidden_size']}: the converter writes no value width and llama.cpp's "
                          f"minicpm3 takes hidden_size / heads")
    if h["num_key_value_heads"] != h["num_attention_heads"]:
        raise ConfigError(f"{path}: num_key_value_heads {h['num_key_value_heads']} is not num_attention_heads "
                          f"{h['num_attention_heads']}: latent attention expands a key and value for every head")
    if h.get("attention_bias") or h.get("mlp_bias"):
        raise ConfigError(f"{path}: attention_bias / mlp_bias true: llama.cpp's minicpm3 architecture has no biases")
    rope = h["rope_parameters"]
    if rope.get("rope_type", "default") == "longrope":
        half = h["qk_rope_head_dim"] // 2
        for key in ("long_factor", "short_factor"):
            if len(rope.get(key) or ()) != half:
                raise ConfigError(f"{path}: rope_scaling.{key} has {len(rope.get(key) or ())} entries; longrope "
                                  f"over rope heads of {h['qk_rope_head_dim']} needs {half}")
        factor = h["max_position_embeddings"] / rope.get("original_max_position_embeddings", h["max_position_embeddings"])
        if factor > 1:
            raise ConfigError(f"{path}: longrope over {h['max_position_embeddings']} positions from "
                              f"{rope['original_max_position_embeddings']}: transformers then scales attention, "
                              f"which the converter does not write for MiniCPM3")


def normalise(h: dict) -> dict:
    """MiniCPM3Config.__post_init__: head_dim is the rope width, qk_head_dim the whole query/key head."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    h["head_dim"] = h["qk_rope_head_dim"]
    h["qk_head_dim"] = h["qk_nope_head_dim"] + h["qk_rope_head_dim"]
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """MiniCPM3Model.set_gguf_parameters (its own list, file type first; not TextModel's)."""
    kv = [u32(Keys.General.FILE_TYPE, file_type),
          u32(Keys.LLM.CONTEXT_LENGTH.format(arch=ARCH), h["max_position_embeddings"]),
          u32(Keys.LLM.EMBEDDING_LENGTH.format(arch=ARCH), h["hidden_size"]),
          u32(Keys.LLM.BLOCK_COUNT.format(arch=ARCH), block_count),
          u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch=ARCH), h["intermediate_size"]),
          u32(Keys.Attention.HEAD_COUNT.format(arch=ARCH), h["num_attention_heads"]),
          u32(Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH), h["num_key_value_heads"]),
          f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch=ARCH), h["rms_norm_eps"]),
          u32(Keys.LLM.VOCAB_SIZE.format(arch=ARCH), h["vocab_size"])]
    if h.get("q_lora_rank") is not None:
        kv.append(u32(Keys.Attention.Q_LORA_RANK.format(arch=ARCH), h["q_lora_rank"]))
    return kv + [u32(Keys.Attention.KV_LORA_RANK.format(arch=ARCH), h["kv_lora_rank"]),
                 u32(Keys.Attention.KEY_LENGTH.format(arch=ARCH), h["qk_nope_head_dim"] + h["qk_rope_head_dim"]),
                 u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), h["qk_rope_head_dim"])]


def generated(h: dict) -> list:
    """Longrope's factors (MiniCPM3Model.generate_extra_tensors), F32."""
    rope = h["rope_parameters"]
    if not (rope.get("long_factor") or rope.get("short_factor")):
        return []
    return [(GGUF.ROPE_FACTORS_LONG.weight, np.asarray(rope["long_factor"], dtype=np.float32)),
            (GGUF.ROPE_FACTORS_SHORT.weight, np.asarray(rope["short_factor"], dtype=np.float32))]


FAMILY = Family(
    name="minicpm3",
    gguf_arch=ARCH,
    architectures=("MiniCPM3ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=minicpm_vocab,  # MiniCPM3Model.set_vocab: the SentencePiece model only
    generated=generated,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)
