"""Mellum (JetBrains Mellum 2: MellumForCausalLM) -> llama.cpp `mellum` (the converter's MellumModel).

Qwen3-MoE's attention (per-head q/k RMS norms, rotate-half rope as stored) and mixture (softmax router, the
chosen experts' weights renormalised, stacked experts, no shared expert) with per-layer attention kinds: sliding
layers (layer_types, written as the window pattern) and global ones, each kind with its rope in
rope_parameters. llama.cpp's mellum has a mixture in every layer (mlp_layer_types "dense" is refused) and ropes
its sliding layers with the global layers' theta (so the two thetas must agree where a layer slides).

Multi-token prediction: the converter's MellumModel reads no MTP setting (num_mtp_layers, mtp_layer_types and
mtp_mlp_layer_types change nothing it writes) and maps no mtp.* tensor: a checkpoint as transformers saves it
(MellumForCausalLM builds no MTP layer) converts as without them, while one that stores an MTP layer (mtp.*,
which transformers ignores on load) stops the converter ("Can not map tensor 'mtp.fc.weight'"), so the view
refuses it by name.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, RunnerFacts, Tensor, unset
from ..gguf_layout import KV, ValueType
from ..names import Keys
from ..params import text_model_parameters, u32
from ._parts.checks import check_no_pooling, silu_only
from ._parts.mixture import check_topk_norm
from ._parts.vocab import gpt2_vocab
from .qwen3_moe import TENSORS as QWEN3_MOE_TENSORS

_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 500000.0},
         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}

# transformers 5.24's MellumConfig defaults (it names num_experts num_local_experts and num_mtp_layers
# num_nextn_predict_layers; layer_types and mlp_layer_types are derived: normalise)
DEFAULTS = {
    "mellum": dict(vocab_size=98304, hidden_size=2304, intermediate_size=7168, num_hidden_layers=28,
                   num_attention_heads=32, num_key_value_heads=4, hidden_act="silu", max_position_embeddings=131072,
                   initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, tie_word_embeddings=False,
                   rope_parameters=_ROPE, attention_bias=False, sliding_window=1024, attention_dropout=0.0,
                   moe_intermediate_size=896, num_experts_per_tok=8, num_local_experts=64, norm_topk_prob=True,
                   output_router_logits=False, router_aux_loss_coef=0.001, pad_token_id=None, bos_token_id=None,
                   eos_token_id=None, head_dim=128, layer_types=None, mlp_layer_types=None,
                   num_nextn_predict_layers=None, mtp_layer_types=None, mtp_mlp_layer_types=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "sliding_window",
    "layer_types", "mlp_layer_types", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
    "norm_topk_prob",
    "num_nextn_predict_layers", "mtp_layer_types", "mtp_mlp_layer_types",  # the converter writes nothing of them
})
HARMLESS: Harmless = {}


def _mtp_stored(sources, h):
    raise CheckpointError(f"{sources[0].path.name}: tensor {sources[0].name!r} is part of a stored multi-token-"
                          f"prediction layer: the converter's MellumModel maps no mtp.* tensor and stops on it "
                          f"(\"Can not map tensor\"), so there is no converter file to present; transformers ignores "
                          f"these tensors, and the checkpoint without them converts")


TENSORS = (Tensor("mtp.{rest}", "mtp", _mtp_stored, required=False), *QWEN3_MOE_TENSORS)


def normalise(h: dict) -> dict:
    """What MellumConfig's __post_init__ computes: every layer global and a mixture unless stated, and its
    per-layer-kind rope where config.json names none."""
    n = h["num_hidden_layers"]
    if h.get("layer_types") is None:
        h["layer_types"] = ["full_attention"] * n
    if h.get("mlp_layer_types") is None:
        h["mlp_layer_types"] = ["sparse"] * n
    rope = h.get("rope_parameters") or {}
    if "full_attention" not in rope and "sliding_attention" not in rope and "rope_theta" not in rope:
        h["rope_parameters"] = {kind: dict(r) for kind, r in _ROPE.items()}
    return h


REFUSE = (
    silu_only("mellum"),
    Refuse("mlp_layer_types", lambda v: all(t == "sparse" for t in v), "llama.cpp's mellum has a mixture of experts "
           "in every layer, so dense layers cannot run there"),
    Refuse("layer_types", lambda v: not set(v) - {"sliding_attention", "full_attention"},
           "Mellum knows sliding_attention and full_attention"),
    Refuse("num_local_experts", bool, "llama.cpp's mellum needs experts"),
    Refuse("tie_word_embeddings", unset, "llama.cpp's mellum needs an output matrix of its own"),
    Refuse("attention_bias", unset, "llama.cpp's mellum has no attention biases"),
    Refuse("rope_parameters", lambda v: "full_attention" in v and "sliding_attention" in v,
           "Mellum names one rope per layer kind (full_attention, sliding_attention)"),
    *(Refuse(f"rope_parameters.{kind}.rope_type", ("default",), "the view presents Mellum with plain rope only "
             "(llama.cpp's mellum drops scaling on its sliding layers)", default="default")
      for kind in ("full_attention", "sliding_attention")),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    check_topk_norm(h, path, "mellum", True)
    n = h["num_hidden_layers"]
    for key in ("layer_types", "mlp_layer_types"):
        if len(h[key]) != n:
            raise ConfigError(f"{path}: {key} lists {len(h[key])} layers, num_hidden_layers is {n}")
    rope = h["rope_parameters"]
    if "sliding_attention" in h["layer_types"] and \
            rope["sliding_attention"].get("rope_theta") != rope["full_attention"].get("rope_theta"):
        raise ConfigError(f"{path}: sliding layers with rope_theta {rope['sliding_attention'].get('rope_theta')} "
                          f"and global ones with {rope['full_attention'].get('rope_theta')}: llama.cpp's mellum "
                          f"ropes its sliding layers with the global theta, so they would run wrong")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """MellumModel.set_gguf_parameters: TextModel's entries, the expert width, the window and its pattern."""
    kv = text_model_parameters(h, "mellum", block_count, file_type)
    if h.get("moe_intermediate_size") is not None:
        kv.append(u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch="mellum"), h["moe_intermediate_size"]))
    if h.get("sliding_window") is not None:
        kv += [u32(Keys.Attention.SLIDING_WINDOW.format(arch="mellum"), h["sliding_window"]),
               KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch="mellum"), ValueType.ARRAY,
                  [t == "sliding_attention" for t in h["layer_types"]], ValueType.BOOL)]
    return kv


FAMILY = Family(
    name="mellum",
    gguf_arch="mellum",
    architectures=("MellumForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    aliases={"num_experts": "num_local_experts", "num_mtp_layers": "num_nextn_predict_layers"},
    runner=RunnerFacts(llama_cpp_applies_window=True),  # llama.cpp's mellum slides on the layers layer_types names
)
