"""The design's model types and the path each one takes today.

DESIGN_MODEL_TYPES is the design's architecture gate ("use a Hugging Face checkpoint whose model_type is one
of ..."), in its order. It is the target hfview is measured against, not the list of what
it reads: `path_for` says, for each, whether the view presents it to llama.cpp, transformers runs it (the torch
fallback), or nothing runs it yet and why. docs/families.md's coverage table is written from here.
"""
from __future__ import annotations

from dataclasses import dataclass

DESIGN_MODEL_TYPES: tuple[str, ...] = (
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi", "phi3", "granite",
    "granitemoe", "stablelm", "starcoder2", "cohere", "cohere2", "nemotron", "olmo", "olmo2", "olmo3", "olmoe",
    "exaone4", "internlm3", "seed_oss", "arcee", "ernie4_5", "minicpm", "orion", "glm", "glm4", "gpt_neox", "gptj",
    "smollm3", "gpt2", "gpt_bigcode", "opt", "bloom", "falcon", "mpt", "deepseek_v2", "deepseek_v3", "minicpm3",
    "mamba", "falcon_mamba", "glm4_moe", "internlm2", "exaone", "jamba", "hunyuan_v1_dense", "mamba2", "bamba",
    "gpt_oss", "lfm2", "ernie4_5_moe", "dbrx", "phimoe", "hunyuan_v1_moe", "telechat", "lfm2_moe",
    "granitemoehybrid", "nemotron_h", "jais2", "bailing_moe", "TeleFLM", "falcon_h1", "qwen3_next", "kimi_linear",
    "minimax_m2", "step3_text", "minimax_text_01", "minimax", "zamba2", "gemma", "gemma2", "gemma3_text",
    "gemma4_text", "gemma4_unified_text", "mimo", "mellum", "flex_olmo", "granite_swa", "granitemoe_swa",
    "granitemoeshared", "glm4_moe_lite", "iquestcoder", "hyperclovax", "vaultgemma", "apertus", "exaone_moe",
    "solar", "step1", "telechat3", "param2moe", "PanguEmbedded", "olmo_hybrid", "hy_v3", "nanbeige",
    "iquestloopcoder", "nemotron-nas", "deepseek_v32", "glm_moe_dsa", "axk1", "bailing_hybrid", "mimo_v2_flash",
    "mimo_v2", "step3p5", "k2_horizon", "pangu_ultra_moe", "longcat_flash", "sarvam_moe", "sarvam_mla",
    "cohere2_moe", "deepseek", "ministral3", "llama4_text", "qwen3_5_text", "qwen3_5_moe_text", "afmoe",
    "nemotron_h_puzzle", "chatglm", "laguna", "longcat_flash_ngram", "muse_glimmer_text", "plamo3",
    "gemma3n_text", "hrm_text", "inkling_text", "deepseek_v4", "glm5_next_text", "hy_v4", "minimax_m3_vl_text",
    "dots3_note",
)


@dataclass(frozen=True)
class Route:
    kind: str         # "view" (llama.cpp through the view), "torch" (transformers), or "none"
    detail: str       # the view family, the transformers class, or why nothing runs it


def _transformers_class(model_type: str) -> str | None:
    """transformers' text-generation class whose config is this model_type's, or None (transformers imported
    lazily). A wrapper type such as dots3_note maps to its image-text class, not its text decoder's."""
    try:
        import transformers
        from transformers.models.auto import modeling_auto
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except Exception:  # noqa: BLE001 - the torch extra is optional
        return None
    if model_type not in CONFIG_MAPPING:
        return None
    mapped = []
    for mapping in ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"):
        names = getattr(modeling_auto, mapping, {}).get(model_type) or ()
        mapped += [n for n in ([names] if isinstance(names, str) else names) if hasattr(transformers, n)]
    # the class built for this very config first; else the one transformers' auto mapping would use
    own = [n for n in mapped if getattr(getattr(transformers, n), "config_class", None) is CONFIG_MAPPING[model_type]]
    return (own or mapped or [None])[0]


def route_for(model_type: str) -> Route:
    """The path a model_type takes in this build: the view where a family presents it, else transformers where
    it has a class (the runner's torch fallback), else none, with the reason."""
    from .families import NOT_COMPUTABLE, NOT_PRESENTED, family_for

    family = family_for(model_type)
    if family is not None:
        if family.no_converter:  # no byte oracle: say whose mapping it is
            return Route("view", f"{family.name} (hfview's own mapping as llama.cpp {family.gguf_arch}; "
                                 f"{family.no_converter.split(';')[0]})")
        return Route("view", family.name)
    cls = _transformers_class(model_type)
    if cls is not None:
        why = NOT_PRESENTED.get(model_type, "no hfview family presents it to llama.cpp yet")
        return Route("torch", f"{cls}; {why}")
    if model_type in NOT_COMPUTABLE:
        return Route("none", f"refused: {NOT_COMPUTABLE[model_type]}; transformers has no class for it either "
                             f"(hfview never runs remote code)")
    return Route("none", "no hfview family presents it, and transformers has no text-generation class for it "
                         "(hfview never runs remote code)")

