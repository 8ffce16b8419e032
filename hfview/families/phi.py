"""Phi-1, Phi-1.5, Phi-2 (PhiForCausalLM) -> llama.cpp `phi2` (the converter's Phi2Model).

One LayerNorm (with bias) feeds attention and MLP in parallel; separate q/k/v with biases, rope over the first
partial_rotary_factor of each head (NeoX style: nothing permuted), a GELU MLP (fc1 -> fc2), an lm_head with a
bias. The converter writes its own short list: a feed-forward width of 4 x hidden, as many KV heads as heads,
no rope base (llama.cpp's 10000 applies), and add_bos_token false.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor, unset
from ..names import GGUF, Keys
from ..params import GELU, boolean, f32, u32

# transformers 5.24's PhiConfig defaults
DEFAULTS = {
    "phi": dict(vocab_size=51200, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24,
                num_attention_heads=32, num_key_value_heads=32, resid_pdrop=0.0, embd_pdrop=0.0,
                attention_dropout=0.0, hidden_act="gelu_new", max_position_embeddings=2048, initializer_range=0.02,
                layer_norm_eps=1e-05, use_cache=True, tie_word_embeddings=False,
                rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.5, "rope_type": "default"},
                qk_layernorm=False, bos_token_id=1, eos_token_id=2, pad_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "hidden_act", "max_position_embeddings", "layer_norm_eps", "tie_word_embeddings",
    "rope_parameters", "rope_scaling", "rope_theta", "partial_rotary_factor", "qk_layernorm",
})
HARMLESS: Harmless = {"resid_pdrop": ANY, "embd_pdrop": ANY}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.final_layernorm.{wb}", GGUF.OUTPUT_NORM.wb),
    Tensor("lm_head.{wb}", GGUF.OUTPUT.wb),
    Tensor("model.layers.{bid}.input_layernorm.{wb}", GGUF.ATTN_NORM.wb),
    Tensor("model.layers.{bid}.self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb),
    Tensor("model.layers.{bid}.self_attn.k_proj.{wb}", GGUF.ATTN_K.wb),
    Tensor("model.layers.{bid}.self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor("model.layers.{bid}.self_attn.dense.{wb}", GGUF.ATTN_OUT.wb),
    Tensor("model.layers.{bid}.mlp.fc1.{wb}", GGUF.FFN_UP.wb),
    Tensor("model.layers.{bid}.mlp.fc2.{wb}", GGUF.FFN_DOWN.wb),
)


def normalise(h: dict) -> dict:
    """PhiConfig's constructor folds a top-level partial_rotary_factor (as Phi-2 is released) into rope."""
    if "partial_rotary_factor" in h:
        h["rope_parameters"] = {**h["rope_parameters"], "partial_rotary_factor": h["partial_rotary_factor"]}
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


REFUSE = (
    Refuse("qk_layernorm", unset, "llama.cpp's phi2 has no Q/K norms; this checkpoint would run wrong"),
    Refuse("hidden_act", GELU, "llama.cpp's phi2 computes GELU only"),
    Refuse("tie_word_embeddings", unset, "llama.cpp's phi2 needs its own output matrix and bias"),
)


def check(h: dict, path: Path) -> None:
    rope = h["rope_parameters"]
    if rope.get("rope_type", "default") != "default" or float(rope.get("rope_theta", 10000.0)) != 10000.0:
        raise ConfigError(f"{path}: rope {rope}: the converter writes no rope base or scaling for Phi, so llama.cpp's "
                          f"phi2 rotates with base 10000 unscaled; this checkpoint would run wrong")
    if h["num_key_value_heads"] != h["num_attention_heads"] or h["intermediate_size"] != 4 * h["hidden_size"]:
        raise ConfigError(f"{path}: num_key_value_heads {h['num_key_value_heads']} / intermediate_size "
                          f"{h['intermediate_size']}: the converter writes as many KV heads as heads and a "
                          f"feed-forward width of 4 x hidden for Phi, so llama.cpp could not run these weights")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    n_embd, n_head = h["hidden_size"], h["num_attention_heads"]
    rotary = int(h["rope_parameters"]["partial_rotary_factor"] * n_embd) // n_head
    return [u32(Keys.LLM.CONTEXT_LENGTH.format(arch="phi2"), h["max_position_embeddings"]),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="phi2"), n_embd),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="phi2"), 4 * n_embd),
            u32(Keys.LLM.BLOCK_COUNT.format(arch="phi2"), block_count),
            u32(Keys.Attention.HEAD_COUNT.format(arch="phi2"), n_head),
            u32(Keys.Attention.HEAD_COUNT_KV.format(arch="phi2"), n_head),
            f32(Keys.Attention.LAYERNORM_EPS.format(arch="phi2"), h["layer_norm_eps"]),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch="phi2"), rotary),
            u32(Keys.General.FILE_TYPE, file_type), boolean(Keys.Tokenizer.ADD_BOS, False)]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="phi",
    gguf_arch="phi2",
    architectures=("PhiForCausalLM",),
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
