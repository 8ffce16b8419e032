"""GLM-4 chat in transformers' layout (GlmForCausalLM, model_type glm) -> llama.cpp `chatglm` (the converter's
ChatGLMModel).

The converter's ChatGLM parameters do not come from the usual keys: the context length is `seq_length` or
else the hidden size, the norm epsilon `layernorm_epsilon` or else 1e-5, the rope base 10000 x `rope_ratio`,
the rope width hidden/heads x partial_rotary_factor. Written as it writes them; a config whose rope base or
head width those fixed readings would get wrong is refused. Q/K as stored (interleaved pairs are ggml's own
layout); gate_up_proj stays fused.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF, Keys
from ..params import boolean, f32, u32
from ._parts.checks import silu_only
from ._parts.glm_common import glm_special_vocab
from .glm4 import normalise

# transformers 5.24's GlmConfig defaults, as data (what the converter sees where config.json is silent).
DEFAULTS = {
    "glm": dict(vocab_size=151552, hidden_size=4096, intermediate_size=13696, num_hidden_layers=40,
                num_attention_heads=32, num_key_value_heads=2, head_dim=128, hidden_act="silu",
                attention_dropout=0.0, max_position_embeddings=131072, initializer_range=0.02,
                rms_norm_eps=1.5625e-07, use_cache=True, tie_word_embeddings=False, pad_token_id=151329,
                eos_token_id=[151329, 151336, 151338], bos_token_id=None, attention_bias=True,
                rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.5, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor",
    "hidden_act", "attention_bias", "tie_word_embeddings",
})
# The converter writes seq_length-or-hidden as the context length and 1e-5 as the epsilon: neither key it
# ignores changes what the runner computes beyond llama.cpp's context cap and a 1e-5-sized epsilon.
HARMLESS: Harmless = {"max_position_embeddings": ANY, "rms_norm_eps": ANY}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb),
    Tensor("model.layers.{bid}.self_attn.k_proj.{wb}", GGUF.ATTN_K.wb),
    Tensor("model.layers.{bid}.self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor("model.layers.{bid}.mlp.gate_up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)

_ROPE_BASE = 10000.0


def _rope_width(h: dict) -> int:
    # the converter's rope width: hidden/heads (attention_dim when stated), not head_dim
    return h.get("attention_dim") or h["hidden_size"] // h["num_attention_heads"]


REFUSE = (
    silu_only("chatglm"),
    Refuse("rope_parameters.rope_type", ("default",), "the converter writes no rope scaling for ChatGLM, so this "
           "checkpoint would run wrong", default="default"),
    Refuse("rope_parameters.rope_theta", (_ROPE_BASE,), "the converter writes ChatGLM's rope base as 10000 x "
           "rope_ratio whatever rope_theta says, so this checkpoint would run wrong"),
)


def check(h: dict, path: Path) -> None:
    rope = h["rope_parameters"]
    head_dim = h.get("head_dim") or _rope_width(h)
    if head_dim != _rope_width(h):
        raise ConfigError(f"{path}: head_dim {head_dim} != hidden_size / num_attention_heads = {_rope_width(h)}: "
                          f"the converter sizes ChatGLM's rope from the latter, so this checkpoint would run wrong")
    if int(head_dim * rope["partial_rotary_factor"]) % 2:
        raise ConfigError(f"{path}: head_dim x partial_rotary_factor is odd: rotation pairs need an even count")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    n_embd = h["hidden_size"]
    n_head = h["num_attention_heads"]
    return [
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch="chatglm"), h.get("seq_length", n_embd)),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="chatglm"), n_embd),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="chatglm"),
            h.get("ffn_hidden_size", h.get("intermediate_size", 4 * n_embd))),
        u32(Keys.LLM.BLOCK_COUNT.format(arch="chatglm"), block_count),
        u32(Keys.Attention.HEAD_COUNT.format(arch="chatglm"), n_head),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch="chatglm"),
            h.get("multi_query_group_num", h.get("num_key_value_heads", n_head))),
        f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="chatglm"), h.get("layernorm_epsilon", 1e-5)),
        u32(Keys.General.FILE_TYPE, file_type),
        u32(Keys.Rope.DIMENSION_COUNT.format(arch="chatglm"),
            int(_rope_width(h) * h["rope_parameters"]["partial_rotary_factor"])),
        boolean(Keys.Tokenizer.ADD_BOS, False),  # the tokenizer's own setting, when it has one, wins
        f32(Keys.Rope.FREQ_BASE.format(arch="chatglm"), _ROPE_BASE * h.get("rope_ratio", 1)),
    ]


def vocab(model_dir: Path, h: dict) -> list:
    # ChatGLMModel.set_vocab for GLM-4 tokenizers: the BPE vocab, then eos/eot/unk found by content
    return glm_special_vocab(model_dir, h, (("eos", "<|endoftext|>"), ("eot", "<|user|>"),
                                            ("unk", "<|endoftext|>")))


FAMILY = Family(
    name="glm",
    gguf_arch="chatglm",
    architectures=("GlmForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    notes={"context_length": "the converter writes the hidden size as ChatGLM's context length (no seq_length "
                             "key in transformers' layout); llama.cpp's context follows it"},
)
