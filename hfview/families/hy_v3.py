"""Hy3 (tencent/Hy3: HYV3ForCausalLM) -> llama.cpp `hy_v3` (the converter's HYV3Model).

Llama's attention with per-head q/k RMSNorms before a rotate-half rope over the whole head (llama.cpp's NEOX
order: Q/K as stored), then per mlp_layer_types a dense SwiGLU or a mixture: a sigmoid router
(`mlp.router.gate`) whose top-k choice adds `mlp.expert_bias` (exp_probs_b), the chosen weights always
renormalised and times router_scaling_factor, per-expert SwiGLUs stacked down, gate, up, and a shared SwiGLU
(`mlp.shared_mlp`) of moe_intermediate_size x num_shared_experts. The converter writes no layer kinds: llama.cpp
takes a layer without a router as dense, so each layer's stored FFN is checked against mlp_layer_types.

The next-token-prediction (MTP) layers the release stores after the trunk (num_nextn_predict_layers 1: a mixture
decoder layer as model.layers.80.* with eh_proj, enorm, hnorm and final_layernorm) are written as the converter
writes them without --no-mtp: block_count counts them, the decoder tensors under blk.{n}.*, their own under
blk.{n}.nextn.* (final_layernorm as shared_head_norm), and nextn_predict_layers in the KV. llama.cpp's hy_v3 loads
them and runs the trunk only, as transformers (which drops them on load) does.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Experts, Family, Refuse, Tensor, unset
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.nextn import NEXTN_TENSORS, in_mtp_block, mtp_layers
from ._parts.vocab import gpt2_vocab

ARCH = "hy_v3"

# transformers 5.24's HYV3Config defaults (mlp_layer_types is computed: normalise)
DEFAULTS = {
    "hy_v3": dict(vocab_size=120832, hidden_size=4096, intermediate_size=13312, num_hidden_layers=80,
                  num_attention_heads=64, num_key_value_heads=8, head_dim=128, hidden_act="silu",
                  max_position_embeddings=131072, initializer_range=0.006, rms_norm_eps=1e-05, use_cache=True,
                  pad_token_id=None, bos_token_id=None, eos_token_id=None, tie_word_embeddings=False,
                  attention_bias=False, attention_dropout=0.0, mlp_bias=False, num_experts=192,
                  num_experts_per_tok=8, num_shared_experts=1, moe_intermediate_size=1536,
                  router_scaling_factor=2.826, enable_moe_fp32_combine=True, output_router_logits=False,
                  rope_parameters={"rope_theta": 11158840.0, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings",
    "attention_bias", "mlp_bias",  # checked: none (llama.cpp's hy_v3 loads no biases)
    "num_experts", "num_local_experts", "num_experts_per_tok", "num_shared_experts", "moe_intermediate_size",
    "router_scaling_factor", "mlp_layer_types",  # checked against each layer's stored FFN
    "route_norm",  # the converter's expert_weights_norm: refused unless true (transformers always renormalises)
    "num_nextn_predict_layers",  # the MTP blocks after the trunk (HYV3Config defines none: absent, 0)
})
HARMLESS: Harmless = {
    # the mixture's sum taken in f32 before rounding to the activations' dtype: llama.cpp sums in f32
    "enable_moe_fp32_combine": ANY,
    # read by neither HYV3Config nor the converter (transformers' get_mtp_config zeroes it for the MTP layers only):
    # the layer kinds come from mlp_layer_types, checked against each layer's stored FFN
    "first_k_dense_replace": ANY,
}
ALIASES = {"num_local_experts": "num_experts"}

_L = "model.layers.{bid}."
_MLP = _L + "mlp."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=lambda h: not h.get("tie_word_embeddings")),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    *(Tensor(f"{_L}self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{p}.weight") for p in ("q", "k", "v")),
    Tensor(_L + "self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(_L + "self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor(_L + "self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    # a dense layer's FFN or a mixture, by mlp_layer_types: checked in stored_kv
    *(Tensor(f"{_MLP}{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=False) for p in ("gate", "up", "down")),
    Tensor(_MLP + "router.gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Tensor(_MLP + "expert_bias", GGUF.FFN_EXP_PROBS_B, required=False),
    *(Experts(f"{_MLP}experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "num_experts",
              required=False) for p in ("down", "gate", "up")),
    *(Tensor(f"{_MLP}shared_mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=False)
      for p in ("gate", "up", "down")),
    *NEXTN_TENSORS,  # the MTP blocks' own (their final_layernorm renamed shared_head.norm first)
)


def rename(name: str, h: dict) -> str:
    """HYV3Model.filter_tensors: an MTP block's trailing final_layernorm (after its decoder layer, before the shared
    head) is read as its shared_head.norm; in a trunk layer the name is kept, matches no rule and is refused, as the
    converter cannot map it either."""
    return name.replace(".final_layernorm.", ".shared_head.norm.") if in_mtp_block(name, h) else name


def normalise(h: dict) -> dict:
    """HYV3Config.__post_init__: one leading dense layer, the rest mixtures, where mlp_layer_types is unstated."""
    if h.get("mlp_layer_types") is None:
        h["mlp_layer_types"] = ["dense"] + ["sparse"] * (h["num_hidden_layers"] - 1)
    return h


REFUSE = (
    silu_only(ARCH),
    rope_types(ARCH, allowed=("default",)),
    *(Refuse(key, unset, f"llama.cpp's {ARCH} loads no such biases, so they would be dropped")
      for key in ("attention_bias", "mlp_bias")),
    Refuse("rope_parameters.partial_rotary_factor", (1.0,), f"the converter writes no rope width, so llama.cpp's "
           f"{ARCH} rotates the whole head", default=1.0),
    Refuse("route_norm", (True,), f"transformers' HYV3 always renormalises the chosen experts' weights, but the "
           f"converter would write expert_weights_norm false and llama.cpp's {ARCH} would not", default=True),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    if not h.get("num_experts") or not h.get("num_shared_experts"):
        raise ConfigError(f"{path}: num_experts {h.get('num_experts')!r}, num_shared_experts "
                          f"{h.get('num_shared_experts')!r}: Hy3's mixture has routed experts and a shared MLP")
    if h["num_experts_per_tok"] > h["num_experts"]:
        raise ConfigError(f"{path}: num_experts_per_tok {h['num_experts_per_tok']} is more than the "
                          f"{h['num_experts']} experts")
    kinds = h["mlp_layer_types"]
    if not isinstance(kinds, list) or len(kinds) != h["num_hidden_layers"] or set(kinds) - {"dense", "sparse"}:
        raise ConfigError(f"{path}: mlp_layer_types {kinds!r}: one of \"dense\" / \"sparse\" per layer "
                          f"({h['num_hidden_layers']} layers)")


def check_layers(h: dict, stored: dict) -> list:
    """No KV: each layer stores the FFN its mlp_layer_types entry names (llama.cpp decides by the router's
    presence, transformers by the list)."""
    for i, kind in enumerate(h["mlp_layer_types"]):
        mlp = f"model.layers.{i}.mlp."
        need = ([f"{mlp}router.gate.weight", f"{mlp}experts.0.gate_proj.weight", f"{mlp}shared_mlp.gate_proj.weight"]
                if kind == "sparse" else [f"{mlp}gate_proj.weight", f"{mlp}up_proj.weight", f"{mlp}down_proj.weight"])
        for name in need:
            if name not in stored:
                raise CheckpointError(f"tensor {name!r} is missing: layer {i} is {kind} by mlp_layer_types; a shard "
                                      f"may be missing")
        other = f"{mlp}gate_proj.weight" if kind == "sparse" else f"{mlp}router.gate.weight"
        if other in stored:
            raise CheckpointError(f"tensor {other!r}: layer {i} is {kind} by mlp_layer_types, but the checkpoint "
                                  f"stores the other kind of FFN there")
    return []


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's list (block_count with the MTP blocks), then HYV3Model's: expert widths, renormalisation
    (route_norm, absent: true), the router's scale, the sigmoid gating and the MTP block count where there is one."""
    return [*text_model_parameters(h, ARCH, block_count, file_type),
            u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_intermediate_size"]),
            u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=ARCH),
                h["moe_intermediate_size"] * h["num_shared_experts"]),
            boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=ARCH), True),
            f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=ARCH), float(h["router_scaling_factor"])),
            u32(Keys.LLM.EXPERT_GATING_FUNC.format(arch=ARCH), 2),
            *([u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=ARCH), mtp_layers(h))] if mtp_layers(h) else [])]


FAMILY = Family(
    name="hy_v3",
    gguf_arch=ARCH,
    architectures=("HYV3ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    stored_kv=check_layers,
    aliases=ALIASES,
    extra_blocks=mtp_layers,
    rename=rename,
)
