"""Nemotron-H (Nemotron-H-8B/47B, Nemotron Nano 2: dense) and Nemotron 3 Nano / Super / Ultra (mixtures; Super's and
Ultra's experts at a latent width, their multi-token-prediction head written as one more block):
NemotronHForCausalLM -> llama.cpp `nemotron_h` / `nemotron_h_moe` (the converter's NemotronHModel, a
GraniteHybridModel).

Each layer is one kind, as hybrid_override_pattern (M Mamba-2, * attention, - MLP, E mixture) or transformers 5's
layers_block_type (linear_attention, full_attention, mlp, moe) says, behind one RMSNorm: Mamba-2's mixer (as
mamba2: A = -exp(A_log) and D as [heads, 1], dt_bias as ssm_dt.bias, the gated norm as [groups, d_inner / groups]),
attention without positions (Q/K in rotation pairs, as the converter's Granite base presents them), a squared-ReLU
MLP (up, down), or a mixture: a sigmoid router with its correction bias, stacked squared-ReLU experts (down, up),
optionally between a latent down and up projection, beside one shared expert. KV heads and the FFN width are
written per layer (0 where the layer has none); llama.cpp reads a layer with neither as Mamba.

A mixture's multi-token-prediction head (Nemotron 3 Super / Ultra: num_nextn_predict_layers 1, stored as
mtp.layers.0.* for the input fusion and an attention sub-layer, mtp.layers.1.* for a mixture sub-layer and the head's
final norm) is written as the converter writes it unless --no-mtp: one more block after the trunk, both an attention
and a mixture layer in the per-layer KV, its tensors under blk.{n}.* by the trunk's rules and blk.{n}.nextn.* for
its own, and nextn_predict_layers. llama.cpp loads that block only for drafting (its main graph runs the trunk), and
transformers ignores mtp.* on load: the logits are the trunk's. A checkpoint saved without the mtp.* tensors (as
transformers saves one) converts to the same KV with no tensors in that block.

How the pinned converter reads the config decides the file. It reads AutoConfig's to_dict(), and transformers 5.24's
NemotronHConfig always carries num_experts_per_tok (a default) and writes the layers as layers_block_type: a dense
checkpoint is then taken for a mixture (nemotron_h_moe, FFN width 0 on its MLP layers, 8 default experts), a file
llama.cpp cannot load. The view presents a dense checkpoint as the converter does on config.json as written (the
reading it was made for, before transformers had the class): nemotron_h, the MLP layers from the pattern, only
the stated keys; a mixture as the converter presents it through to_dict (the class's defaults filled in).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Tensor, rope_pairs
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..views import NEG_EXP, Reshaped
from ._parts.nextn import NEXTN_TENSORS
from ._parts.state_space import clamps_nothing, padded_vocab, per_head, squeezed

# transformers 5.24's NemotronHConfig defaults: what the converter sees (through to_dict) beside a mixture's keys
CONFIG_DEFAULTS = dict(
    vocab_size=131072, hidden_size=4096, tie_word_embeddings=False, num_attention_heads=32, num_key_value_heads=8,
    head_dim=128, max_position_embeddings=4096, attention_bias=False, sliding_window=None, intermediate_size=21504,
    mlp_hidden_act="relu2", mlp_bias=False, ssm_state_size=128, mamba_num_heads=128, mamba_head_dim=64,
    mamba_hidden_act="silu", n_groups=8, conv_kernel=4, expand=2, time_step_limit=[0.0, float("inf")],
    use_conv_bias=True, mamba_proj_bias=False, n_routed_experts=8, n_shared_experts=1, moe_intermediate_size=7688,
    moe_shared_expert_intermediate_size=7688, moe_latent_size=None, num_experts_per_tok=2,
    routed_scaling_factor=1.0, n_group=1, topk_group=1, norm_topk_prob=True, num_nextn_predict_layers=0,
    use_bias=False, layer_norm_epsilon=1e-5, residual_in_fp32=False,
)
# None: config.json is read as written (a dense checkpoint's reading; a mixture's fills CONFIG_DEFAULTS in)
DEFAULTS = {"nemotron_h": {}}

# the keys a dense checkpoint must state: the converter reads config.json as written and would otherwise fall
# back to its own values where transformers takes the class's defaults
STATED = ("vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
          "ssm_state_size", "mamba_num_heads", "mamba_head_dim", "n_groups", "conv_kernel", "layer_norm_epsilon")
MIXTURE_KEYS = ("n_routed_experts", "n_shared_experts", "moe_intermediate_size", "moe_shared_expert_intermediate_size",
                "moe_latent_size", "num_experts_per_tok", "routed_scaling_factor", "n_group", "topk_group",
                "norm_topk_prob")
READS = frozenset({
    *CONFIG_DEFAULTS, "num_hidden_layers", "hybrid_override_pattern", "layers_block_type", "attention_head_dim",
    "rms_norm_eps", "mtp_layers_block_type", "mtp_hybrid_override_pattern",
    # Nemotron 3 Nano's release also states these, which NemotronHConfig does not define: the converter writes
    # norm_eps as the RMS epsilon (which llama.cpp then uses: it must be layer_norm_epsilon) and rope_theta as the
    # rope base (which nemotron_h never applies)
    "norm_eps", "rope_theta",
})
# how many logits a generation step keeps, which kernel computes the scan, its chunk length, the SSM cache's dtype
# and the weights' initialisation (time_step_min / max / floor, rescale_prenorm_residual, dt rank of the init)
HARMLESS: Harmless = {"num_logits_to_keep": ANY, "use_mamba_kernels": ANY, "chunk_size": ANY,
                      "mamba_ssm_cache_dtype": ANY, "time_step_min": ANY, "time_step_max": ANY, "time_step_floor": ANY,
                      "rescale_prenorm_residual": ANY, "time_step_rank": ANY, "moe_shared_expert_overlap": ANY,
                      # no attention layer of Nemotron-H (nor llama.cpp's nemotron_h) applies rope
                      "partial_rotary_factor": ANY}

_KIND = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe",
         "mamba": "linear_attention", "attention": "full_attention"}


def kinds(h: dict) -> list[str]:
    """Each layer's kind in transformers 5's words, from whichever spelling the config states."""
    pattern = h.get("hybrid_override_pattern")
    if pattern is not None:
        return [_KIND.get(c, c) for c in pattern]
    return [_KIND.get(t, t) for t in h.get("layers_block_type") or []]


def is_moe(h: dict) -> bool:
    return "moe" in kinds(h)


def as_read(h: dict) -> dict:
    """The hyperparameters as the converter reads them: a mixture's through to_dict (CONFIG_DEFAULTS filled in)."""
    return {**CONFIG_DEFAULTS, **h} if is_moe(h) else h


