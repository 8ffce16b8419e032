"""GLM-4-0414 (Glm4ForCausalLM) -> llama.cpp `glm4` (the converter's Glm4Model).

GLM-4 rotates interleaved pairs over the first `partial_rotary_factor` of each head, which is ggml's own
rope layout: Q/K are presented as stored. gate_up_proj stays fused (llama.cpp's glm4 splits ffn_up itself).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from ._parts.checks import rope_types, silu_only
from ._parts.glm_common import glm_special_vocab

# transformers 5.24's Glm4Config defaults, as data (what the converter sees where config.json is silent).
DEFAULTS = {
    "glm4": dict(vocab_size=151552, hidden_size=4096, intermediate_size=13696, num_hidden_layers=40,
                 num_attention_heads=32, num_key_value_heads=2, head_dim=128, hidden_act="silu",
                 attention_dropout=0.0, max_position_embeddings=131072, initializer_range=0.02,
                 rms_norm_eps=1.5625e-07, use_cache=True, tie_word_embeddings=False, pad_token_id=151329,
                 eos_token_id=[151329, 151336, 151338], bos_token_id=None, attention_bias=True,
                 rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.5, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "partial_rotary_factor", "hidden_act", "attention_bias", "tie_word_embeddings",
})
HARMLESS: Harmless = {}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb),
    Tensor("model.layers.{bid}.self_attn.k_proj.{wb}", GGUF.ATTN_K.wb),
    Tensor("model.layers.{bid}.self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.post_self_attn_layernorm.weight", GGUF.ATTN_POST_NORM.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor("model.layers.{bid}.mlp.gate_up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Tensor("model.layers.{bid}.post_mlp_layernorm.weight", GGUF.FFN_POST_NORM.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


def normalise(h: dict) -> dict:
    """Glm4Config's constructor: a top-level partial_rotary_factor (the released layout) moves into
    rope_parameters unless that states its own; 0.5 when neither does."""
    top = h.pop("partial_rotary_factor", None)
    rope = dict(h["rope_parameters"])
    rope.setdefault("partial_rotary_factor", 0.5 if top is None else top)
    h["rope_parameters"] = rope
    return h


def rope_dimension_count(h: dict) -> int:
    head_dim = h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]
    return int(head_dim * h["rope_parameters"]["partial_rotary_factor"])


_ABSENT = object()  # mrope_section is refused where stated at all, even as null

REFUSE = (
    silu_only("glm4"),
    Refuse("rope_parameters.mrope_section", lambda v: v is _ABSENT, "GLM-4V's multimodal rope is not read by hfview: "
           "its Q/K rows would need the converter's neox regrouping", default=_ABSENT),
    rope_types("glm4"),
)


def check(h: dict, path: Path) -> None:
    if rope_dimension_count(h) % 2:
        raise ConfigError(f"{path}: head_dim x partial_rotary_factor = {rope_dimension_count(h)} rotary dims: "
                          f"rotation pairs need an even count")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [*text_model_parameters(h, "glm4", block_count, file_type),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch="glm4"), rope_dimension_count(h))]


def vocab(model_dir: Path, h: dict) -> list:
    # Glm4Model.set_vocab: the BPE vocab, then eos/eot/unk/bos found by content among the added tokens
    return glm_special_vocab(model_dir, h, (("eos", "<|endoftext|>"), ("eot", "<|user|>"),
                                            ("unk", "<|endoftext|>"), ("bos", "<|endoftext|>")))


FAMILY = Family(
    name="glm4",
    gguf_arch="glm4",
    architectures=("Glm4ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)
