"""Qwen3.5-MoE text (Qwen3_5MoeForCausalLM: the text decoders of Qwen3.5-35B-A3B, 122B-A10B, 397B-A17B) -> llama.cpp
`qwen35moe` (the converter's Qwen3_5MoeTextModel).

Qwen3.5's hybrid (qwen3_5_text.py: Gated DeltaNet layers with the value heads regrouped to tiled order, gated full
attention every full_attention_interval-th layer, (1 + w) RMSNorms, interleaved M-RoPE) with Qwen2-MoE's mixture and
its sigmoid-gated shared expert in every layer in place of the dense SwiGLU. The router's chosen weights are always
renormalised, in transformers and in llama.cpp (the config has no norm_topk_prob). The MTP layer (mtp.*) is
presented as Qwen3.5's (qwen3_5_text.py), with its mixture.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..family import Family
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.gated_delta import check_hybrid, hybrid_normalise
from ._parts.mixture import SHARED_EXPERT, mixture_tensors
from ._parts.nextn import extra_mtp_blocks, mtp_rename, stored_mtp_layers
from ._parts.vocab import gpt2_vocab
from .qwen3_5_text import HARMLESS as TEXT_HARMLESS
from .qwen3_5_text import TENSORS as TEXT_TENSORS
from .qwen3_5_text import mrope_parameters

# transformers 5.24's Qwen3_5MoeTextConfig defaults (layer_types is computed from full_attention_interval)
DEFAULTS = {
    "qwen3_5_moe_text": dict(vocab_size=248320, hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
                             num_key_value_heads=2, hidden_act="silu", max_position_embeddings=32768,
                             initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, tie_word_embeddings=False,
                             rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                                              "rope_type": "default"},
                             attention_bias=False, attention_dropout=0.0, head_dim=256, linear_conv_kernel_dim=4,
                             linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
                             linear_num_value_heads=32, moe_intermediate_size=512, shared_expert_intermediate_size=512,
                             num_experts_per_tok=8, num_experts=256, output_router_logits=False,
                             router_aux_loss_coef=0.001, layer_types=None, pad_token_id=None, bos_token_id=None,
                             eos_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling", "rope_theta",
    "partial_rotary_factor", "hidden_act", "tie_word_embeddings", "attention_bias", "linear_conv_kernel_dim",
    "linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads", "layer_types",
    "full_attention_interval", "num_experts", "num_experts_per_tok", "moe_intermediate_size",
    "shared_expert_intermediate_size", "mtp_num_hidden_layers",  # MTP: as qwen3_5_text's
})
# norm_topk_prob: always renormalised, as said above; mlp_only_layers: Qwen3.5-35B-A3B states it empty, which
# Qwen3_5MoeTextConfig does not define (every layer is a mixture)
HARMLESS: Harmless = {**TEXT_HARMLESS, "norm_topk_prob": (True,), "mlp_only_layers": ([],)}

# the image-text wrapper Qwen3.5-MoE is released as, read as its text model (see qwen3_5_text.py)
ARCHITECTURES = ("Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration")

TENSORS = (
    *(r for r in TEXT_TENSORS if ".mlp." not in r.hf),
    *mixture_tensors("num_experts"),
    *SHARED_EXPERT,
)


REFUSE = (silu_only("qwen35moe"), rope_types("qwen35moe", ("default",)))


def check(h: dict, path: Path) -> None:
    from ..errors import ConfigError
    check_no_pooling(path)
    check_hybrid(h, path, "qwen35moe")
    if h["num_experts"] < 1 or h["num_experts_per_tok"] > h["num_experts"]:
        raise ConfigError(f"{path}: num_experts {h['num_experts']} with num_experts_per_tok "
                          f"{h['num_experts_per_tok']}: llama.cpp's qwen35moe needs experts, no more chosen than "
                          f"there are")


FAMILY = Family(
    name="qwen3_5_moe_text",
    gguf_arch="qwen35moe",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=mrope_parameters("qwen35moe"),
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=hybrid_normalise,
    extra_blocks=extra_mtp_blocks,
    stored_hparams=stored_mtp_layers,
    rename=mtp_rename,
)