MTP = "mtp"  # the kind of the block after the trunk that holds the MTP head: an attention and a mixture sub-layer


def mtp_blocks(h: dict) -> int:
    """The blocks the converter writes after the trunk: the MTP head of a mixture (a dense one's it never writes)."""
    return (as_read(h).get("num_nextn_predict_layers") or 0) if is_moe(h) else 0


# the converter's renames of the head's own tensors (conversion/nemotron.py); the rest of mtp.layers.{0,1}.X is
# read as backbone.layers.{n}.X, under the trunk's rules
_MTP_OWN = {"mtp.layers.0.enorm.weight": "enorm.weight", "mtp.layers.0.hnorm.weight": "hnorm.weight",
            "mtp.layers.0.eh_proj.weight": "eh_proj.weight",
            "mtp.layers.1.norm.weight": "post_attention_layernorm.weight",
            "mtp.layers.1.final_layernorm.weight": "shared_head.norm.weight"}


def mtp_router_at_outtype(gguf_name: str, h: dict) -> bool:
    """The MTP block's router: the converter reads block 1 off mtp.layers.1.mixer.gate.weight, so its F32 list
    (blk.1.ffn_gate_inp) misses blk.{n}.ffn_gate_inp and writes it at the outtype, unlike the trunk's routers."""
    n = h["num_hidden_layers"]
    return bool(mtp_blocks(h)) and n != 1 and gguf_name == GGUF.FFN_GATE_INP.weight.format(bid=n)


def mtp_rename(name: str, h: dict) -> str:
    """mtp.layers.0.* and mtp.layers.1.* into block n = num_hidden_layers, as the converter folds them: its own
    tensors as model.layers.{n}.*, the sub-layers' as backbone.layers.{n}.*. Any other name (and any mtp.* name
    where no MTP block is written) is kept, and refused as a tensor the family does not know."""
    if not mtp_blocks(h) or not name.startswith(("mtp.layers.0.", "mtp.layers.1.")):
        return name
    n = h["num_hidden_layers"]
    own = _MTP_OWN.get(name)
    return f"model.layers.{n}.{own}" if own else f"backbone.layers.{n}.{name.split('.', 3)[3]}"


