"""The family registry: the one place hfview enumerates the model families it reads.

Every module in this package that defines `FAMILY` (a hfview.family.Family) is a family; they are
found by listing the package, so adding a family is adding one file. The architecture gate, the
family table (docs/families.md) and `hfview inspect` all read this registry; hfview/families/_parts/ holds
what families share.
"""
from __future__ import annotations

import importlib
import pkgutil

from ..family import Family


def _discover() -> tuple[Family, ...]:
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):  # _parts: what families share, no family of its own
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if isinstance(getattr(module, "FAMILY", None), Family):
            found.append(module.FAMILY)
    return tuple(found)


FAMILIES: tuple[Family, ...] = _discover()

_BY_MODEL_TYPE: dict[str, Family] = {}
# A model_type several families share (bailing_moe: Ling 1.x's BailingMoeForCausalLM, Ling 2.0's
# BailingMoeV2ForCausalLM), each reading other `architectures`: the config's architectures[0] picks the family, as
# the converter picks its class by it. _BY_MODEL_TYPE keeps, for lookups without one, the family named after the
# model type where one is (llama's, not BitNet's, which reads 1bitLLM's llama-typed BitnetForCausalLM), else the
# first found (alphabetical).
_BY_ARCHITECTURE: dict[tuple[str, str], Family] = {}
for _family in FAMILIES:
    for _model_type in _family.model_types:
        if _model_type in _BY_MODEL_TYPE:
            other = _BY_MODEL_TYPE[_model_type]
            shared = [a for a in _family.architectures
                      if (_model_type, a) in _BY_ARCHITECTURE or a in other.architectures]
            if shared or not _family.architectures or not other.architectures:
                raise ImportError(f"model_type {_model_type!r} is claimed by families {other.name!r} and "
                                  f"{_family.name!r}" + (f", both reading {shared[0]}" if shared else ""))
            if _family.name == _model_type:
                _BY_MODEL_TYPE[_model_type] = _family
        else:
            _BY_MODEL_TYPE[_model_type] = _family
        for _arch in _family.architectures:
            _BY_ARCHITECTURE[(_model_type, _arch)] = _family


# Families transformers runs that the view cannot present, and why: the runner takes them to the torch fallback,
# and `inspect` / `export` / `parity` refuse them with the reason.
NOT_PRESENTED: dict[str, str] = {
    "opt": "llama.cpp has no OPT architecture and its converter no class for OPTForCausalLM",
    "gptj": "the pinned converter has no class for GPTJForCausalLM (llama.cpp's gptj architecture has no "
            "converter to write it)",
    "flex_olmo": "llama.cpp has no FlexOlmo architecture and its pinned converter no class for FlexOlmoForCausalLM",
    # read from transformers 5.24's own modeling code: what each computes that no llama.cpp architecture does
    "axk1": "A.X-K1's MoE layers pass the MoE block's output through an RMSNorm (post_mlp_layernorm) before the "
            "residual; llama.cpp's latent-attention MoE graphs (deepseek2, deepseek32, glm-dsa) have no norm there, and "
            "the pinned converter has no class for AXK1ForCausalLM",
    "zamba2": "Zamba2 runs shared attention blocks at several depths between its Mamba2 layers (one set of weights, "
              "each use with its own LoRA adapters, fed the hidden state concatenated with the original embeddings); "
              "llama.cpp has no Zamba architecture and its pinned converter no class for Zamba2ForCausalLM",
    "olmo_hybrid": "OLMo-Hybrid mixes OLMo 3's attention layers (RMSNorms after attention and after the MLP) with Gated "
                   "DeltaNet layers in Llama's pre-norm block; llama.cpp's Gated DeltaNet graphs (qwen3next, qwen35, "
                   "kimi-linear) pair them only with pre-norm attention of their own, and it has no OLMo-Hybrid "
                   "architecture (nor its pinned converter a class for OlmoHybridForCausalLM)",
    "longcat_flash": "LongCat-Flash's layers each hold two latent attentions and two dense MLPs, with a shortcut-connected "
                     "MoE whose zero-computation experts return their input; llama.cpp has no LongCat architecture and "
                     "its pinned converter no class for LongcatFlashForCausalLM",
    "inkling_text": "Inkling's attention adds a position bias computed from the hidden state (InklingRelativeLogits: each "
                    "token mixes a trained bank of bias-by-distance profiles) and its layers add short convolutions; "
                    "llama.cpp has no such attention bias nor an Inkling architecture, and its pinned converter no class "
                    "for it",
}


