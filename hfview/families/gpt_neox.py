"""GPT-NeoX / Pythia (GPTNeoXForCausalLM) -> llama.cpp `gptneox` (the converter's GPTNeoXModel).

The fused query_key_value is stored head by head and regrouped as q, k, v (a row permutation); rope over
the first rotary_pct of each head (NeoX style, nothing permuted), parallel residual, LayerNorm with bias,
biases everywhere, an untied output. The converter writes its own short list: no rope base (llama.cpp's
10000 applies) and no file type.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor, qkv_by_part
from ..names import GGUF, Keys
from ..params import GELU, boolean, f32, u32

# transformers 5.24's GPTNeoXConfig defaults
DEFAULTS = {
    "gpt_neox": dict(vocab_size=50432, hidden_size=6144, num_hidden_layers=44, num_attention_heads=64,
                     intermediate_size=24576, hidden_act="gelu", attention_dropout=0.0, hidden_dropout=0.0,
                     classifier_dropout=0.1, max_position_embeddings=2048, initializer_range=0.02,
                     layer_norm_eps=1e-05, use_cache=True, bos_token_id=0, eos_token_id=2, pad_token_id=None,
                     tie_word_embeddings=False, use_parallel_residual=True,
                     rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.25, "rope_type": "default"},
                     attention_bias=True, is_decoder=False),
}

READS = frozenset({
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
    "max_position_embeddings", "layer_norm_eps", "tie_word_embeddings", "use_parallel_residual",
    "rope_parameters", "rope_scaling", "rope_theta", "rotary_pct", "rotary_emb_base", "attention_bias",
})
# classifier_dropout: the sequence-classification head's; is_decoder: encoder-decoder plumbing.
# attention_probs_dropout_prob / hidden_dropout_prob: gpt-neox-20b's release names its dropouts so.
HARMLESS: Harmless = {"classifier_dropout": ANY, "is_decoder": ANY, "attention_probs_dropout_prob": ANY,
                      "hidden_dropout_prob": ANY}

TENSORS = (
    Tensor("gpt_neox.embed_in.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("gpt_neox.final_layer_norm.{wb}", GGUF.OUTPUT_NORM.wb),
    Tensor("embed_out.weight", GGUF.OUTPUT.weight),
    Tensor("gpt_neox.layers.{bid}.input_layernorm.{wb}", GGUF.ATTN_NORM.wb),
    Tensor("gpt_neox.layers.{bid}.attention.query_key_value.{wb}", GGUF.ATTN_QKV.wb,
           qkv_by_part("num_attention_heads")),
    Tensor("gpt_neox.layers.{bid}.attention.dense.{wb}", GGUF.ATTN_OUT.wb),
    Tensor("gpt_neox.layers.{bid}.post_attention_layernorm.{wb}", GGUF.FFN_NORM.wb),
    Tensor("gpt_neox.layers.{bid}.mlp.dense_h_to_4h.{wb}", GGUF.FFN_UP.wb),
    Tensor("gpt_neox.layers.{bid}.mlp.dense_4h_to_h.{wb}", GGUF.FFN_DOWN.wb),
)


def normalise(h: dict) -> dict:
    """GPTNeoXConfig's constructor folds the released rotary_pct / rotary_emb_base into rope_parameters."""
    rope = dict(h["rope_parameters"])
    if "rotary_pct" in h:
        rope["partial_rotary_factor"] = h["rotary_pct"]
    if "rotary_emb_base" in h:
        rope["rope_theta"] = h["rotary_emb_base"]
    h["rope_parameters"] = rope
    return h


REFUSE = (
    Refuse("hidden_act", GELU, "llama.cpp's gptneox computes GELU only"),
)


def check(h: dict, path: Path) -> None:
    rope = h["rope_parameters"]
    if rope.get("rope_type", "default") != "default" or float(rope.get("rope_theta", 10000.0)) != 10000.0:
        raise ConfigError(f"{path}: rope {rope}: the converter writes no rope base or scaling for GPT-NeoX, so "
                          f"llama.cpp's gptneox rotates with base 10000 unscaled; this checkpoint would run wrong")
    if not h["attention_bias"] or h["tie_word_embeddings"]:
        raise ConfigError(f"{path}: attention_bias {h['attention_bias']} / tie_word_embeddings "
                          f"{h['tie_word_embeddings']}: llama.cpp's gptneox needs the attention biases and a "
                          f"separate output matrix (embed_out); this checkpoint cannot load")


def rotary_dims(h: dict) -> int:
    return int(h["rope_parameters"]["partial_rotary_factor"] * (h["hidden_size"] // h["num_attention_heads"]))


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [u32(Keys.LLM.CONTEXT_LENGTH.format(arch="gptneox"), h["max_position_embeddings"]),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="gptneox"), h["hidden_size"]),
            u32(Keys.LLM.BLOCK_COUNT.format(arch="gptneox"), block_count),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="gptneox"), h["intermediate_size"]),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch="gptneox"), rotary_dims(h)),
            u32(Keys.Attention.HEAD_COUNT.format(arch="gptneox"), h["num_attention_heads"]),
            boolean(Keys.LLM.USE_PARALLEL_RESIDUAL.format(arch="gptneox"), h["use_parallel_residual"]),
            f32(Keys.Attention.LAYERNORM_EPS.format(arch="gptneox"), h["layer_norm_eps"])]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="gpt_neox",
    gguf_arch="gptneox",
    architectures=("GPTNeoXForCausalLM",),
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
