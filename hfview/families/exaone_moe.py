"""EXAONE MoE (K-EXAONE: ExaoneMoeForCausalLM, released first as ExaoneMoEForCausalLM) -> llama.cpp `exaone-moe`
(the converter's ExaoneMoEModel, an Exaone4Model).

EXAONE 4's attention (per-head q/k RMS norms, Q/K as stored, rope on the sliding layers only, global layers
without rope, the layer kinds written as an array) in OLMoE's pre-norm block, over DeepSeek-V3's mixture:
first_k_dense_replace leading dense layers, then sigmoid-scored experts chosen with a selection bias
(`mlp.e_score_correction_bias`), renormalised where norm_topk_prob says, times routed_scaling_factor, plus
shared experts. llama.cpp's exaone-moe needs the gating function as KV, which the converter writes only from a
stated scoring_func (K-EXAONE's config.json states it; ExaoneMoeConfig does not define it).

The multi-token-prediction (MTP) layer K-EXAONE stores under mtp.* (which transformers ignores on load) is written
as the converter writes it: block_count counts num_nextn_predict_layers past num_hidden_layers, mtp.layers.{i}.*
(a dense decoder layer: llama.cpp's exaone-moe gives its MTP blocks a dense FFN) as blk.{n + i}.*, and mtp.fc,
mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden, mtp.norm as that block's nextn.eh_proj / enorm / hnorm /
shared_head_norm. llama.cpp skips those blocks when it loads and runs the num_hidden_layers trunk, as
transformers' forward does.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Experts, Family, Refuse, RunnerFacts, Skip, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import boolean, f32, string, text_model_parameters, u32
from ._parts.checks import check_no_pooling
from .exaone4 import normalise as normalise_exaone4
from .exaone4 import vocab

ARCHITECTURES = ("ExaoneMoeForCausalLM", "ExaoneMoEForCausalLM")

# transformers 5.24's ExaoneMoeConfig defaults (layer_types and mlp_layer_types are derived: normalise)
DEFAULTS = {
    "exaone_moe": dict(vocab_size=102400, hidden_size=4096, intermediate_size=16384, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=32, hidden_act="silu", max_position_embeddings=2048,
                       initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True, bos_token_id=1, eos_token_id=53,
                       pad_token_id=0, tie_word_embeddings=False,
                       rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, attention_dropout=0.0,
                       sliding_window=4096, sliding_window_pattern=4, mlp_layer_types=None, first_k_dense_replace=1,
                       moe_intermediate_size=1024, num_experts=64, num_experts_per_tok=8, output_router_logits=False,
                       num_shared_experts=1, norm_topk_prob=True, routed_scaling_factor=2.5, n_group=1, topk_group=1),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "sliding_window", "sliding_window_pattern",
    "layer_types", "mlp_layer_types", "first_k_dense_replace", "moe_intermediate_size", "num_experts",
    "num_experts_per_tok", "num_shared_experts", "norm_topk_prob", "routed_scaling_factor", "n_group", "topk_group",
    "scoring_func",  # written as the gating function; checked: sigmoid, as the router computes
    "num_nextn_predict_layers",  # the MTP blocks the converter writes past num_hidden_layers
    # K-EXAONE's first config.json: neither transformers 5.24 nor the converter (which finds first_k_dense_replace,
    # always set by the config class, before it) reads these; checked to agree with what they do read
    "first_last_k_dense_replace", "is_moe_layer",
})
# the router transformers' ExaoneMoe implements (sigmoid scores, selection bias, no groups), as K-EXAONE names it
HARMLESS: Harmless = {"topk_method": ("noaux_tc",)}

_LAYER = "model.layers.{bid}."

# ExaoneMoEModel.modify_tensors' MTP renames: mtp.layers.{i}.X -> model.layers.{n + i}.X; the MTP head's own tensors
# (stored once, written for every MTP block: the view presents one block, checked) -> model.layers.{n}.<nextn name>
_MTP_OWN = {"fc": "eh_proj", "pre_fc_norm_embedding": "enorm", "pre_fc_norm_hidden": "hnorm",
            "norm": "shared_head.norm"}


def mtp_rename(name: str, h: dict) -> str:
    """The converter's MTP renames (n: num_hidden_layers). A mixture in an MTP layer keeps its mtp. name and is
    refused below (the converter stacks its experts under the wrong block and stops; llama.cpp's MTP blocks are
    dense), as is any mtp.* name the converter's remapper does not know."""
    if not name.startswith("mtp."):
        return name
    parts = name.split(".")
    n = h["num_hidden_layers"]
    if len(parts) > 3 and parts[1] == "layers" and parts[2].isdecimal():
        if parts[3] == "mlp" and parts[4] in ("experts", "gate", "shared_experts", "e_score_correction_bias"):
            return name
        return ".".join(["model", "layers", str(n + int(parts[2])), *parts[3:]])
    if len(parts) == 3 and parts[1] in _MTP_OWN:
        return f"model.layers.{n}.{_MTP_OWN[parts[1]]}.{parts[2]}"
    return name


