"""Sarvam MLA (SarvamMLAForCausalLM, model_type sarvam_mla: sarvamai's 105B; remote code) -> llama.cpp `deepseek2`,
under hfview's own mapping: the pinned converter has no class for SarvamMLAForCausalLM.

transformers 5.24 runs sarvam_mla as DeepseekV3ForCausalLM under SarvamMLAConfig, a DeepseekV3Config that reads the
release's own spellings: num_experts / num_shared_experts for n_routed_experts / n_shared_experts (its attribute
map), q_head_dim and head_dim (the query/key head and vLLM's latent width, both recomputed), rope_scaling of type
"deepseek_yarn" (standard YaRN). So the function is DeepSeek-V3's (hfview/families/deepseek_v3.py): latent
attention, sigmoid router with a selection bias, here over one group (n_group 1: all experts ranked at once), the
leading dense layers first. The tensors are DeepSeek-V3's, under its table.

One difference from what the converter writes for DeepSeek-V3: Sarvam's queries have no bottleneck (q_lora_rank
null, q_proj stored) over 32 layers, and llama.cpp's deepseek2 reads queries without one only where
attention.q_lora_rank is absent at DeepSeek-V2-Lite's layer counts, or stated as 0 (then it loads q_proj at any
count); the converter writes the key only for a rank that is not null. The view states it as 0.

transformers scores every DeepseekV3 router by sigmoid and picks experts as noaux_tc does, whatever the config says;
llama.cpp scores by softmax unless told, so where a release leaves scoring_func out the view writes sigmoid, and a
stated other value is refused. Vocabulary: byte-level BPE from tokenizer.json, as the converter's DeepSeek-V3 class
reads one (a pre-tokenizer its digest table does not know is refused by name).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..family import Family, Refuse, RunnerFacts
from . import deepseek_v3
from ._parts.deepseek_moe import check_groups, check_mixture, check_sigmoid_router
from ._parts.latent import check_latent_attention, latent_normalise, latent_parameters
from ._parts.vocab import gpt2_vocab

ARCHITECTURES = ("SarvamMLAForCausalLM",)

# transformers 5.24's SarvamMLAConfig defaults: DeepseekV3Config's, with the 105B's shape and routing
DEFAULTS = {"sarvam_mla": dict(deepseek_v3.DEFAULTS["deepseek_v3"], vocab_size=262144, hidden_size=4096,
                               intermediate_size=16384, num_hidden_layers=32, num_attention_heads=64,
                               num_key_value_heads=64, n_routed_experts=128, q_lora_rank=None, n_group=1,
                               topk_group=1, first_k_dense_replace=1, initializer_range=0.006,
                               num_nextn_predict_layers=0)}

# SarvamMLAConfig.attribute_map: the release's names (and transformers' generic ones) for DeepSeek-V3's keys
ALIASES = {"num_experts": "n_routed_experts", "num_shared_experts": "n_shared_experts",
           "num_local_experts": "n_routed_experts", "num_mtp_layers": "num_nextn_predict_layers"}

READS = deepseek_v3.READS | set(ALIASES)
HARMLESS: Harmless = {
    **deepseek_v3.HARMLESS,
    # SarvamMLAConfig drops it: the query/key head it states is qk_nope_head_dim + qk_rope_head_dim, recomputed
    "q_head_dim": ANY,
}


def normalise(h: dict) -> dict:
    """SarvamMLAConfig.__post_init__ (deepseek_yarn is YaRN), then DeepseekV3Config's; the router as transformers'
    DeepseekV3 runs it."""
    if h["rope_parameters"].get("rope_type") == "deepseek_yarn":
        h["rope_parameters"] = {k: v for k, v in h["rope_parameters"].items() if k != "type"} | {"rope_type": "yarn"}
    h = latent_normalise(h)
    h.setdefault("scoring_func", "sigmoid")
    h.setdefault("topk_method", "noaux_tc")
    return h


def rank_stated(h: dict) -> dict:
    """No query bottleneck (q_lora_rank null) as llama.cpp's deepseek2 is told of it: rank 0."""
    return h if h.get("q_lora_rank") is not None else dict(h, q_lora_rank=0)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return latent_parameters(rank_stated(h), block_count, file_type)


REFUSE = (
    Refuse("rope_interleave", bool, "llama.cpp's deepseek2 rotates interleaved pairs, and the view presents q_pe / "
           "k_pe as stored without regrouping them", default=True),
)


def check(h: dict, path: Path) -> None:
    check_latent_attention(rank_stated(h), path, "Sarvam MLA")
    check_mixture(h, path)
    check_sigmoid_router(h, path, "DeepseekV3")
    check_groups(h, path)


FAMILY = Family(
    name="sarvam_mla",
    gguf_arch="deepseek2",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    aliases=ALIASES,
    tensors=deepseek_v3.TENSORS,  # DeepseekV2Model's table, as DeepSeek-V3 reads it
    parameters=parameters,
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    no_converter="the pinned converter has no class for SarvamMLAForCausalLM; hfview's own mapping presents it as "
                 "llama.cpp's deepseek2 (DeepseekV3ForCausalLM's function, as transformers runs sarvam_mla; no query "
                 "bottleneck, stated as q_lora_rank 0)",
    runner=RunnerFacts(applies_ffn_scales=False),  # llama.cpp's deepseek2 graph passes its FFNs no scale
)
