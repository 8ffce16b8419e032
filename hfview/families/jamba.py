"""Jamba (JambaForCausalLM: Jamba-v0.1, Jamba 1.5 / 1.6 / 1.7 Mini and Large) -> llama.cpp `jamba` (the
converter's JambaModel).

A hybrid: layer i runs attention where i % attn_layer_period == attn_layer_offset (grouped-query, no positions:
nothing permuted) and a Mamba-1 mixer elsewhere (Mamba's in_proj, conv1d, x_proj, dt_proj, A, D, out_proj, plus
RMSNorms over dt, B and C); its feed-forward is a mixture where i % expert_layer_period == expert_layer_offset
(router softmax, top-k weights as they are) and one SwiGLU elsewhere. Which layer runs which mixer is written as
the KV head count per layer (0 on Mamba layers); A = -exp(A_log), conv1d squeezed.
"""
from __future__ import annotations

import math
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, Tensor
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import f32, u32
from ..views import NEG_EXP
from ._parts.state_space import squeezed

# transformers 5.24's JambaConfig defaults (mamba_dt_rank "auto" is computed: see normalise)
DEFAULTS = {
    "jamba": dict(vocab_size=65536, tie_word_embeddings=False, hidden_size=4096, intermediate_size=14336,
                  num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, hidden_act="silu",
                  initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, output_router_logits=False,
                  router_aux_loss_coef=0.001, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                  max_position_embeddings=262144, attention_dropout=0.0, num_experts_per_tok=2, num_experts=16,
                  expert_layer_period=2, expert_layer_offset=1, attn_layer_period=8, attn_layer_offset=4,
                  use_mamba_kernels=True, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank="auto",
                  mamba_conv_bias=True, mamba_proj_bias=False, use_mambapy=False, use_associative_scan=True),
}

READS = frozenset({
    "vocab_size", "tie_word_embeddings", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "hidden_act", "rms_norm_eps", "max_position_embeddings",
    "num_experts_per_tok", "num_experts", "expert_layer_period", "expert_layer_offset", "attn_layer_period",
    "attn_layer_offset", "mamba_d_state", "mamba_d_conv", "mamba_expand", "mamba_dt_rank", "mamba_conv_bias",
    "mamba_proj_bias",
})
# which kernel computes the same scan (CUDA kernels, mamba.py, an associative scan under torch.compile)
HARMLESS: Harmless = {"use_mamba_kernels": ANY, "use_mambapy": ANY, "use_associative_scan": ANY}

_L = "model.layers.{bid}."
_OPTIONAL = dict(required=False)  # present on the layers of one kind only (check() places the kinds)
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.final_layernorm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "pre_ff_layernorm.weight", GGUF.FFN_NORM.weight),
    # attention layers
    *(Tensor(_L + f"self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{g}.weight", **_OPTIONAL)
      for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))),
    # Mamba layers
    Tensor(_L + "mamba.in_proj.weight", GGUF.SSM_IN.weight, **_OPTIONAL),
    Tensor(_L + "mamba.conv1d.weight", GGUF.SSM_CONV1D.weight, squeezed, **_OPTIONAL),
    Tensor(_L + "mamba.conv1d.bias", GGUF.SSM_CONV1D.bias, **_OPTIONAL),
    Tensor(_L + "mamba.x_proj.weight", GGUF.SSM_X.weight, **_OPTIONAL),
    Tensor(_L + "mamba.dt_proj.{wb}", GGUF.SSM_DT.wb, **_OPTIONAL),
    Tensor(_L + "mamba.dt_layernorm.weight", GGUF.SSM_DT_NORM.weight, **_OPTIONAL),
    Tensor(_L + "mamba.b_layernorm.weight", GGUF.SSM_B_NORM.weight, **_OPTIONAL),
    Tensor(_L + "mamba.c_layernorm.weight", GGUF.SSM_C_NORM.weight, **_OPTIONAL),
    Tensor(_L + "mamba.A_log", GGUF.SSM_A, steps=(NEG_EXP,), **_OPTIONAL),
    Tensor(_L + "mamba.D", GGUF.SSM_D, **_OPTIONAL),
    Tensor(_L + "mamba.out_proj.weight", GGUF.SSM_OUT.weight, **_OPTIONAL),
    # mixture layers: the router, the experts stacked in the converter's merge order (down, gate, up)
    Tensor(_L + "feed_forward.router.weight", GGUF.FFN_GATE_INP.weight, **_OPTIONAL),
    *(Experts(_L + f"feed_forward.experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "num_experts",
              **_OPTIONAL) for p in ("down", "gate", "up")),
    # dense layers
    *(Tensor(_L + f"feed_forward.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", **_OPTIONAL)
      for p in ("gate", "up", "down")),
)


