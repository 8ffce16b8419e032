"""Cohere (Command-R, Command-R+) -> llama.cpp `command-r` (the converter's CommandR2Model).

- the context length written is model_max_length when the config has it (Command-R's config says 8192
  positions but the model was trained on 128k; the converter prefers model_max_length);
- logit_scale is written; rope scaling is written as "none" (llama.cpp's command-r has none);
- no Q/K permutation: Cohere's rotary embedding already rotates interleaved pairs, as llama.cpp's does;
- norms are weight-only LayerNorms; the per-head q/k norms ([heads, head_dim] matrices) llama.cpp expects
  exactly at 64 layers or more (Command-R+), so other combinations are refused;
- the output reads through the embeddings (the converter has no output tensor for command-r).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor, unset
from ..names import GGUF, Keys
from ..params import f32, string, text_model_parameters

# transformers 5.24's CohereConfig defaults, as data (tests/test_family_cohere.py compares them).
DEFAULTS = {
    "cohere": dict(vocab_size=256000, hidden_size=8192, intermediate_size=22528, logit_scale=0.0625,
                   num_hidden_layers=40, num_attention_heads=64, num_key_value_heads=64, hidden_act="silu",
                   max_position_embeddings=8192, initializer_range=0.02, layer_norm_eps=1e-05, use_cache=True,
                   pad_token_id=0, bos_token_id=5, eos_token_id=255001, tie_word_embeddings=True,
                   rope_parameters={"rope_theta": 500000.0, "rope_type": "default"}, attention_bias=False,
                   attention_dropout=0.0, use_qk_norm=False),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "model_max_length", "layer_norm_eps", "logit_scale",
    "hidden_act", "tie_word_embeddings", "attention_bias", "use_qk_norm", "rope_parameters", "rope_scaling",
    "rope_theta",
})
HARMLESS: Harmless = {}

_qk_norm = lambda h: bool(h.get("use_qk_norm"))  # noqa: E731

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight, required=_qk_norm),
    Tensor("model.layers.{bid}.self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight, required=_qk_norm),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
)


def normalise(h: dict) -> dict:
    # CommandR2Model's constructor: the trained context (model_max_length) wins over max_position_embeddings
    if h.get("model_max_length") is not None:
        h["max_position_embeddings"] = h["model_max_length"]
    return h


def cohere_refusals(arch: str) -> tuple[Refuse, ...]:
    """What a Cohere config can state that llama.cpp's graph does not compute."""
    return (
        Refuse("hidden_act", ("silu",), f"llama.cpp's {arch} computes SiLU only", default="silu"),
        Refuse("attention_bias", unset, f"llama.cpp's {arch} has no attention biases"),
        Refuse("tie_word_embeddings", bool, f"llama.cpp's {arch} reads the output through the embeddings, and the "
               f"converter has no output tensor for it", default=True),
        Refuse("rope_parameters.rope_type", ("default",), f"the converter writes rope scaling 'none' for {arch}; "
               f"this checkpoint would run wrong", default="default"),
    )


REFUSE = cohere_refusals("command-r")


def check(h: dict, path: Path) -> None:
    # llama.cpp's command-r loads q/k norms by depth (Command-R+ has 64 layers), not by use_qk_norm
    if bool(h.get("use_qk_norm")) != (h["num_hidden_layers"] >= 64):
        raise ConfigError(f"{path}: use_qk_norm {bool(h.get('use_qk_norm'))} with {h['num_hidden_layers']} layers: "
                          f"llama.cpp's command-r expects q/k norms exactly when there are 64 layers or more "
                          f"(as in Command-R+), so it could not load this checkpoint")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [*text_model_parameters(h, "command-r", block_count, file_type),
            f32(Keys.LLM.LOGIT_SCALE.format(arch="command-r"), h["logit_scale"]),
            string(Keys.Rope.SCALING_TYPE.format(arch="command-r"), "none")]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="cohere",
    gguf_arch="command-r",
    architectures=("CohereForCausalLM",),
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
