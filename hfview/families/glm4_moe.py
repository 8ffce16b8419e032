"""GLM-4.5, GLM-4.6, GLM-4.5-Air (Glm4MoeForCausalLM) -> llama.cpp `glm4moe` (the converter's Glm4MoeModel).

GLM's attention (q/k/v biases where attention_bias says, per-head q/k RMS norms where use_qk_norm says, rope
over the first partial_rotary_factor of each head in the rotate-half layout, which llama.cpp's glm4moe rotates
as neox: Q/K are presented as stored) over DeepSeek-V3's mixture (hfview/families/deepseek_v2.py's tensor
rules): first_k_dense_replace dense layers, then a sigmoid router with a per-expert selection bias
(exp_probs_b), stacked experts and fused shared experts. The converter always writes the sigmoid gating
function; n_group / topk_group it writes as stated, but llama.cpp's glm4moe never limits groups, so a config
with more than one group is refused by name (every release states 1).

The next-token-prediction (MTP) layers every release stores after num_hidden_layers (model.layers.46 of
GLM-4.5-Air) are written, as the converter writes them without --no-mtp: block_count counts them, the layer's
decoder tensors under blk.{n}.*, its own under blk.{n}.nextn.* (eh_proj, enorm, hnorm, embed_tokens,
shared_head.head, shared_head.norm), and nextn_predict_layers in the KV. llama.cpp loads them and runs only the
num_hidden_layers trunk layers, as transformers' forward does.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ._parts.checks import rope_types, silu_only
from ._parts.deepseek_moe import mixture_tensors
from ._parts.glm_common import glm_vocab
from ._parts.nextn import NEXTN_TENSORS, mtp_layers
from .glm4 import normalise as glm4_normalise
from .glm4 import rope_dimension_count

ARCH = "glm4moe"

_L = "model.layers.{bid}."
_OPTIONAL = False  # biases and q/k norms as the config says, nextn tensors in the MTP layers only

# transformers 5.24's Glm4MoeConfig defaults (its num_mtp_layers is read as num_nextn_predict_layers)
DEFAULTS = {
    "glm4_moe": dict(vocab_size=151552, hidden_size=4096, intermediate_size=10944, num_hidden_layers=46,
                     num_attention_heads=96, num_key_value_heads=8, hidden_act="silu", max_position_embeddings=131072,
                     initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True, tie_word_embeddings=False,
                     rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.5, "rope_type": "default"},
                     attention_bias=False, attention_dropout=0.0, moe_intermediate_size=1408,
                     num_experts_per_tok=8, n_shared_experts=1, n_routed_experts=128, routed_scaling_factor=1.0,
                     n_group=1, topk_group=1, first_k_dense_replace=1, norm_topk_prob=True, use_qk_norm=False,
                     bos_token_id=None, eos_token_id=None, pad_token_id=None, num_nextn_predict_layers=1),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "partial_rotary_factor", "hidden_act", "attention_bias", "tie_word_embeddings",
    "use_qk_norm", "moe_intermediate_size", "num_experts_per_tok", "n_shared_experts", "n_routed_experts",
    "routed_scaling_factor", "n_group", "topk_group", "first_k_dense_replace", "norm_topk_prob",
    "num_nextn_predict_layers",
})
HARMLESS: Harmless = {}



TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor(f"{_L}input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(f"{_L}self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor(f"{_L}self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor(f"{_L}self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    *(Tensor(f"{_L}self_attn.{p}_proj.bias", f"blk.{{bid}}.attn_{p}.bias", required=_OPTIONAL) for p in "qkv"),
    Tensor(f"{_L}self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight, required=_OPTIONAL),
    Tensor(f"{_L}self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight, required=_OPTIONAL),
    Tensor(f"{_L}self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(f"{_L}post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight),
    *mixture_tensors(),
    *NEXTN_TENSORS,
    Skip(f"{_L}self_attn.rotary_emb.inv_freq"),
)


REFUSE = (
    silu_only(ARCH),
    rope_types(ARCH, ("default",)),
    Refuse("rope_parameters", lambda v: "mrope_section" not in v, "its mrope_section (GLM-4.5V's multimodal rope) "
           "is not read by the text family glm4_moe"),
)


def check(h: dict, path: Path) -> None:
    if rope_dimension_count(h) % 2:
        raise ConfigError(f"{path}: head_dim x partial_rotary_factor = {rope_dimension_count(h)} rotary dims: "
                          f"rotation pairs need an even count")
    check_mixture(h, path)


def check_mixture(h: dict, path: Path) -> None:
    """What llama.cpp's glm4moe needs of the mixture (also SolarOpen's): routed experts, one expert group, no more
    leading dense layers than layers."""
    for key in ("n_routed_experts", "num_experts_per_tok"):
        if not h.get(key):
            raise ConfigError(f"{path}: {key} {h.get(key)!r}: llama.cpp's glm4moe needs routed experts "
                              f"(n_expert and n_expert_used > 0)")
    if (h.get("n_group") or 1) > 1 or (h.get("topk_group") or 1) > 1:
        raise ConfigError(f"{path}: n_group {h.get('n_group')!r}, topk_group {h.get('topk_group')!r}: transformers' "
                          f"Glm4Moe keeps the best topk_group of n_group expert groups, but llama.cpp's glm4moe "
                          f"never limits groups, so expert choices would differ; every GLM-4.5 / 4.6 release "
                          f"states 1 and 1")
    if h["first_k_dense_replace"] > h["num_hidden_layers"]:
        raise ConfigError(f"{path}: first_k_dense_replace {h['first_k_dense_replace']} is more than the "
                          f"{h['num_hidden_layers']} layers")


def normalise(h: dict) -> dict:
    """Glm4MoeConfig's constructor: a top-level partial_rotary_factor moves into rope_parameters (0.5 when
    neither states one), as Glm4Config's; absent KV heads are the query heads."""
    h = glm4_normalise(h)
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """Glm4MoeModel.set_gguf_parameters: TextModel's entries (block_count with the MTP layers), the rope width,
    the expert widths and counts, the leading dense layers, sigmoid gating, the scale, the renormalisation and
    the MTP layer count."""
    kv = text_model_parameters(h, ARCH, block_count, file_type)
    kv.append(u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), rope_dimension_count(h)))
    # expert_count again (TextModel wrote it): the converter overwrites it in place with the same value
    if h.get("moe_intermediate_size") is not None:
        kv.append(u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_intermediate_size"]))
    if h.get("n_shared_experts") is not None:
        kv.append(u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=ARCH), h["n_shared_experts"]))
    if h.get("first_k_dense_replace") is not None:
        kv.append(u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=ARCH), h["first_k_dense_replace"]))
    kv.append(u32(Keys.LLM.EXPERT_GATING_FUNC.format(arch=ARCH), 2))  # sigmoid, whatever the config says
    if h.get("routed_scaling_factor") is not None:
        kv.append(f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=ARCH), h["routed_scaling_factor"]))
    if h.get("norm_topk_prob") is not None:
        kv.append(boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=ARCH), h["norm_topk_prob"]))
    if h.get("num_nextn_predict_layers") is not None:
        kv.append(u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=ARCH), h["num_nextn_predict_layers"]))
    return kv


FAMILY = Family(
    name="glm4_moe",
    gguf_arch=ARCH,
    architectures=("Glm4MoeForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=glm_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    extra_blocks=mtp_layers,
)
