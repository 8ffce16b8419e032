"""DeepSeek-V3 (DeepSeek-V3, V3-0324, V3.1, R1 and R1-0528 as BF16 exports: DeepseekV3ForCausalLM) -> llama.cpp
`deepseek2` (the converter's DeepseekV2Model, as DeepSeek-V2: hfview/families/deepseek_v2.py).

DeepSeek-V2's latent attention over DeepSeek-V3's router: sigmoid scores, a per-expert selection bias
(`mlp.gate.e_score_correction_bias`, added for choosing only: llama.cpp's exp_probs_b) and group limits
(n_group groups ranked by the sum of their two best biased scores, the best topk_group kept), the chosen
weights taken unbiased, renormalised where norm_topk_prob says, times routed_scaling_factor. The scoring
function is KV the converter writes from scoring_func as the release states it: transformers' DeepseekV3 always
scores by sigmoid, but without the key the converter writes no gating function and llama.cpp falls back to
softmax, so a config without it is refused by name. The next-token-prediction layers stored after
num_hidden_layers are skipped, as the converter skips them. FP8 releases (quant_method fp8, e4m3 over [128, 128]
blocks) are read dequantized as the converter reads them (hfview.views.FP8Dequantized; tests/test_fp8.py).

Kimi-K2 (Kimi-K2-Base / -Instruct / -Instruct-0905 / -Thinking as BF16 exports) states "model_type": "kimi_k2" with
DeepseekV3ForCausalLM and an auto_map to its own configuration_deepseek.py. transformers 5.24 has no kimi_k2 config
class and the converter loads configs without remote code, so its AutoConfig raises and it reads config.json as it
stands: no defaults fill a kimi_k2 config, and the keys the view reads must be stated (every release states them).
Its vocabulary is Kimi's tiktoken.model, read as the converter's kimi-k2 branch writes it
(hfview/families/kimi_tiktoken.py).

Kimi-K2.5 (KimiK25ForConditionalGeneration, model_type kimi_k25) is read as its text decoder, as the converter reads
it: a Kimi-K2 under text_config (DeepseekV3ForCausalLM, merged over the top level), its weights under
language_model. (the converter's rename), the vision tower and projector left out, and the int4 pack-quantized
routed experts, whose quantization_config sits inside text_config, read dequantized (tests/test_family_kimi_k25.py).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..family import Family, Refuse, RunnerFacts, Skip
from ._parts.checks import check_stated
from ._parts.deepseek_moe import check_groups, check_mixture, check_sigmoid_router
from ._parts.latent import LATENT_HARMLESS, LATENT_READS, check_latent_attention, latent_normalise, latent_parameters
from ._parts.vocab import gpt2_vocab
from .deepseek_v2 import TENSORS

# transformers 5.24's DeepseekV3Config defaults (head_dim and qk_head_dim are computed: normalise)
DEFAULTS = {
    "deepseek_v3": dict(vocab_size=129280, hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
                        num_hidden_layers=61, num_attention_heads=128, num_key_value_heads=128, n_shared_experts=1,
                        n_routed_experts=256, routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=1536,
                        qk_rope_head_dim=64, v_head_dim=128, qk_nope_head_dim=128, n_group=8, topk_group=4,
                        num_experts_per_tok=8, first_k_dense_replace=3, norm_topk_prob=True, hidden_act="silu",
                        max_position_embeddings=4096, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                        pad_token_id=None, bos_token_id=0, eos_token_id=1, pretraining_tp=1,
                        tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                        rope_interleave=True, attention_bias=False, attention_dropout=0.0,
                        num_nextn_predict_layers=1),
    # no config class: the converter reads a kimi_k2 config.json as it stands (check requires KIMI_K2_STATED)
    "kimi_k2": {},
}

READS = LATENT_READS | {"rope_interleave", "num_nextn_predict_layers"}
# Kimi-K2.5's image-text wrapper (KimiK25ForConditionalGeneration around a kimi_k2 text_config): the media and video
# placeholders and the vision chunking switch (the vision tower's and processor's business) and the loss's ignore
# index, which a text-only forward never touches
HARMLESS: Harmless = {**LATENT_HARMLESS, "media_placeholder_token_id": ANY, "video_placeholder": ANY,
                      "use_unified_vision_chunk": ANY, "ignore_index": ANY}


# what the view and the converter read from a kimi_k2 config.json that transformers' DeepseekV3Config would
# otherwise fill with its own defaults
KIMI_K2_STATED = ("vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
                  "num_attention_heads", "n_routed_experts", "n_shared_experts", "routed_scaling_factor",
                  "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim", "n_group",
                  "topk_group", "num_experts_per_tok", "first_k_dense_replace", "norm_topk_prob",
                  "max_position_embeddings", "rms_norm_eps")


REFUSE = (
    Refuse("rope_interleave", bool, "llama.cpp's deepseek2 rotates interleaved pairs, and the converter writes "
           "q_pe / k_pe as stored without regrouping them", default=True),
)


def check(h: dict, path: Path) -> None:
    if h.get("model_type") == "kimi_k2":  # a stated null (q_lora_rank) is a value DeepseekV3Config reads
        check_stated(h, path, KIMI_K2_STATED, "transformers has no kimi_k2 config class, so the converter reads "
                     "config.json as it stands while transformers (read as deepseek_v3) would fill DeepseekV3Config's "
                     "defaults; state them, as every Kimi-K2 release does", null_is_missing=False)
    check_latent_attention(h, path, "DeepSeek-V3")
    check_mixture(h, path)
    check_sigmoid_router(h, path, "DeepseekV3")
    check_groups(h, path)


def normalise_v3(h: dict) -> dict:
    """DeepseekV3Config's computed head_dim / qk_head_dim (normalise); a kimi_k2 config, read as it stands, has
    them only where it states them (the converter's TextModel writes key/value lengths early from a head_dim)."""
    stated = "head_dim" in h
    h = latent_normalise(h)
    if h.get("model_type") == "kimi_k2" and not stated:
        del h["head_dim"]
    return h


def vocab(model_dir: Path, h: dict) -> list:
    """DeepseekV2Model.set_vocab: byte-level BPE from tokenizer.json; where a release ships Kimi's tiktoken.model
    alone, its kimi-k2 branch (the converter's first try fails there)."""
    from ._parts.kimi_tiktoken import is_kimi_tiktoken, kimi_vocab
    if is_kimi_tiktoken(Path(model_dir)):
        return kimi_vocab(model_dir, h)
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="deepseek_v3",
    gguf_arch="deepseek2",
    architectures=("DeepseekV3ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    # Kimi-K2.5's vision tower and projector, left out as the converter's text conversion leaves them out
    tensors=(*TENSORS, Skip("vision_tower.{rest}"), Skip("mm_projector.{rest}")),
    parameters=latent_parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise_v3,
    runner=RunnerFacts(applies_ffn_scales=False),  # llama.cpp's deepseek2 graph passes its FFNs no scale
)
