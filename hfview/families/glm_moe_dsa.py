"""GLM-5 (GLM-5, 5.1, 5.2 as BF16 releases: GlmMoeDsaForCausalLM) -> llama.cpp `glm-dsa` (the converter's
GlmMoeDsaModel, a DeepseekV2Model: hfview/families/deepseek_v2.py, deepseek_v32.py).

DeepSeek-V3.2's latent attention, sigmoid router and lightning indexer (hfview/families/deepseek_v32.py) under
GLM's vocabulary, with two differences: the indexer rotates interleaved pairs (llama.cpp's glm-dsa as
transformers'), and layers may share the top-k choice of the last layer that ran its own indexer
(indexer_types: "full" or "shared"; a shared layer stores no indexer). The converter writes indexer_types as a
bool array (full = true) beside the indexer's sizes, and the rope width again as qk_rope_head_dim times
partial_rotary_factor (in place: the key keeps its first position). The next-token-prediction layers stored after
num_hidden_layers are kept, as glm4_moe's: block_count counts them, llama.cpp runs the trunk. llama.cpp's glm-dsa
takes an unstated gating function for sigmoid, as transformers scores.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, unset
from ..gguf_layout import KV, ValueType
from ..names import Keys
from ..params import u32
from ._parts.deepseek_moe import check_groups, check_mixture, check_sigmoid_router, mixture_tensors
from ._parts.glm_common import glm_vocab
from ._parts.indexer import INDEXER_READS, check_indexer, indexer_parameters, indexer_tensors
from ._parts.latent import LATENT_HARMLESS, LATENT_READS, check_latent_attention, latent_parameters, latent_tensors
from ._parts.mixture import check_mlp_layer_types
from ._parts.nextn import NEXTN_TENSORS, mtp_layers
from .deepseek_v32 import normalise as v32_normalise

ARCH = "glm-dsa"

# transformers 5.24's GlmMoeDsaConfig defaults (mlp_layer_types, layer_types, indexer_types, head_dim and qk_head_dim
# are computed: normalise)
DEFAULTS = {
    "glm_moe_dsa": dict(vocab_size=154880, hidden_size=6144, intermediate_size=12288, moe_intermediate_size=2048,
                        num_hidden_layers=78, num_attention_heads=64, num_key_value_heads=64, n_shared_experts=1,
                        n_routed_experts=256, routed_scaling_factor=2.5, kv_lora_rank=512, q_lora_rank=2048,
                        qk_rope_head_dim=64, v_head_dim=256, qk_nope_head_dim=192, n_group=1, topk_group=1,
                        num_experts_per_tok=8, norm_topk_prob=True, hidden_act="silu",
                        max_position_embeddings=202752, initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True,
                        pad_token_id=None, bos_token_id=0, eos_token_id=1, tie_word_embeddings=False,
                        rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, mlp_layer_types=None,
                        attention_bias=False, attention_dropout=0.0, index_topk=2048, index_head_dim=128,
                        index_n_heads=32, mlp_bias=False, first_k_dense_replace=3, layer_types=None,
                        indexer_types=None),
}

# the config class's inputs to indexer_types where none is stated
INDEXER_SCHEDULE = ("index_topk_pattern", "index_topk_freq", "index_skip_topk_offset")
READS = (LATENT_READS | INDEXER_READS | set(INDEXER_SCHEDULE)
         | {"num_nextn_predict_layers", "mlp_layer_types", "layer_types", "mlp_bias", "indexer_types"})
HARMLESS: Harmless = {
    **LATENT_HARMLESS,
    # GlmMoeDsa's attention and indexer always rotate interleaved pairs, as llama.cpp's glm-dsa does
    "rope_interleave": (True,), "indexer_rope_interleave": (True,),
    # the router's precision in GLM's own serving code, and the MTP layer's reuse of the indexer while drafting
    # (llama.cpp runs the trunk only): neither changes a forward pass of the trunk
    "moe_router_dtype": ANY, "index_share_for_mtp_iteration": ANY,
}

TENSORS = (*latent_tensors(skip_mtp=False), *indexer_tensors(required=False), *mixture_tensors(), *NEXTN_TENSORS)


REFUSE = (
    Refuse("rope_parameters.partial_rotary_factor", (1.0,), f"transformers' GlmMoeDsa rotates all qk_rope_head_dim "
           f"dims, while the converter has llama.cpp's {ARCH} rotate that share of them only", default=1.0),
    Refuse("mlp_bias", unset, f"llama.cpp's {ARCH} architecture has no FFN biases"),
    Refuse("layer_types", lambda v: all(kind == "indexed_attention" for kind in v), f"transformers' GlmMoeDsa builds "
           f"every layer as indexed_attention, as llama.cpp's {ARCH} does"),
    Refuse("indexer_types", lambda v: not v or v[0] == "full", "the first must be full: a shared layer reuses the "
           "top-k of the last full layer before it, and the first layer has none"),
)


def check(h: dict, path: Path) -> None:
    check_latent_attention(h, path, "GlmMoeDsa", ARCH)
    check_mixture(h, path)
    check_sigmoid_router(h, path, "GlmMoeDsa", ARCH, scoring_func_needed=False)
    if (h.get("n_group") or 1) > 1:
        check_groups(h, path)
    check_mlp_layer_types(h, path, "GlmMoeDsa", ARCH)
    check_indexer(h, path, ARCH)
    kinds = h["indexer_types"]
    if len(kinds) != h["num_hidden_layers"] or any(k not in ("full", "shared") for k in kinds):
        raise ConfigError(f"{path}: indexer_types {kinds!r}: one of \"full\" or \"shared\" per layer "
                          f"({h['num_hidden_layers']} layers)")


def normalise(h: dict) -> dict:
    """GlmMoeDsaConfig.__post_init__: indexer_types, where unstated, from index_topk_pattern ("F"/"S" per layer)
    or else every index_topk_freq-th layer full from index_skip_topk_offset (default: all full); then
    DeepseekV32Config's."""
    if h.get("indexer_types") is None:
        pattern = h.get("index_topk_pattern")
        if pattern is not None:
            h["indexer_types"] = ([{"F": "full", "S": "shared"}.get(c, c) for c in pattern] if isinstance(pattern, str)
                                  else list(pattern))
        else:
            freq = max(h.get("index_topk_freq") or 1, 1)
            offset = h.get("index_skip_topk_offset")
            offset = 2 if offset is None else offset
            h["indexer_types"] = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared"
                                  for i in range(h["num_hidden_layers"])]
    return v32_normalise(h)


