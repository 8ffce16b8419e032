"""DeepSeek-V2 (DeepSeek-V2-Lite, V2-Lite-Chat: DeepseekV2ForCausalLM) -> llama.cpp `deepseek2` (the converter's
DeepseekV2Model, which also serves DeepseekV3ForCausalLM: hfview/families/deepseek_v3.py).

Multi-head latent attention: queries from q_proj, or through a low-rank bottleneck (q_a_proj, its RMS norm,
q_b_proj) where q_lora_rank is set; keys and values from one compressed vector (kv_a_proj_with_mqa: kv_lora_rank
latent rows plus one shared rope key of qk_rope_head_dim, the latent RMS-normed) expanded per head by kv_b_proj.
The converter writes kv_b_proj as two tensors for llama.cpp's absorbed attention: each head's key rows
transposed (attn_k_b, [heads, kv_lora_rank, qk_nope_head_dim]) and its value rows (attn_v_b): views over the
stored rows (views.BlocksTransposed, views.RowSelection). Rope pairs are stored interleaved, as llama.cpp's
rope computes them: no permutation. Over it DeepSeek's mixture: first_k_dense_replace dense layers, then a
router over n_routed_experts, their stacked SwiGLU experts and n_shared_experts fused shared experts.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..family import Family, Refuse, RunnerFacts, unset
from ._parts.deepseek_moe import check_mixture, mixture_tensors
from ._parts.latent import (ARCH, LATENT_HARMLESS, LATENT_READS, check_latent_attention, latent_normalise,
                            latent_parameters, latent_tensors)
from ._parts.vocab import gpt2_vocab

# transformers 5.24's DeepseekV2Config defaults (head_dim and qk_head_dim are computed: normalise)
DEFAULTS = {
    "deepseek_v2": dict(vocab_size=102400, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=32, hidden_act="silu",
                        max_position_embeddings=2048, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                        pad_token_id=None, bos_token_id=1, eos_token_id=2, pretraining_tp=1,
                        tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                        attention_bias=False, attention_dropout=0.0, mlp_bias=False, first_k_dense_replace=0,
                        kv_lora_rank=512, q_lora_rank=1536, n_group=None, n_routed_experts=64, n_shared_experts=2,
                        qk_nope_head_dim=128, qk_rope_head_dim=64, routed_scaling_factor=1.0, topk_group=None,
                        topk_method="greedy", norm_topk_prob=False, v_head_dim=128, num_experts_per_tok=None,
                        moe_intermediate_size=1407),
}

READS = LATENT_READS | {"mlp_bias"}
HARMLESS: Harmless = dict(LATENT_HARMLESS)


_L = "model.layers.{bid}."


TENSORS = (*latent_tensors(), *mixture_tensors())


# transformers' DeepseekV2 router: softmax over all experts, top-k, never renormalised
REFUSE = (
    Refuse("mlp_bias", unset, "llama.cpp's deepseek2 architecture has no FFN biases"),
    Refuse("scoring_func", ("softmax",), "transformers' DeepseekV2 scores experts by softmax only "
           "(DeepseekV3ForCausalLM is the sigmoid router)", default="softmax"),
    Refuse("norm_topk_prob", unset, "transformers' DeepseekV2 never renormalises the chosen experts' weights, while "
           "the converter then has llama.cpp renormalise them"),
    Refuse("n_group", lambda v: not (v or 1) > 1, "the converter writes the group counts, and llama.cpp's deepseek2 "
           "then ranks groups by the sum of their two best scores (DeepSeek-V3's rule), while DeepSeek-V2's "
           "group_limited_greedy ranks them by their best score alone: expert choices would differ"),
    Refuse("topk_method", ("greedy", "group_limited_greedy"), "transformers' DeepseekV2 knows greedy and "
           "group_limited_greedy only", default="greedy"),
)


def check(h: dict, path: Path) -> None:
    check_latent_attention(h, path, "DeepSeek-V2")
    check_mixture(h, path)


FAMILY = Family(
    name="deepseek_v2",
    gguf_arch=ARCH,
    architectures=("DeepseekV2ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=latent_parameters,
    vocab=gpt2_vocab,  # DeepseekV2Model.set_vocab: byte-level BPE
    refuse=REFUSE,
    check=check,
    normalise=latent_normalise,
    runner=RunnerFacts(applies_ffn_scales=False),  # llama.cpp's deepseek2 graph passes its FFNs no scale
)