# Model types of the design that transformers has no class for and that no llama.cpp architecture computes (so
# neither route runs them), with what llama.cpp lacks: the gate, `inspect`, `export` and docs/families.md
# name the reason.
NOT_COMPUTABLE: dict[str, str] = {
    "step1": "Step1ForCausalLM's attention bias is ALiBi over the square root of the distance (-slope * sqrt(i - j); "
             "its modeling code's build_alibi_cache, vLLM's use_alibi_sqrt), and llama.cpp's ALiBi is linear in the "
             "distance (-slope * |i - j|), so no llama.cpp architecture computes it",
    "solar": "Solar Pro (SolarForCausalLM, upstage/solar-pro-preview-instruct, remote code only) adds block skip "
             "connections (bskcn_1..4) that no llama.cpp architecture computes, and the pinned converter has no class "
             "for it; Upstage's Solar Open is model_type solar_open, which the view presents (family solar_open)",
    "muse_glimmer_assistant": "MuseGlimmerAssistantModel is a DFlash drafter, not a stand-alone model: it has no token "
                              "embedding or output head of its own and reads the hidden states of its target "
                              "(MuseGlimmerForConditionalGeneration) at target_layer_ids; the converter writes it "
                              "(llama.cpp dflash) only with --target-model-dir for the target's vocabulary, and llama.cpp "
                              "runs it only beside that target in speculative decoding. Use the target checkpoint "
                              "(model_type muse_glimmer, presented as muse_glimmer_text)",
}
# MiMo-V2.5 / V2.5-Pro: the pinned converter registers MiMoV2ForCausalLM twice (conversion/mimo.py): as a
# text class, MimoV2Model (mimo2, the class of MiMoV2Flash), and as an mmproj class for its towers (--mmproj only)
NOT_COMPUTABLE["mimo_v2"] = (
    "MiMoV2ForCausalLM (MiMo-V2.5, with vision and audio towers) has no transformers 5.24 class, so its function "
    "cannot be checked against transformers; the pinned converter writes it with MimoV2Model (MiMoV2Flash's class) "
    "from the plain config.json, hence the stated sliding_window (128, as sliding_window_size) where transformers' "
    "MiMoV2FlashForCausalLM over the same weights attends sliding_window_size + 1 (129) keys, so the converter's "
    "file and that equivalent class compute different functions; its released weights are FP8 (quantization_config "
    "quant_method fp8) with a fused qkv_proj sharded by tensor-parallel rank "
    "(attention_projection_layout fused_qkv), which the converter regroups into q, k, v only while dequantizing FP8")

# Remote-code families with no transformers class, each read from its public ports (vLLM, SGLang, mlx-lm):
# what their forward computes that no llama.cpp architecture of the pinned build does
NOT_COMPUTABLE["iquestloopcoder"] = (
    "IQuestLoopCoderForCausalLM (IQuest-Coder-V1-Loop) runs its stored layers loop_num times, and from the second "
    "loop on each attention blends, per head by a sigmoid gate of the query (gate_projections), attention over the "
    "first loop's keys and values of that layer with sliding-window attention (loop_window_size) over the current "
    "loop's; no llama.cpp architecture attends to another pass's KV cache or mixes two attentions by a learned gate, "
    "and the pinned converter has no class for it")
NOT_COMPUTABLE["k2_horizon"] = (
    "K2HorizonForCausalLM (K2-Horizon) normalises with RMSNorms over layernorm_num_groups groups of channels, each "
    "group by its own root mean square (4 in the released config), and its MoVA variants route value projections "
    "through value experts (mova_num_experts) beside a softplus attention gate; no llama.cpp architecture computes a "
    "grouped block norm or value experts, and the pinned converter has no class for it")
NOT_COMPUTABLE["step3_text"] = (
    "Step3's text model (Step3TextForCausalLM, the decoder of Step3VForConditionalGeneration) projects queries "
    "through a shared low-rank bottleneck with an RMSNorm (q_proj to share_q_dim, inter_norm, then wq per head) "
    "beside plain key and value projections shared by every head (num_attention_groups 1); llama.cpp's only query "
    "bottleneck (deepseek2's) comes with latent keys and values, so no llama.cpp architecture computes it, and the "
    "pinned converter has no class for it (its StepVL class writes Step3-VL-10B, a Qwen3)")
NOT_COMPUTABLE["longcat_flash_ngram"] = (
    "LongcatFlashNgramForCausalLM (LongCat-Flash-Lite) adds to each token's embedding n-gram embeddings of its "
    "preceding tokens (ngram_vocab_size_ratio, emb_neighbor_num, emb_split_num), and its layers are LongCat-Flash's: "
    "two latent attentions and two dense MLPs per layer with a shortcut-connected MoE whose zero experts return their "
    "input; llama.cpp has no LongCat architecture, and the pinned converter has no class for it")

NOT_COMPUTABLE["pangu_ultra_moe"] = (
    "PanguUltraMoEForCausalLM (openPangu-Ultra-MoE-718B, remote code: configuration_openpangu_moe.py) is DeepSeek-V3's "
    "latent attention and sigmoid-routed experts under its own keys (attention_kv_lora_dim, attention_q_lora_dim, "
    "num_routed_experts, num_dense_layers) with Pangu's depth-scaled sandwich norm: an RMSNorm on the attention's "
    "output and one on the MLP's output before each residual (post_attention_layernorm, post_mlp_layernorm beside "
    "pre_mlp_layernorm, as vLLM-Ascend's openpangu port computes with sandwich_norm); llama.cpp's latent-attention "
    "graphs (deepseek2, deepseek32, glm-dsa) have no norm there and its sandwich-norm graphs (afmoe, gemma2/3) no "
    "latent attention, and the pinned converter has no class for it")


def supported_model_types() -> list[str]:
    """Every HF `model_type` the view reads, sorted. A family of its own format (Mistral's params.json) is
    reached through its config file, not a model_type, and is not listed."""
    return sorted(t for t, f in _BY_MODEL_TYPE.items() if f.config_file == "config.json")


def family_for(model_type: str | None, architectures: list | None = None) -> Family | None:
    """The family reading `model_type`; where several share it, the one reading architectures[0] (else the first)."""
    if architectures and isinstance(architectures, list) and isinstance(architectures[0], str):
        found = _BY_ARCHITECTURE.get((model_type or "", architectures[0]))
        if found is not None:
            return found
    return _BY_MODEL_TYPE.get(model_type or "")


def gguf_arch_for(model_type: str) -> str | None:
    """The llama.cpp architecture a model_type is presented as, or None when the view lacks it."""
    f = _BY_MODEL_TYPE.get(model_type)
    return f.gguf_arch if f else None