def by_group(sources, h):
    src = sources[0]
    groups = h["n_groups"]
    return Reshaped(src, (groups, src.shape[0] // groups), f"as [{groups} groups, {src.shape[0] // groups}]")


_L = "backbone.layers.{bid}."
_M = _L + "mixer."
_OPT = dict(required=False)  # on the layers of one kind only (check() places the kinds)
TENSORS = (
    Tensor("backbone.embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("backbone.norm_f.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),
    Tensor(_L + "norm.weight", GGUF.ATTN_NORM.weight),
    # Mamba-2 layers
    Tensor(_M + "in_proj.weight", GGUF.SSM_IN.weight, **_OPT),
    Tensor(_M + GGUF.CONV1D.weight, GGUF.SSM_CONV1D.weight, squeezed, **_OPT),
    Tensor(_M + GGUF.CONV1D.bias, GGUF.SSM_CONV1D.bias, **_OPT),
    Tensor(_M + "dt_bias", GGUF.SSM_DT.bias, **_OPT),
    Tensor(_M + "A_log", GGUF.SSM_A, per_head, steps=(NEG_EXP,), **_OPT),
    Tensor(_M + "D", GGUF.SSM_D, per_head, **_OPT),
    Tensor(_M + "norm.weight", GGUF.SSM_NORM.weight, by_group, **_OPT),
    Tensor(_M + "out_proj.weight", GGUF.SSM_OUT.weight, **_OPT),
    # attention layers: Q/K in rotation pairs, as the converter's Granite base presents them (no rope: the
    # same permutation of q and k leaves every score unchanged)
    Tensor(_M + "q_proj.weight", GGUF.ATTN_Q.weight, rope_pairs("num_attention_heads"), **_OPT),
    Tensor(_M + "k_proj.weight", GGUF.ATTN_K.weight, rope_pairs("num_key_value_heads"), **_OPT),
    Tensor(_M + "v_proj.weight", GGUF.ATTN_V.weight, **_OPT),
    Tensor(_M + "o_proj.weight", GGUF.ATTN_OUT.weight, **_OPT),
    # MLP layers
    Tensor(_M + "up_proj.weight", GGUF.FFN_UP.weight, **_OPT),
    Tensor(_M + "down_proj.weight", GGUF.FFN_DOWN.weight, **_OPT),
    # mixture layers
    Tensor(_M + "gate.weight", GGUF.FFN_GATE_INP.weight, **_OPT),
    Tensor(_M + "gate.e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias, **_OPT),
    Experts(_M + "experts.{x}.down_proj.weight", GGUF.FFN_DOWN_EXP.weight, "n_routed_experts", **_OPT),
    Experts(_M + "experts.{x}.up_proj.weight", GGUF.FFN_UP_EXP.weight, "n_routed_experts", **_OPT),
    Tensor(_M + "shared_experts.up_proj.weight", GGUF.FFN_UP_SHEXP.weight, **_OPT),
    Tensor(_M + "shared_experts.down_proj.weight", GGUF.FFN_DOWN_SHEXP.weight, **_OPT),
    Tensor(_M + "fc1_latent_proj.weight", GGUF.MOE_LATENT_DOWN.weight, **_OPT),
    Tensor(_M + "fc2_latent_proj.weight", GGUF.MOE_LATENT_UP.weight, **_OPT),
    # the MTP head's own tensors, as mtp_rename names them (its mixture's input norm is llama.cpp's post-attention
    # norm of that block)
    *NEXTN_TENSORS,
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight, **_OPT),
)


def normalise(h: dict) -> dict:
    """NemotronHConfig's constructor: the layer count is the pattern's length; its mamba_* aliases."""
    for alias, key in (("mamba_n_groups", "n_groups"), ("mamba_d_conv", "conv_kernel"), ("mamba_expand", "expand"),
                       ("mamba_dt_limit", "time_step_limit"), ("mamba_conv_bias", "use_conv_bias")):
        if alias in h:
            h.setdefault(key, h.pop(alias))
    layers = kinds(h)
    if layers and h.get("num_hidden_layers") is None:
        h["num_hidden_layers"] = len(layers)
    if "rope_theta" in h and h.get("rope_parameters") is None:  # read by the converter as the rope base
        h["rope_parameters"] = {"rope_theta": h["rope_theta"]}
    if h.get("num_key_value_heads") is None and "num_attention_heads" in h:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def check(h: dict, path: Path) -> None:
    layers = kinds(h)
    if not layers:
        raise ConfigError(f"{path}: neither hybrid_override_pattern nor layers_block_type: which layer runs which "
                          f"mixer cannot be known")
    if h["num_hidden_layers"] != len(layers):
        raise ConfigError(f"{path}: {'hybrid_override_pattern' if 'hybrid_override_pattern' in h else 'layers_block_type'} "
                          f"lists {len(layers)} layers, num_hidden_layers says {h['num_hidden_layers']}: the converter "
                          f"refuses the mismatch (transformers would take the list's length)")
    unknown = sorted(set(layers) - {"linear_attention", "full_attention", "mlp", "moe"})
    if unknown:
        raise ConfigError(f"{path}: layer kind {unknown[0]!r}: a Nemotron-H layer is M / * / - / E in "
                          f"hybrid_override_pattern (linear_attention, full_attention, mlp, moe in layers_block_type)")
    if "hybrid_override_pattern" in h and "layers_block_type" in h and \
            [_KIND.get(t, t) for t in h["layers_block_type"]] != layers:
        raise ConfigError(f"{path}: hybrid_override_pattern and layers_block_type disagree")
    if "linear_attention" not in layers:
        raise ConfigError(f"{path}: no Mamba layer: llama.cpp's nemotron_h keeps a hybrid cache that needs one")
    if "full_attention" not in layers:
        raise ConfigError(f"{path}: no attention layer: every released Nemotron-H has some")
    moe = is_moe(h)
    if moe and "mlp" in layers:
        raise ConfigError(f"{path}: MLP ('-') layers beside mixture ('E') layers: the converter writes a mixture's "
                          f"FFN width on its 'E' layers only, so llama.cpp would read the MLP layers as Mamba")
    if not moe:
        missing = [k for k in STATED if h.get(k) is None]
        if missing:
            raise ConfigError(f"{path}: {', '.join(missing)} not stated: a dense Nemotron-H is read as config.json "
                              f"states it (see hfview.families.nemotron_h), and transformers would default them")
        if "hybrid_override_pattern" not in h:
            raise ConfigError(f"{path}: a dense Nemotron-H's layers given as layers_block_type only: the converter "
                              f"finds the MLP layers by hybrid_override_pattern's '-' (the spelling every release "
                              f"uses), and would write them without width")
        stated_moe = [k for k in ("num_experts_per_tok", "n_routed_experts") if k in h]
        if stated_moe:
            raise ConfigError(f"{path}: {stated_moe[0]} in a config without mixture layers: the converter would then "
                              f"write it as nemotron_h_moe, which llama.cpp cannot load without experts")
    r = as_read(h)
    check_sizes(r, path)
    if moe:
        check_routing(r, path)
        if not 0 < r["num_experts_per_tok"] <= r["n_routed_experts"]:
            raise ConfigError(f"{path}: num_experts_per_tok {r['num_experts_per_tok']} of {r['n_routed_experts']}")
        check_mtp(r, path)


def check_sizes(r: dict, path: Path) -> None:
    """What llama.cpp's nemotron_h / nemotron_h_moe compute of the hyperparameters `r` (as the converter reads them):
    the padded vocabulary, the Mamba-2 sizes, no step clamp, no biases, squared ReLU and SiLU, one RMS epsilon,
    no window."""
    if padded_vocab({"vocab_size": r["vocab_size"], "pad_vocab_size_multiple": 8}) != r["vocab_size"]:
        raise ConfigError(f"{path}: vocab_size {r['vocab_size']}: the converter pads a Nemotron-H vocabulary to a "
                          f"multiple of 8 but not the embedding, and llama.cpp refuses such a file")
    # The Mamba width is heads x head width (expand x hidden_size is not read: Nemotron-3-Nano's differ); the
    # converter asserts it is whole blocks of 64 (its d_head, as no mamba_d_head is stated) and reshapes the gated
    # norm into n_groups rows
    d_inner = r.get("mamba_num_heads", 128) * r.get("mamba_head_dim", 64)
    if d_inner % 64:
        raise ConfigError(f"{path}: mamba_num_heads x mamba_head_dim = {d_inner}: the converter refuses it (SSM inner "
                          f"size {d_inner} not a multiple of head dim 64)")
    if d_inner % r.get("n_groups", 8):
        raise ConfigError(f"{path}: mamba_num_heads x mamba_head_dim = {d_inner} does not divide into n_groups "
                          f"{r.get('n_groups', 8)}: the converter cannot reshape the gated norm into its groups")
    limit = r.get("time_step_limit")
    if not clamps_nothing(limit):
        raise ConfigError(f"{path}: time_step_limit {limit}: llama.cpp's nemotron_h does not clamp the step")
    wrong = [f"{k} {r[k]!r}" for k, ok in (("mamba_proj_bias", False), ("use_conv_bias", True), ("use_bias", False),
                                            ("attention_bias", False), ("mlp_bias", False),
                                            ("mlp_hidden_act", "relu2"), ("mamba_hidden_act", "silu"),
                                            ("residual_in_fp32", False))
             if k in r and r[k] != ok]
    if wrong:
        raise ConfigError(f"{path}: {', '.join(wrong)}: llama.cpp's nemotron_h has no projection biases, needs the "
                          f"conv1d bias, computes squared ReLU and SiLU; this checkpoint would run wrong")
    for key in ("rms_norm_eps", "norm_eps"):
        if key in r and r[key] != r.get("layer_norm_epsilon", r[key]):
            raise ConfigError(f"{path}: {key} {r[key]} beside layer_norm_epsilon {r['layer_norm_epsilon']}: the "
                              f"converter writes {key} as the RMS epsilon llama.cpp uses, transformers uses the other")
    if r.get("sliding_window") is not None:
        raise ConfigError(f"{path}: sliding_window {r['sliding_window']}: llama.cpp's nemotron_h attends over "
                          f"the whole context")


# the MTP head the converter folds into one block: mtp.layers.0 attention, mtp.layers.1 a mixture
_MTP_KINDS = (["full_attention", "moe"], ["attention", "moe"])


def check_mtp(r: dict, path: Path) -> None:
    """A mixture's MTP head as the converter writes it: one, of an attention and a mixture layer."""
    n = r.get("num_nextn_predict_layers") or 0
    if n > 1:
        raise ConfigError(f"{path}: num_nextn_predict_layers {n}: the converter folds one MTP head into one block "
                          f"and stops on more (\"NemotronH MTP conversion currently supports num_nextn_predict_layers "
                          f"== 1\")")
    stated = r.get("mtp_layers_block_type")
    pattern = r.get("mtp_hybrid_override_pattern")
    if n and ((stated is not None and list(stated) not in _MTP_KINDS) or pattern not in (None, "*E")):
        what = f"mtp_layers_block_type {stated!r}" if stated is not None and list(stated) not in _MTP_KINDS \
            else f"mtp_hybrid_override_pattern {pattern!r}"
        raise ConfigError(f"{path}: {what}: the converter writes the MTP head as an attention layer "
                          f"(mtp.layers.0) and a mixture (mtp.layers.1) whatever this says")


def check_routing(r: dict, path: Path) -> None:
    """A mixture's routing as llama.cpp's nemotron_h_moe computes it: no expert groups, one shared expert."""
    if r["n_group"] != 1 or r["topk_group"] != 1:
        raise ConfigError(f"{path}: n_group {r['n_group']} / topk_group {r['topk_group']}: llama.cpp's "
                          f"nemotron_h_moe does not route by expert groups")
    if r["n_shared_experts"] != 1:
        raise ConfigError(f"{path}: n_shared_experts {r['n_shared_experts']}: transformers' Nemotron-H builds one "
                          f"shared expert of moe_shared_expert_intermediate_size whatever it says; state 1")


def trunk_parameters(r: dict, arch: str, layers: list[str], block_count: int, file_type: int) -> list:
    """GraniteHybridModel's list (GraniteMoeModel's: TextModel's without head_dim, the vocabulary size, Llama's rope
    width), the Mamba-2 sizes, the KV heads per layer and no rope, then NemotronHModel's head width: what every
    Nemotron-H class writes before its FFN widths. `r`: the hyperparameters as the converter reads them; `layers`:
    each layer's kind."""
    kv = text_model_parameters({k: v for k, v in r.items() if k != "head_dim"}, arch, block_count, file_type)
    kv += [u32(Keys.LLM.VOCAB_SIZE.format(arch=arch), r["vocab_size"]),
           u32(Keys.Rope.DIMENSION_COUNT.format(arch=arch), r["hidden_size"] // r["num_attention_heads"]),
           u32(Keys.SSM.CONV_KERNEL.format(arch=arch), r["conv_kernel"]),
           u32(Keys.SSM.STATE_SIZE.format(arch=arch), r["ssm_state_size"]),
           u32(Keys.SSM.GROUP_COUNT.format(arch=arch), r["n_groups"]),
           u32(Keys.SSM.INNER_SIZE.format(arch=arch), r["mamba_num_heads"] * r["mamba_head_dim"]),
           u32(Keys.SSM.TIME_STEP_RANK.format(arch=arch), r["mamba_num_heads"]),
           KV(Keys.Attention.HEAD_COUNT_KV.format(arch=arch), ValueType.ARRAY,
              [r["num_key_value_heads"] if t in ("full_attention", MTP) else 0 for t in layers], ValueType.INT32),
           boolean(Keys.Rope.SCALING_FINETUNED.format(arch=arch), False),
           u32(Keys.LLM.CONTEXT_LENGTH.format(arch=arch), 2 ** 20)]
    head_dim = r.get("head_dim", r.get("attention_head_dim"))
    kv += [u32(Keys.Attention.KEY_LENGTH.format(arch=arch), head_dim),
           u32(Keys.Attention.VALUE_LENGTH.format(arch=arch), head_dim)]
    return kv


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """NemotronHModel.set_gguf_parameters: GraniteMoeModel's list (TextModel's without head_dim, the vocabulary size,
    Llama's rope width), the Mamba-2 sizes, the KV heads per layer and no rope, then the head width, the FFN width
    per layer, a mixture's expert keys and its MTP head's count; keys set twice keep their first place. The MTP
    block counts as an attention and a mixture layer."""
    moe = is_moe(h)
    arch = "nemotron_h_moe" if moe else "nemotron_h"
    r = as_read(h)
    layers = kinds(r) + [MTP] * mtp_blocks(h)
    kv = trunk_parameters(r, arch, layers, block_count, file_type)
    ffn = "moe" if moe else "mlp"
    width = r["moe_intermediate_size"] if moe else r["intermediate_size"]
    kv.append(KV(Keys.LLM.FEED_FORWARD_LENGTH.format(arch=arch), ValueType.ARRAY,
                 [width if t in (ffn, MTP) else 0 for t in layers],
                 ValueType.INT32))
    if moe:
        kv += [u32(Keys.LLM.EXPERT_USED_COUNT.format(arch=arch), r["num_experts_per_tok"]),
               u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=arch), r["moe_intermediate_size"]),
               u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=arch),
                   r["moe_shared_expert_intermediate_size"]),
               u32(Keys.LLM.EXPERT_COUNT.format(arch=arch), r["n_routed_experts"]),
               u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=arch), r["n_shared_experts"]),
               boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=arch), r["norm_topk_prob"]),
               f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=arch), r["routed_scaling_factor"]),
               u32(Keys.LLM.EXPERT_GROUP_COUNT.format(arch=arch), r["n_group"])]
        if r.get("moe_latent_size") is not None:
            kv.append(u32(Keys.LLM.MOE_LATENT_SIZE.format(arch=arch), r["moe_latent_size"]))
        if mtp_blocks(h):
            kv.append(u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=arch), mtp_blocks(h)))
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    """NemotronHModel.set_vocab: TextModel's byte-level BPE over the vocabulary padded to a multiple of 8."""
    from hfview.tokenizer.vocab import gpt2_vocab
    r = as_read(h)
    return gpt2_vocab(model_dir, {**h, "vocab_size": padded_vocab({"vocab_size": r["vocab_size"],
                                                                    "pad_vocab_size_multiple": 8})})


FAMILY = Family(
    name="nemotron_h",
    gguf_arch="nemotron_h",
    architectures=("NemotronHForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    check=check,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    gguf_arch_for=lambda h: "nemotron_h_moe" if is_moe(h) else "nemotron_h",
    extra_blocks=mtp_blocks,
    rename=mtp_rename,
    f32_list_missed=mtp_router_at_outtype,
)
