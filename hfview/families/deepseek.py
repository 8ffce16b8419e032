"""DeepSeek-MoE (deepseek-moe-16b-base / -chat: DeepseekForCausalLM, remote code) -> llama.cpp `deepseek` (the
converter's DeepseekModel).

Llama's attention (Q/K regrouped into rotation pairs, plain rope, no biases) over DeepSeek's mixture: the first
`first_k_dense_replace` layers dense SwiGLU FFNs of intermediate_size, every later one a softmax router over
n_routed_experts (the chosen weights used as they are, not renormalised), the experts stacked (down, gate, up)
and n_shared_experts always-on experts fused into one SwiGLU of n_shared_experts x moe_intermediate_size rows.
Transformers has no class for it: the config is read as stated, as the converter reads config.json.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, Skip, Tensor, rope_pairs, stated, unset
from ..names import GGUF, Keys
from ..params import f32, string, text_model_parameters, u32
from ._parts.checks import silu_only
from ._parts.vocab import gpt2_or_sentencepiece_vocab

DEFAULTS = {"deepseek": {}}  # no transformers class: nothing is filled in

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_scaling", "rope_theta",
    "hidden_act", "tie_word_embeddings", "attention_bias",
    "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size",
    "first_k_dense_replace", "moe_layer_freq", "norm_topk_prob", "scoring_func",
})
# the remote code's training-only switches: the auxiliary balance loss and its sequence-level variant
HARMLESS: Harmless = {"aux_loss_alpha": ANY, "seq_aux": ANY}

_LAYER = "model.layers.{bid}."
_moe_only = False  # dense and mixture tensors each exist in some layers only: llama.cpp checks which

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # llama.cpp falls back to the embeddings
    Tensor(f"{_LAYER}input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(f"{_LAYER}self_attn.q_proj.weight", GGUF.ATTN_Q.weight, rope_pairs("num_attention_heads")),
    Tensor(f"{_LAYER}self_attn.k_proj.weight", GGUF.ATTN_K.weight, rope_pairs("_k_heads")),
    Tensor(f"{_LAYER}self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor(f"{_LAYER}self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(f"{_LAYER}post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    *(Tensor(f"{_LAYER}mlp.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}.weight", required=_moe_only)
      for proj in ("gate", "up", "down")),
    Tensor(f"{_LAYER}mlp.gate.weight", GGUF.FFN_GATE_INP.weight, required=_moe_only),
    *(Experts(f"{_LAYER}mlp.experts.{{x}}.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}_exps.weight",
              "n_routed_experts", required=_moe_only) for proj in ("down", "gate", "up")),
    *(Tensor(f"{_LAYER}mlp.shared_experts.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}_shexp.weight",
             required=_moe_only) for proj in ("gate", "up", "down")),
    Skip(f"{_LAYER}self_attn.rotary_emb.inv_freq"),
)

_NEEDED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
           "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size",
           "first_k_dense_replace", "rms_norm_eps")


REFUSE = (
    *(Refuse(key, stated, f"DeepSeek-MoE needs {key!r} (read as stated: transformers has no class "
             f"for DeepseekForCausalLM to fill it in); add it as the released config.json has it") for key in _NEEDED),
    silu_only("deepseek"),
    Refuse("moe_layer_freq", (1,), "the remote code then makes every layer i not a multiple of it dense; llama.cpp's "
           "deepseek architecture has a mixture in every layer after the first first_k_dense_replace", default=1),
    Refuse("norm_topk_prob", unset, "llama.cpp's deepseek architecture never renormalises the chosen experts' "
           "weights, so this checkpoint would run wrong"),
    Refuse("scoring_func", ("softmax",), "llama.cpp's deepseek architecture scores experts by softmax only",
           default="softmax"),
    Refuse("attention_bias", unset, "no DeepSeek-MoE release has q/k/v biases and the view does not present them "
           "for llama.cpp's deepseek architecture"),
    Refuse("n_shared_experts", bool, "llama.cpp's deepseek architecture needs shared-expert tensors in every "
           "mixture layer"),
)


def check(h: dict, path: Path) -> None:
    rope = h["rope_parameters"]
    if set(rope) - {"rope_type", "rope_theta"} or rope.get("rope_type", "default") != "default":
        raise ConfigError(f"{path}: rope_scaling {rope!r}: the converter writes rope scaling type none for "
                          f"DeepSeek-MoE whatever the config states, so a scaled rope would run unscaled")
    head_dim = h.get("head_dim")
    if head_dim is not None and head_dim * h["num_attention_heads"] != h["hidden_size"]:
        raise ConfigError(f"{path}: head_dim {head_dim} x {h['num_attention_heads']} heads is not hidden_size "
                          f"{h['hidden_size']}; llama.cpp's deepseek architecture rotates whole heads of "
                          f"hidden_size / heads")


def normalise(h: dict) -> dict:
    """The heads K's rotation pairs are grouped by: the KV heads where stated, else every head (the converter
    writes head_count_kv only where the config states it)."""
    h["_k_heads"] = h.get("num_key_value_heads") or h["num_attention_heads"]
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """DeepseekModel.set_gguf_parameters: TextModel's entries, then the rope width, rope scaling none, the
    leading dense layers, the vocabulary size and the expert counts and widths (expert weights scale 1)."""
    arch = "deepseek"
    return [*text_model_parameters(h, arch, block_count, file_type),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch=arch),
                h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]),
            string(Keys.Rope.SCALING_TYPE.format(arch=arch), "none"),
            u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=arch), h["first_k_dense_replace"]),
            u32(Keys.LLM.VOCAB_SIZE.format(arch=arch), h["vocab_size"]),
            u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=arch), h["moe_intermediate_size"]),
            f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=arch), 1.0),
            u32(Keys.LLM.EXPERT_COUNT.format(arch=arch), h["n_routed_experts"]),
            u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=arch), h["n_shared_experts"])]


FAMILY = Family(
    name="deepseek",
    gguf_arch="deepseek",
    architectures=("DeepseekForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_or_sentencepiece_vocab,  # DeepseekModel.set_vocab: tokenizer.model when there is one
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)