def stored_hparams(h: dict, stored: dict) -> dict:
    """Every full layer stores its indexer (llama.cpp's glm-dsa loads it as optional, and would run without)."""
    for bid, kind in enumerate(h["indexer_types"]):
        name = f"model.layers.{bid}.self_attn.indexer.wq_b.weight"
        if kind == "full" and name not in stored:
            raise CheckpointError(f"tensor {name!r} is missing: indexer_types makes layer {bid} run its own "
                                  f"indexer; a shard may be missing or incomplete")
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """GlmMoeDsaModel.set_gguf_parameters: DeepseekV2Model's (block_count with the MTP layers), the rope width
    again (times partial_rotary_factor), the MTP layer count where stated, the indexer's sizes and its layer
    kinds."""
    kv = latent_parameters(h, block_count, file_type, ARCH)
    factor = h["rope_parameters"].get("partial_rotary_factor", 1.0)
    kv.append(u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), int(h["qk_rope_head_dim"] * factor)))
    if h.get("num_nextn_predict_layers") is not None:
        kv.append(u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=ARCH), h["num_nextn_predict_layers"]))
    kv += indexer_parameters(h, ARCH)
    kv.append(KV(Keys.Attention.Indexer.TYPES.format(arch=ARCH), ValueType.ARRAY,
                 [k == "full" for k in h["indexer_types"]],
                 ValueType.BOOL))
    return kv


FAMILY = Family(
    name="glm_moe_dsa",
    gguf_arch=ARCH,
    architectures=("GlmMoeDsaForCausalLM",),
    defaults=DEFAULTS,
    reads=frozenset(READS),
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=glm_vocab,  # TextModel._set_vocab_glm, as Glm4MoeModel's
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    extra_blocks=mtp_layers,
    stored_hparams=stored_hparams,
    aliases={"num_local_experts": "n_routed_experts"},  # GlmMoeDsaConfig's attribute map
)
