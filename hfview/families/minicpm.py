"""MiniCPM (MiniCPMForCausalLM, remote code) -> llama.cpp `minicpm` (the converter's MiniCPMModel).

transformers has no MiniCPM config class, so the converter reads config.json as it is (no defaults).
Llama's tensors (Q/K regrouped into rotation pairs) and TextModel's hyperparameters, plus MiniCPM's three
scales: embedding_scale = scale_emb, residual_scale = scale_depth / sqrt(layers), logit_scale =
hidden_size / dim_model_base. Vocabulary: SentencePiece.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor, rope_pairs, stated
from ..names import GGUF, Keys
from ..params import f32, text_model_parameters
from ._parts.checks import silu_only

DEFAULTS = {"minicpm": {}}  # no transformers class: nothing is filled in

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_scaling", "rope_theta",
    "hidden_act", "tie_word_embeddings", "scale_emb", "scale_depth", "dim_model_base",
})
HARMLESS: Harmless = {}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight, rope_pairs("num_attention_heads")),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight, rope_pairs("num_key_value_heads")),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)

_NEEDED = ("num_attention_heads", "num_key_value_heads", "hidden_size", "num_hidden_layers", "vocab_size",
           "scale_emb", "scale_depth", "dim_model_base")


REFUSE = (
    *(Refuse(key, stated, f"MiniCPM needs {key!r} (read as stated: transformers has no MiniCPM "
             f"class to fill it in); add it as the released config.json has it") for key in _NEEDED),
    silu_only("minicpm"),
)


def check(h: dict, path: Path) -> None:
    rope = h["rope_parameters"]
    if rope.get("rope_type", "default") != "default" or rope.get("long_factor") or rope.get("short_factor"):
        raise ConfigError(f"{path}: rope_scaling {rope!r}: hfview presents MiniCPM with plain rope only "
                          f"(MiniCPM 4's longrope factors are not presented yet)")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [*text_model_parameters(h, "minicpm", block_count, file_type),
            f32(Keys.LLM.EMBEDDING_SCALE.format(arch="minicpm"), float(h["scale_emb"])),
            f32(Keys.LLM.RESIDUAL_SCALE.format(arch="minicpm"), h["scale_depth"] / h["num_hidden_layers"] ** 0.5),
            f32(Keys.LLM.LOGIT_SCALE.format(arch="minicpm"), h["hidden_size"] / h["dim_model_base"])]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.errors import TokenizerError
    from hfview.tokenizer.vocab import sentencepiece_vocab
    if not (model_dir / "tokenizer.model").is_file():
        raise TokenizerError(f"{model_dir / 'tokenizer.model'} is missing: the converter reads MiniCPM's vocabulary "
                             f"from the SentencePiece model only; copy it from the released checkpoint")
    return sentencepiece_vocab(model_dir, h)


FAMILY = Family(
    name="minicpm",
    gguf_arch="minicpm",
    architectures=("MiniCPMForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
)