def normalise(h: dict) -> dict:
    """JambaConfig's constructor: KV heads default to the heads, a dt rank of "auto" is ceil(hidden / 16)."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h["mamba_dt_rank"] == "auto":
        h["mamba_dt_rank"] = math.ceil(h["hidden_size"] / 16)
    return h


def attention_layers(h: dict) -> list[bool]:
    """Which layers run attention (the others Mamba), as JambaConfig.layers_block_type places them."""
    return [i % h["attn_layer_period"] == h["attn_layer_offset"] for i in range(h["num_hidden_layers"])]


REFUSE = (
    Refuse("mamba_expand", (2,), "llama.cpp's jamba runs Mamba blocks of expansion 2 only (it asserts inner size = "
           "2 x hidden)"),
)


def check(h: dict, path: Path) -> None:
    for kind in ("attn", "expert"):
        period, offset = h[f"{kind}_layer_period"], h[f"{kind}_layer_offset"]
        if not 0 <= offset < period:
            raise ConfigError(f"{path}: {kind}_layer_offset {offset} with {kind}_layer_period {period}: transformers "
                              f"needs an offset below the period")
    wrong = [f"{k} {h[k]!r}" for k, ok in (("mamba_proj_bias", False), ("mamba_conv_bias", True), ("hidden_act", "silu"))
             if h[k] != ok]
    if wrong:
        raise ConfigError(f"{path}: {', '.join(wrong)}: llama.cpp's jamba has no in/out projection biases, needs the "
                          f"conv1d bias and computes SiLU; this checkpoint would run wrong")
    attn = attention_layers(h)
    if all(attn) or not any(attn):
        raise ConfigError(f"{path}: attn_layer_period {h['attn_layer_period']}, attn_layer_offset "
                          f"{h['attn_layer_offset']} over {h['num_hidden_layers']} layers: every layer "
                          f"{'attention' if all(attn) else 'Mamba'}; llama.cpp's jamba keeps a hybrid cache, "
                          f"which no released Jamba leaves without one kind of layer")
    if h["num_experts"] < 2 or h["num_experts_per_tok"] > h["num_experts"]:
        raise ConfigError(f"{path}: num_experts {h['num_experts']} with num_experts_per_tok {h['num_experts_per_tok']}: "
                          f"a Jamba mixture needs at least two experts and no more chosen than there are")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    kv_heads = [h["num_key_value_heads"] if attn else 0 for attn in attention_layers(h)]
    return [u32(Keys.LLM.BLOCK_COUNT.format(arch="jamba"), block_count),
            u32(Keys.LLM.CONTEXT_LENGTH.format(arch="jamba"), h["max_position_embeddings"]),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="jamba"), h["hidden_size"]),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="jamba"), h["intermediate_size"]),
            u32(Keys.Attention.HEAD_COUNT.format(arch="jamba"), h["num_attention_heads"]),
            KV(Keys.Attention.HEAD_COUNT_KV.format(arch="jamba"), ValueType.ARRAY, kv_heads, ValueType.INT32),
            u32(Keys.SSM.CONV_KERNEL.format(arch="jamba"), h["mamba_d_conv"]),
            u32(Keys.SSM.INNER_SIZE.format(arch="jamba"), h["mamba_expand"] * h["hidden_size"]),
            u32(Keys.SSM.STATE_SIZE.format(arch="jamba"), h["mamba_d_state"]),
            u32(Keys.SSM.TIME_STEP_RANK.format(arch="jamba"), h["mamba_dt_rank"]),
            f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="jamba"), h["rms_norm_eps"]),
            u32(Keys.LLM.EXPERT_COUNT.format(arch="jamba"), h["num_experts"]),
            u32(Keys.LLM.EXPERT_USED_COUNT.format(arch="jamba"), h["num_experts_per_tok"]),
            u32(Keys.General.FILE_TYPE, file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    """tokenizer.model's SentencePiece, else tokenizer.json's SentencePiece-style BPE without a space prefix, as
    JambaModel.set_vocab picks."""
    from hfview.tokenizer.vocab import ADD_SPACE_PREFIX, llama_hf_vocab, sentencepiece_vocab
    if (model_dir / "tokenizer.model").is_file():
        return sentencepiece_vocab(model_dir, h)
    return [*llama_hf_vocab(model_dir, h), KV(ADD_SPACE_PREFIX, ValueType.BOOL, False)]


FAMILY = Family(
    name="jamba",
    gguf_arch="jamba",
    architectures=("JambaForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    aliases={"num_local_experts": "num_experts"},
)
