"""StarCoder2 (Starcoder2ForCausalLM) -> llama.cpp `starcoder2` (the converter's StarCoder2Model, a plain
TextModel): tensors as stored (NeoX rope), LayerNorm with bias, a GELU MLP (c_fc -> c_proj) with biases,
TextModel's hyperparameters and GPT-2-style BPE vocabulary."""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF
from ..params import text_model_parameters

# transformers 5.24's Starcoder2Config defaults
DEFAULTS = {
    "starcoder2": dict(vocab_size=49152, hidden_size=3072, intermediate_size=12288, num_hidden_layers=30,
                       num_attention_heads=24, num_key_value_heads=2, hidden_act="gelu_pytorch_tanh",
                       max_position_embeddings=4096, initializer_range=0.018042, norm_epsilon=1e-05, use_cache=True,
                       bos_token_id=50256, eos_token_id=50256, pad_token_id=None, sliding_window=None,
                       attention_dropout=0.0, residual_dropout=0.0, embedding_dropout=0.0, use_bias=True,
                       tie_word_embeddings=True, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "norm_epsilon", "rope_parameters", "rope_scaling",
    "rope_theta", "hidden_act", "tie_word_embeddings", "use_bias", "sliding_window",
    "layer_norm_epsilon",  # the converter writes it before norm_epsilon: checked to agree
})
HARMLESS: Harmless = {
    "residual_dropout": ANY, "embedding_dropout": ANY,
    # StarCoder2's first release kept its Megatron conversion's keys beside the config class's own, which
    # transformers' Starcoder2 does not read (it computes with hidden_act, LayerNorm, a c_fc/c_proj MLP and
    # 1/sqrt(head_dim) scaling): a precision hint is harmless at any value, the layout keys at the value
    # that states what the class computes.
    "activation_function": ANY,  # the legacy twin of hidden_act, the key transformers computes with
    "attention_softmax_in_fp32": ANY, "scale_attention_softmax_in_fp32": ANY,
    "mlp_type": ("default",), "norm_type": ("layer_norm",), "scale_attn_weights": (True,),
}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.{wb}", GGUF.OUTPUT_NORM.wb),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.input_layernorm.{wb}", GGUF.ATTN_NORM.wb),
    Tensor("model.layers.{bid}.self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb),
    Tensor("model.layers.{bid}.self_attn.k_proj.{wb}", GGUF.ATTN_K.wb),
    Tensor("model.layers.{bid}.self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor("model.layers.{bid}.self_attn.o_proj.{wb}", GGUF.ATTN_OUT.wb),
    Tensor("model.layers.{bid}.post_attention_layernorm.{wb}", GGUF.FFN_NORM.wb),
    Tensor("model.layers.{bid}.mlp.c_fc.{wb}", GGUF.FFN_UP.wb),
    Tensor("model.layers.{bid}.mlp.c_proj.{wb}", GGUF.FFN_DOWN.wb),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


REFUSE = (
    Refuse("use_bias", bool, "llama.cpp's starcoder2 architecture requires the attention and MLP biases (it refuses "
           "to load without blk.N.attn_output.bias); this checkpoint cannot run", default=True),
    # ggml's GELU is the tanh approximation
    Refuse("hidden_act", ("gelu_pytorch_tanh",), "llama.cpp's starcoder2 architecture computes GELU with the tanh "
           "approximation (gelu_pytorch_tanh) only; this checkpoint would run wrong"),
    Refuse("rope_parameters.rope_type", ("default", "linear", "yarn"), "not one llama.cpp computes here (default, "
           "linear, yarn)", default="default"),
)


def check(h: dict, path: Path) -> None:
    if "layer_norm_epsilon" in h and h["layer_norm_epsilon"] != h["norm_epsilon"]:
        raise ConfigError(f"{path}: layer_norm_epsilon {h['layer_norm_epsilon']} differs from norm_epsilon "
                          f"{h['norm_epsilon']}: the converter writes the first, transformers computes with the "
                          f"second; this checkpoint would run with another epsilon than its model's")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return text_model_parameters(h, "starcoder2", block_count, file_type)


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="starcoder2",
    gguf_arch="starcoder2",
    architectures=("Starcoder2ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    notes={"sliding_window": "the converter writes no sliding window for StarCoder2 and llama.cpp's starcoder2 "
                             "attends to the whole context: prompts longer than sliding_window differ"},
)
