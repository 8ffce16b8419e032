"""StableLM (StableLmForCausalLM) -> llama.cpp `stablelm` (the converter's StableLMModel).

Tensors as stored (NeoX rope: no Q/K regrouping), LayerNorm weights and biases, optional q/k/v biases,
and StableLM 2's per-head q/k LayerNorms stacked into one [heads, head_dim] tensor per block.

The pinned converter cannot convert a checkpoint with qk_layernorm: its modify_tensors `return`s the
generator that would stack the per-head norms from inside a generator, so nothing is emitted, and then
prepare_tensors raises "Unprocessed norms". The view presents what that code means to write: the stacked
norms as blk.N.attn_q_norm / attn_k_norm at the point the last head's norm is read.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..family import Family, Refuse, Skip, Stacked, Tensor
from ..names import GGUF, Keys
from ..params import boolean, f32, first, u32
from ._parts.checks import silu_only

# transformers 5.24's StableLmConfig defaults
DEFAULTS = {
    "stablelm": dict(vocab_size=50304, intermediate_size=6912, hidden_size=2560, num_hidden_layers=32,
                     num_attention_heads=32, num_key_value_heads=32, hidden_act="silu", max_position_embeddings=4096,
                     initializer_range=0.02, layer_norm_eps=1e-05, use_cache=True, tie_word_embeddings=False,
                     use_qkv_bias=False, qk_layernorm=False, use_parallel_residual=False, hidden_dropout=0.0,
                     attention_dropout=0.0, bos_token_id=0, eos_token_id=0, pad_token_id=None,
                     rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "layer_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "partial_rotary_factor", "hidden_act", "tie_word_embeddings", "use_qkv_bias", "qk_layernorm",
    "use_parallel_residual",
})
HARMLESS: Harmless = {}

_qk_norm = lambda h: bool(h.get("qk_layernorm"))  # noqa: E731
_sequential = lambda h: not h.get("use_parallel_residual")  # noqa: E731

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.{wb}", GGUF.OUTPUT_NORM.wb),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.input_layernorm.{wb}", GGUF.ATTN_NORM.wb),
    Tensor("model.layers.{bid}.self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb),
    Tensor("model.layers.{bid}.self_attn.k_proj.{wb}", GGUF.ATTN_K.wb),
    Tensor("model.layers.{bid}.self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Stacked("model.layers.{bid}.self_attn.q_layernorm.norms.{x}.weight", GGUF.ATTN_Q_NORM.weight,
            "num_attention_heads", required=_qk_norm),
    Stacked("model.layers.{bid}.self_attn.k_layernorm.norms.{x}.weight", GGUF.ATTN_K_NORM.weight,
            "num_key_value_heads", required=_qk_norm),
    # parallel-residual blocks feed the MLP from the attention's input norm: no second norm
    Tensor("model.layers.{bid}.post_attention_layernorm.{wb}", GGUF.FFN_NORM.wb, required=_sequential),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


def normalise(h: dict) -> dict:
    # StableLmConfig: partial_rotary_factor (default 0.25) lives in rope_parameters
    h["rope_parameters"] = dict(h["rope_parameters"])
    h["rope_parameters"].setdefault("partial_rotary_factor", h.get("partial_rotary_factor", 0.25))
    return h


REFUSE = (
    silu_only("stablelm"),
    Refuse("rope_parameters.rope_type", ("default",), "the converter writes no rope scaling for StableLM, so "
           "llama.cpp would compute unscaled rope; this checkpoint would run wrong", default="default"),
)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    head_dim = h["hidden_size"] // h["num_attention_heads"]
    return [
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch="stablelm"), h["max_position_embeddings"]),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="stablelm"), h["hidden_size"]),
        u32(Keys.LLM.BLOCK_COUNT.format(arch="stablelm"), block_count),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="stablelm"), h["intermediate_size"]),
        u32(Keys.Rope.DIMENSION_COUNT.format(arch="stablelm"),
            int(h["rope_parameters"]["partial_rotary_factor"] * head_dim)),
        u32(Keys.Attention.HEAD_COUNT.format(arch="stablelm"), h["num_attention_heads"]),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch="stablelm"), h["num_key_value_heads"]),
        boolean(Keys.LLM.USE_PARALLEL_RESIDUAL.format(arch="stablelm"), h.get("use_parallel_residual", True)),
        f32(Keys.Attention.LAYERNORM_EPS.format(arch="stablelm"), first(h, ["layer_norm_eps", "norm_eps"])),
        u32(Keys.General.FILE_TYPE, file_type),
    ]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.errors import TokenizerError
    from hfview.tokenizer.vocab import gpt2_vocab
    if not (model_dir / "tokenizer.json").is_file():
        raise TokenizerError(f"{model_dir}: no tokenizer.json; the converter then reads StableLM 2's Qwen-style "
                             f"tiktoken vocabulary, which hfview does not present for StableLM: add the "
                             f"checkpoint's tokenizer.json")
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="stablelm",
    gguf_arch="stablelm",
    architectures=("StableLmForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    normalise=normalise,
    notes={"qk_layernorm": "the pinned converter fails on qk_layernorm checkpoints ('Unprocessed norms'); the "
                           "view stacks the per-head norms as the converter's code means to"},
)