def _mtp_unknown(sources, h):
    raise CheckpointError(f"{sources[0].path.name}: tensor {sources[0].name!r}: the converter maps mtp.layers.{{i}}.* "
                          f"of a dense MTP layer, mtp.fc, mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden and "
                          f"mtp.norm only (llama.cpp's exaone-moe gives its MTP blocks a dense FFN), and stops on "
                          f"this one")


TENSORS = (
    Tensor("mtp.{rest}", "mtp", _mtp_unknown, required=False),
    # the MTP blocks' own tensors, after the renames
    *(Tensor(f"{_LAYER}{hf}.weight", f"blk.{{bid}}.nextn.{gguf}.weight", required=False)
      for hf, gguf in (("eh_proj", "eh_proj"), ("enorm", "enorm"), ("hnorm", "hnorm"),
                       ("shared_head.norm", "shared_head_norm"))),
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(f"{_LAYER}input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(f"{_LAYER}post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    *(Tensor(f"{_LAYER}self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{p}.weight") for p in ("q", "k", "v")),
    Tensor(f"{_LAYER}self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(f"{_LAYER}self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor(f"{_LAYER}self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight),
    # each of these exists in some layers only: dense FFNs first, then the mixtures
    *(Tensor(f"{_LAYER}mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=False)
      for p in ("gate", "up", "down")),
    Tensor(f"{_LAYER}mlp.gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Tensor(f"{_LAYER}mlp.e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias, required=False),
    *(Experts(f"{_LAYER}mlp.experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "num_experts",
              required=False) for p in ("down", "gate", "up")),
    *(Tensor(f"{_LAYER}mlp.shared_experts.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=False)
      for p in ("gate", "up", "down")),
    Skip(f"{_LAYER}self_attn.rotary_emb.inv_freq"),
)


def normalise(h: dict) -> dict:
    """ExaoneMoeConfig's __post_init__: MLP kinds from first_k_dense_replace, then EXAONE 4's layer kinds."""
    if h.get("mlp_layer_types") is None:
        h["mlp_layer_types"] = ["dense" if i < h["first_k_dense_replace"] else "sparse"
                                for i in range(h["num_hidden_layers"])]
    return normalise_exaone4(h)


REFUSE = (
    Refuse("sliding_window", stated, "transformers then ropes every layer, while llama.cpp's "
           "exaone-moe, without the window and pattern the converter would not write, slides (128 tokens) and leaves "
           "rope out of every 4th layer"),
    Refuse("hidden_act", ("silu",), "llama.cpp's exaone-moe computes SiLU only; this checkpoint would run wrong",
           default="silu"),
    Refuse("layer_types", stated, "and no integer sliding_window_pattern: the layer pattern cannot "
           "be derived; state layer_types"),
    Refuse("rope_parameters.rope_type", ("default",), "a rope type the converter writes as rope scaling 'none' for "
           "exaone-moe (and fails on linear or yarn, writing the type twice)", default="default"),
    Refuse("num_shared_experts", bool, "llama.cpp's exaone-moe needs a shared expert in every mixture"),
    Refuse("tie_word_embeddings", unset, "llama.cpp's exaone-moe needs an output matrix of its own, which a tied "
           "checkpoint does not store"),
    Refuse("scoring_func", stated, "with no scoring_func the converter writes no gating function, "
           "which llama.cpp's exaone-moe requires; state scoring_func \"sigmoid\" as K-EXAONE's config does "
           "(transformers 5 leaves it out when it saves a config)"),
    Refuse("scoring_func", ("sigmoid",), "transformers' EXAONE MoE scores experts by sigmoid only"),
    *(Refuse(key, (1,), "K-EXAONE routes without expert groups (1 and 1); llama.cpp's exaone-moe would limit the "
             "choice to groups") for key in ("n_group", "topk_group")),
    Refuse("num_nextn_predict_layers", lambda v: (v or 0) <= 1, "the converter writes the stored MTP head (mtp.fc, "
           "mtp.norm, ...) once for every MTP block; the view presents one MTP block (K-EXAONE has one)"),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    if len(h["layer_types"]) != h["num_hidden_layers"]:
        raise ConfigError(f"{path}: layer_types lists {len(h['layer_types'])} layers, num_hidden_layers is "
                          f"{h['num_hidden_layers']}")
    n = h["num_hidden_layers"]
    if len(h["mlp_layer_types"]) != n:
        raise ConfigError(f"{path}: mlp_layer_types lists {len(h['mlp_layer_types'])} layers, num_hidden_layers "
                          f"is {n}")
    lead = h["first_k_dense_replace"]
    if list(h["mlp_layer_types"]) != ["dense" if i < lead else "sparse" for i in range(n)]:
        raise ConfigError(f"{path}: mlp_layer_types {h['mlp_layer_types']} with first_k_dense_replace {lead}: the "
                          f"converter writes {lead} leading dense layers and llama.cpp's exaone-moe has dense "
                          f"layers exactly there")
    if lead >= n or not h.get("num_experts"):
        raise ConfigError(f"{path}: first_k_dense_replace {lead} of {n} layers with {h.get('num_experts')!r} "
                          f"experts: llama.cpp's exaone-moe needs mixtures")
    if h.get("first_last_k_dense_replace") is not None and h["first_last_k_dense_replace"] != lead:
        raise ConfigError(f"{path}: first_last_k_dense_replace {h['first_last_k_dense_replace']} but "
                          f"first_k_dense_replace {lead}: transformers and the converter read the latter only "
                          f"(ExaoneMoeConfig defaults it to 1), so the stated dense layers would not be built")
    if h.get("is_moe_layer") is not None and list(h["is_moe_layer"]) != [t == "sparse" for t in h["mlp_layer_types"]]:
        raise ConfigError(f"{path}: is_moe_layer {h['is_moe_layer']} disagrees with mlp_layer_types "
                          f"{h['mlp_layer_types']}, which transformers and the converter read (is_moe_layer they "
                          f"ignore)")


def mtp_stored(h: dict, stored: dict) -> dict:
    """A config counting MTP layers over a checkpoint that stores none (as transformers saves one: it builds no MTP
    layer) is refused: the converter still writes block_count n + num_nextn_predict_layers, and llama.cpp's
    exaone-moe then stops on the missing block ("tensor 'blk.{n}.attn_output.weight' not found")."""
    if (h.get("num_nextn_predict_layers") or 0) > 0 and not any(name.startswith("mtp.") for name in stored):
        raise CheckpointError(f"num_nextn_predict_layers {h['num_nextn_predict_layers']}, but the checkpoint stores "
                              f"no mtp.* tensor: the converter counts the MTP block all the same, and llama.cpp's "
                              f"exaone-moe cannot load a file without its tensors; set num_nextn_predict_layers to 0 "
                              f"to run the trunk")
    return h


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """ExaoneMoEModel.set_gguf_parameters: Exaone4Model's entries (text model, vocab size, window and its layer
    pattern), then the mixture's."""
    shared = h["num_shared_experts"]
    return [*text_model_parameters(h, "exaone-moe", block_count, file_type),
            u32(Keys.LLM.VOCAB_SIZE.format(arch="exaone-moe"), h["vocab_size"]),
            u32(Keys.Attention.SLIDING_WINDOW.format(arch="exaone-moe"), h["sliding_window"]),
            KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch="exaone-moe"), ValueType.ARRAY,
               [t == "sliding_attention" for t in h["layer_types"]], ValueType.BOOL),
            u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch="exaone-moe"), h["moe_intermediate_size"]),
            u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch="exaone-moe"), shared),
            u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch="exaone-moe"),
                h["moe_intermediate_size"] * shared),
            f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch="exaone-moe"), h["routed_scaling_factor"]),
            boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch="exaone-moe"), h["norm_topk_prob"]),
            u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch="exaone-moe"), h["first_k_dense_replace"]),
            u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch="exaone-moe"), h.get("num_nextn_predict_layers", 0)),
            string(Keys.Rope.SCALING_TYPE.format(arch="exaone-moe"), "none")]


FAMILY = Family(
    name="exaone_moe",
    gguf_arch="exaone-moe",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    runner=RunnerFacts(llama_cpp_applies_window=True),  # llama.cpp's exaone-moe slides on the layers layer_types names
    extra_blocks=lambda h: h.get("num_nextn_predict_layers") or 0,
    rename=mtp_rename,
    stored_hparams=mtp_stored,
)
