"""Qwen3-Next (Qwen3NextForCausalLM: Qwen3-Next-80B-A3B Instruct / Thinking) -> llama.cpp `qwen3next` (the
converter's Qwen3NextModel, derived from its Qwen2MoeModel).

A hybrid: the layers layer_types calls "linear_attention" run Gated DeltaNet (one fused in_proj_qkvz stored key head
by key head, [q, k, v, z] each, which the converter splits into attn_qkv, all q then all k then all v, and
attn_gate, the z rows; in_proj_ba as stored; a causal depthwise conv1d, squeezed; A = -exp(A_log); dt_bias as the
ssm_dt bias; a gated RMSNorm over each value head; out_proj), the others gated full attention (q_proj carries the
query and its output gate, per-head Q/K RMSNorms, rope over partial_rotary_factor of each head, NeoX order: nothing
permuted). Every layer ends in Qwen2-MoE's mixture with a sigmoid-gated shared expert. Qwen3-Next's RMSNorms scale
by (1 + w): each is stored as the offset, and the converter writes 1 + w (all but the gated DeltaNet norm).

The released checkpoints carry a multi-token-prediction layer (mtp.*), which transformers ignores; the converter
writes it unless --no-mtp (and without --no-mtp stops on a checkpoint that has none). The view presents it as the
converter writes it: mtp.layers.{i}.* as block num_hidden_layers + i (a full-attention layer with its mixture, under
the trunk's rules: blk.{n}.*), mtp.fc / pre_fc_norm_embedding / pre_fc_norm_hidden / norm as that block's
nextn.eh_proj / enorm / hnorm / shared_head_norm ((1 + w) norms, as the trunk's), block_count counting the MTP
blocks, nextn_predict_layers, and recurrent_layers false for them; llama.cpp runs the trunk alone, as transformers
does. A checkpoint without mtp.* tensors (as transformers saves one) is presented as --no-mtp converts it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Split, Tensor
from ..names import GGUF
from ..views import NEG_EXP, OFFSET_ONE, RowSelection
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.gated_delta import check_hybrid, hybrid_normalise, hybrid_parameters, on
from ._parts.mixture import SHARED_EXPERT, check_every_layer_a_mixture, check_topk_norm, mixture_tensors
from ._parts.nextn import MTP_TENSORS, extra_mtp_blocks, mtp_rename, stored_mtp_layers
from ._parts.state_space import squeezed
from ._parts.vocab import gpt2_vocab
from .qwen2_moe import LM_HEAD

# transformers 5.24's Qwen3NextConfig defaults (layer_types is computed from full_attention_interval: see normalise)
DEFAULTS = {
    "qwen3_next": dict(vocab_size=151936, hidden_size=2048, intermediate_size=5632, num_hidden_layers=48,
                       num_attention_heads=16, num_key_value_heads=2, hidden_act="silu", max_position_embeddings=32768,
                       initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, tie_word_embeddings=False,
                       rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.25, "rope_type": "default"},
                       attention_bias=False, attention_dropout=0.0, head_dim=256, linear_conv_kernel_dim=4,
                       linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
                       linear_num_value_heads=32, decoder_sparse_step=1, moe_intermediate_size=512,
                       shared_expert_intermediate_size=512, num_experts_per_tok=10, num_experts=512,
                       norm_topk_prob=True, output_router_logits=False, router_aux_loss_coef=0.001,
                       mlp_only_layers=[], layer_types=None, pad_token_id=None, bos_token_id=None, eos_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "partial_rotary_factor", "hidden_act", "tie_word_embeddings", "attention_bias",
    "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
    "linear_num_value_heads", "layer_types", "full_attention_interval",
    "num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
    "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers",  # checked: every layer a mixture
    "mtp_num_hidden_layers",  # the MTP block count where stated (Qwen3-Next's releases state none: the tensors say)
})
# Qwen3-Next-80B-A3B's config states it false; Qwen3NextConfig does not define it and no layer slides
HARMLESS: Harmless = {"use_sliding_window": (False,)}

_L = "model.layers.{bid}."
_OPTIONAL = dict(required=False)  # on the layers of one kind only (check() places the kinds)


def qkvz_rows(h: dict, part: str) -> np.ndarray:
    """Rows of in_proj_qkvz ([key head][q, k, v, z] stored) as the converter splits them: for "qkv" every key head's
    q rows, then every head's k rows, then v rows; for "z" every head's z rows."""
    hk, nk = h["linear_key_head_dim"], h["linear_num_key_heads"]
    hv = h["linear_num_value_heads"] // nk * h["linear_value_head_dim"]
    heads = np.arange(nk * (2 * hk + 2 * hv)).reshape(nk, 2 * hk + 2 * hv)
    q, k, v, z = heads[:, :hk], heads[:, hk:2 * hk], heads[:, 2 * hk:2 * hk + hv], heads[:, 2 * hk + hv:]
    return np.concatenate([q.reshape(-1), k.reshape(-1), v.reshape(-1)]) if part == "qkv" else z.reshape(-1)


def _qkvz_part(part: str):
    def make(sources, h):
        src = sources[0]
        rows = qkvz_rows(h, part)
        total = h["linear_num_key_heads"] * (2 * h["linear_key_head_dim"]) + 2 * h["linear_num_value_heads"] * \
            h["linear_value_head_dim"]
        if src.shape[0] != total:
            raise ConfigError(f"tensor {src.name!r} has {src.shape[0]} rows; the config's linear-attention heads "
                              f"need {total}")
        return RowSelection(src, rows, f"the {part} rows of each key head's [q, k, v, z]")
    return make


_LIN = on("linear_attention")


TENSORS = (
    *MTP_TENSORS,
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=(OFFSET_ONE,)),
    LM_HEAD,
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight, steps=(OFFSET_ONE,)),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight, steps=(OFFSET_ONE,)),
    # full-attention layers (q_proj: the query and its output gate, per head)
    *(Tensor(_L + f"self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{g}.weight", on("full_attention"), **_OPTIONAL)
      for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output"))),
    *(Tensor(_L + f"self_attn.{p}_norm.weight", f"blk.{{bid}}.attn_{p}_norm.weight", on("full_attention"),
             steps=(OFFSET_ONE,), **_OPTIONAL) for p in ("q", "k")),
    # Gated DeltaNet layers
    Tensor(_L + "linear_attn.A_log", GGUF.SSM_A, _LIN, steps=(NEG_EXP,), **_OPTIONAL),
    Tensor(_L + "linear_attn.conv1d.weight", GGUF.SSM_CONV1D.weight, on("linear_attention", squeezed),
           **_OPTIONAL),
    Tensor(_L + "linear_attn.dt_bias", GGUF.SSM_DT.bias, _LIN, **_OPTIONAL),
    Tensor(_L + "linear_attn.in_proj_ba.weight", GGUF.SSM_BETA_ALPHA.weight, _LIN, **_OPTIONAL),
    Split(_L + "linear_attn.in_proj_qkvz.weight",
          ((GGUF.ATTN_QKV.weight, on("linear_attention", _qkvz_part("qkv"))),
           (GGUF.ATTN_GATE.weight, on("linear_attention", _qkvz_part("z")))), **_OPTIONAL),
    Tensor(_L + "linear_attn.norm.weight", GGUF.SSM_NORM.weight, _LIN, **_OPTIONAL),  # gated: no offset
    Tensor(_L + "linear_attn.out_proj.weight", GGUF.SSM_OUT.weight, _LIN, **_OPTIONAL),
    *mixture_tensors("num_experts"),
    *SHARED_EXPERT,
)


REFUSE = (silu_only("qwen3next"), rope_types("qwen3next"))


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    check_every_layer_a_mixture(h, path, "qwen3next", "num_experts")
    check_topk_norm(h, path, "qwen3next", True)
    check_hybrid(h, path, "qwen3next")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return hybrid_parameters(h, "qwen3next", block_count, file_type)


FAMILY = Family(
    name="qwen3_next",
    gguf_arch="qwen3next",
    architectures=("Qwen3NextForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=hybrid_normalise,
    extra_blocks=extra_mtp_blocks,
    stored_hparams=stored_mtp_layers,
    rename=mtp_rename,
)
