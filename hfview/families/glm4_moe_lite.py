"""GLM-4.7-Flash (Glm4MoeLiteForCausalLM) -> llama.cpp `deepseek2` (the converter's Glm4MoeLiteModel, a
DeepseekV2Model: hfview/families/deepseek_v2.py and deepseek_v3.py).

DeepSeek-V3's latent attention and sigmoid router with its selection bias, under GLM's vocabulary (the
converter's GLM vocab: bos [gMASK], eot <|user|>, unk <|endoftext|>, eom <|observation|>). Unlike DeepSeek-V3 the
converter keeps the next-token-prediction layers stored after num_hidden_layers (as hfview/families/glm4_moe.py
does): block_count counts them and nextn_predict_layers is written; llama.cpp runs the trunk only.

transformers' Glm4MoeLite makes layers dense or mixtures by mlp_layer_types (default: the first dense) and never
reads first_k_dense_replace, which the converter writes as leading_dense_block_count (0 where absent): the two
must agree, else the config is refused by name. Its router always scores by sigmoid; the converter writes the
gating function only from a stated scoring_func, and llama.cpp's deepseek2 otherwise scores by softmax except at
GLM-4.7-Flash's own shape (47 or 48 layers over a 154880-token vocabulary), so a config without it is refused
elsewhere.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip
from ..names import Keys
from ..params import u32
from ._parts.deepseek_moe import check_mixture, mixture_tensors
from ._parts.glm_common import glm_vocab
from ._parts.latent import (ARCH, LATENT_HARMLESS, LATENT_READS, check_latent_attention, latent_normalise,
                            latent_parameters, latent_tensors)
from ._parts.mixture import check_mlp_layer_types
from ._parts.nextn import NEXTN_TENSORS, mtp_layers

# transformers 5.24's Glm4MoeLiteConfig defaults (mlp_layer_types, head_dim and qk_head_dim are computed:
# normalise); num_nextn_predict_layers it does not define (the converter reads it, 0 where absent)
DEFAULTS = {
    "glm4_moe_lite": dict(vocab_size=154880, hidden_size=2048, intermediate_size=10240, moe_intermediate_size=1536,
                          num_hidden_layers=47, num_attention_heads=20, num_key_value_heads=20, n_shared_experts=1,
                          n_routed_experts=64, routed_scaling_factor=1.8, kv_lora_rank=512, q_lora_rank=768,
                          qk_rope_head_dim=64, v_head_dim=256, qk_nope_head_dim=192, n_group=1, topk_group=1,
                          num_experts_per_tok=4, norm_topk_prob=True, hidden_act="silu",
                          max_position_embeddings=202752, initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True,
                          pad_token_id=None, bos_token_id=0, eos_token_id=1, pretraining_tp=1,
                          tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                          rope_interleave=True, mlp_layer_types=None, attention_bias=False, attention_dropout=0.0),
}

READS = LATENT_READS | {"rope_interleave", "num_nextn_predict_layers", "mlp_layer_types", "partial_rotary_factor"}
HARMLESS: Harmless = dict(LATENT_HARMLESS)

# DeepseekV2Model's rules without its skip of the layers after num_hidden_layers (Glm4MoeLiteModel keeps them)
TENSORS = (*(r for r in latent_tensors() if not (isinstance(r, Skip) and r.from_block is not None)),
           *mixture_tensors(), *NEXTN_TENSORS)


def _flash_shape(h: dict) -> bool:
    """Where llama.cpp's deepseek2 takes an unstated gating function for sigmoid (GLM-4.7-Flash's shape)."""
    return h["num_hidden_layers"] in (47, 48) and h["vocab_size"] == 154880


REFUSE = (
    Refuse("scoring_func", (None, "sigmoid"), "transformers' Glm4MoeLite scores experts by sigmoid only, so the "
           "converter's gating by it would run otherwise"),
    Refuse("topk_method", ("noaux_tc",), f"transformers' Glm4MoeLite and llama.cpp's {ARCH} choose experts by "
           f"noaux_tc only", default="noaux_tc"),
    Refuse("rope_interleave", bool, f"llama.cpp's {ARCH} rotates interleaved pairs, and the converter writes q_pe / "
           f"k_pe as stored without regrouping them", default=True),
    Refuse("rope_parameters.partial_rotary_factor", (1.0,), f"transformers' Glm4MoeLite then rotates that share of "
           f"qk_rope_head_dim only, while the converter has llama.cpp's {ARCH} rotate all qk_rope_head_dim dims "
           f"(GLM-4.7-Flash states 1.0)", default=1.0),
)


def check(h: dict, path: Path) -> None:
    check_latent_attention(h, path, "GLM-4.7-Flash")
    check_mixture(h, path)
    if h.get("scoring_func") is None and not _flash_shape(h):
        raise ConfigError(f"{path}: no scoring_func: transformers' Glm4MoeLite scores experts by sigmoid, but "
                          f"without the key the converter writes no gating function and llama.cpp's deepseek2 "
                          f"scores by softmax at {h['num_hidden_layers']} layers; state scoring_func \"sigmoid\" "
                          f"as GLM-4.7-Flash does")
    n_group, topk_group, n_expert = h.get("n_group") or 1, h.get("topk_group") or 1, h["n_routed_experts"]
    if n_expert % n_group or topk_group > n_group or (n_group > 1 and n_expert // n_group < 2):
        raise ConfigError(f"{path}: n_group {n_group!r}, topk_group {topk_group!r} over {n_expert} experts: the "
                          f"router keeps topk_group of n_group equal groups of at least two experts")
    check_mlp_layer_types(h, path, "Glm4MoeLite", ARCH)


def normalise(h: dict) -> dict:
    """Glm4MoeLiteConfig.__post_init__: mlp_layer_types, where unstated, the first layer dense and the rest
    mixtures; qk_head_dim as DeepseekV2Config's (head_dim is qk_rope_head_dim's alias: Family.aliases); a top-level partial_rotary_factor (GLM-4.7-Flash
    states 1.0) read into rope_parameters unless that states its own."""
    h = latent_normalise(h)
    del h["head_dim"]  # an alias of qk_rope_head_dim here (the attribute map), not a key the converter sees
    if (top := h.pop("partial_rotary_factor", None)) is not None:  # the config class moves it into rope_parameters
        h["rope_parameters"] = {"partial_rotary_factor": top, **h["rope_parameters"]}
    if h.get("mlp_layer_types") is None:
        h["mlp_layer_types"] = ["dense"] + ["sparse"] * (h["num_hidden_layers"] - 1)
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """DeepseekV2Model.set_gguf_parameters (block_count with the MTP layers), then the MTP layer count where
    there are any."""
    kv = latent_parameters(h, block_count, file_type)
    if mtp_layers(h):
        kv.append(u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=ARCH), mtp_layers(h)))
    return kv


FAMILY = Family(
    name="glm4_moe_lite",
    gguf_arch=ARCH,
    architectures=("Glm4MoeLiteForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=glm_vocab,  # TextModel._set_vocab_glm, as Glm4MoeModel's
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    extra_blocks=mtp_layers,
    aliases={"head_dim": "qk_rope_head_dim"},  # Glm4MoeLiteConfig's attribute map
    runner=RunnerFacts(applies_ffn_scales=False),  # llama.cpp's deepseek2 graph passes its FFNs no scale
)
