"""Hy4 (tencent/Hy4-preview: HYV4ForCausalLM) -> llama.cpp `hy_v4` (the converter's HYV4Model, a DeepseekV2Model).

DeepSeek's latent attention (hfview/families/deepseek_v2.py: the query bottleneck, kv_b_proj split into its key
half transposed and its value half) with each head's output gated by sigmoid(linear_gate x) and a learned sink
logit per head (learnable_sink_param), the rope rows as stored: llama.cpp's hy_v4 rotates consecutive pairs.
A DSA indexer (indexer.wq_b, wk, its LayerNorm, weights_proj) on the layers indexer_types calls "full"; the
"shared" ones reuse the last full layer's top-k and store none. Every layer's residual is hc_mult streams mixed in
and out by iHC (hc_attn_layer / hc_mlp_layer: a mixing matrix, a base and two scales; hc_head collapses them
before the final norm). Then per mlp_layer_types a leading dense SwiGLU or DeepSeek-V3's sigmoid router
(e_score_correction_bias for choosing only, no groups), the fused gate_up_proj of all experts split into its gate
and up halves, a clamp of the routed SwiGLU at swiglu_limit, and the shared experts. The MTP layers
(model.mtp_layers) are dropped, as the converter drops them.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, Skip, Split, Tensor, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import f32, u32
from ..views import RowSelection, expert_part
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.latent import latent_parameters, latent_tensors
from ._parts.vocab import gpt2_vocab

ARCH = "hy_v4"

# transformers 5.24's HYV4Config defaults (num_key_value_heads, head_dim, qk_head_dim and the layer lists are
# computed: normalise)
DEFAULTS = {
    "hy_v4": dict(vocab_size=120832, hidden_size=2816, intermediate_size=6912, moe_intermediate_size=768,
                  num_hidden_layers=34, num_attention_heads=32, num_key_value_heads=32, head_dim=256,
                  hidden_act="silu", max_position_embeddings=262144, initializer_range=0.006, rms_norm_eps=1e-5,
                  use_cache=True, pad_token_id=120002, bos_token_id=120000, eos_token_id=120025,
                  tie_word_embeddings=False, attention_bias=False, attention_dropout=0.0, n_routed_experts=256,
                  output_router_logits=False, n_shared_experts=1, num_experts_per_tok=8,
                  routed_scaling_factor=2.827, norm_topk_prob=True, n_group=1, topk_group=1, q_lora_rank=1536,
                  kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
                  mlp_layer_types=None, layer_types=None, index_topk=2048, index_head_dim=128, index_n_heads=16,
                  indexer_types=None, hc_mult=4, hc_magnitude=2.0, hc_eps=1e-6, learnable_sink_init=0.0,
                  swiglu_limit=10.0, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
    "num_attention_heads", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "routed_scaling_factor", "norm_topk_prob",
    "n_group", "topk_group", "mlp_layer_types", "first_k_dense_replace", "swiglu_limit",
    "index_topk", "index_head_dim", "index_n_heads", "indexer_types", "hc_mult", "hc_magnitude", "hc_eps",
    "enable_lm_head_fp32", "num_nextn_predict_layers",
})
HARMLESS: Harmless = {
    # HYV4Config sets num_key_value_heads to num_attention_heads whatever is stated (Hy4-preview states 8), and
    # computes head_dim and qk_head_dim from the rope and key widths
    "num_key_value_heads": ANY, "head_dim": ANY, "qk_head_dim": ANY,
    # transformers' HYV4Model masks every layer by one causal mask ("indexed_attention") whatever layer_types says,
    # and the converter reads layer_types only where indexer_types is absent, which the config class never leaves
    "layer_types": ANY,
    "learnable_sink_init": ANY,  # the sinks' initial value: the stored learnable_sink_param is what runs
    # the router is Glm4MoeLite's sigmoid one whatever these say (no key of HYV4Config), and the converter writes
    # sigmoid gating in any case
    "scoring_func": ("sigmoid",), "topk_method": ("noaux_tc",),
}
ALIASES = {"num_local_experts": "n_routed_experts"}


def _fused_gate_up(part: int):
    """The gate (0) or up (1) half of every expert's fused gate_up_proj rows, as the converter's split_gate_up
    cuts them at moe_intermediate_size."""
    def make(sources, h):
        src, ff = sources[0], h["moe_intermediate_size"]
        if len(src.shape) != 3 or src.shape[1] != 2 * ff:
            raise CheckpointError(f"tensor {src.name!r} has shape {list(src.shape)}: gate_up_proj should be "
                                  f"[experts, 2 x moe_intermediate_size ({2 * ff}), hidden_size]")
        experts = src.shape[0]
        return RowSelection(src, expert_part(experts, 2 * ff, part, 2), ("gate", "up")[part] + " half of each "
                            "expert's gate_up_proj rows", (experts, ff, src.shape[2]))
    return make


_L = "model.layers.{bid}."
_ATTN = _L + "self_attn."
_MLP = _L + "mlp."
_HC = ("fn", "base", "scale")
TENSORS = (
    Skip("model.mtp_layers.{rest}"),  # the converter's filter_tensors drops them unread
    *latent_tensors(),
    *(Tensor(f"model.hc_head.hc_head_{p}", f"output_hc_{p}.weight") for p in _HC),
    *(Tensor(f"{_L}hc_{ours}_layer.hc_pre.hc_{p}", f"blk.{{bid}}.hc_{gguf}_{p}.weight")
      for ours, gguf in (("attn", "attn"), ("mlp", "ffn")) for p in _HC),
    Tensor(_ATTN + "learnable_sink_param", GGUF.ATTN_SINKS.weight),
    Tensor(_ATTN + "linear_gate.weight", GGUF.ATTN_GATE.weight),
    # the indexer, on the "full" layers only (checked against indexer_types in check_layers)
    Tensor(_ATTN + "indexer.wq_b.weight", GGUF.INDEXER_ATTN_Q_B.weight, required=False),
    Tensor(_ATTN + "indexer.wk.weight", GGUF.INDEXER_ATTN_K.weight, required=False),
    Tensor(_ATTN + "indexer.k_norm.{wb}", GGUF.INDEXER_K_NORM.wb, required=False),
    Tensor(_ATTN + "indexer.weights_proj.weight", GGUF.INDEXER_PROJ.weight, required=False),
    # a leading dense layer's FFN or a mixture, by mlp_layer_types (checked in check_layers)
    *(Tensor(f"{_MLP}{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=False) for p in ("gate", "up", "down")),
    Tensor(_MLP + "gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Tensor(_MLP + "gate.e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias, required=False),
    Split(_MLP + "experts.gate_up_proj", ((GGUF.FFN_GATE_EXP.weight, _fused_gate_up(0)),
                                          (GGUF.FFN_UP_EXP.weight, _fused_gate_up(1))), required=False),
    Tensor(_MLP + "experts.down_proj", GGUF.FFN_DOWN_EXP.weight, required=False),
    *(Tensor(f"{_MLP}shared_experts.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=False)
      for p in ("gate", "up", "down")),
)


def normalise(h: dict) -> dict:
    """HYV4Config.__post_init__: no grouped keys, head_dim the rope width, one leading dense layer and then
    mixtures, every layer "indexed_attention", and a full indexer on layer 0 and every fourth layer after layer 1,
    where the lists are unstated."""
    n = h["num_hidden_layers"]
    h["num_key_value_heads"] = h["num_attention_heads"]
    h["qk_head_dim"] = h["qk_nope_head_dim"] + h["qk_rope_head_dim"]
    h["head_dim"] = h["qk_rope_head_dim"]
    if h.get("mlp_layer_types") is None:
        h["mlp_layer_types"] = ["dense"] * min(1, n) + ["sparse"] * max(n - 1, 0)
    if h.get("layer_types") is None:
        h["layer_types"] = ["indexed_attention"] * n
    if h.get("indexer_types") is None:
        h["indexer_types"] = ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n)]
    return h


def _leading_dense(kinds: list) -> int:
    lead = next((i for i, kind in enumerate(kinds) if kind != "dense"), len(kinds))
    return lead


REFUSE = (
    silu_only(ARCH),
    rope_types(ARCH, allowed=("default",)),
    Refuse("attention_bias", unset, f"llama.cpp's {ARCH} has no attention biases, so they would be dropped"),
    Refuse("tie_word_embeddings", unset, f"the converter then writes no output.weight, which llama.cpp's {ARCH} "
           f"requires"),
    Refuse("qk_nope_head_dim", lambda v: not v < 1, f"llama.cpp's {ARCH} needs a key part without rope"),
    Refuse("rope_parameters.partial_rotary_factor", (1.0,), f"llama.cpp's {ARCH} rotates all qk_rope_head_dim "
           f"dimensions", default=1.0),
    *(Refuse(key, bool, f"llama.cpp's {ARCH} needs routed experts and shared experts in every mixture layer")
      for key in ("n_routed_experts", "num_experts_per_tok", "n_shared_experts")),
    Refuse("norm_topk_prob", bool, f"the converter then writes no renormalisation, and llama.cpp's {ARCH} "
           f"renormalises the chosen weights by default where transformers does not"),
    *(Refuse(key, lambda v: not v < 1, f"the converter writes the indexer whatever it is, and llama.cpp's {ARCH} "
             f"then takes the checkpoint as one without sparse attention (top-k 0) or refuses it (no heads); "
             f"transformers' indexer keeps no position at all") for key in ("index_topk", "index_n_heads")),
    Refuse("hc_mult", lambda v: not v < 1, "iHC needs at least one residual stream", default=0),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    n = h["num_hidden_layers"]
    if h["num_experts_per_tok"] > h["n_routed_experts"]:
        raise ConfigError(f"{path}: num_experts_per_tok {h['num_experts_per_tok']} is more than the "
                          f"{h['n_routed_experts']} experts")
    if h.get("n_group") != h.get("topk_group"):
        raise ConfigError(f"{path}: n_group {h.get('n_group')!r}, topk_group {h.get('topk_group')!r}: transformers "
                          f"keeps the best topk_group of n_group expert groups, but llama.cpp's {ARCH} reads no "
                          f"group limit and chooses over all experts")
    # the per-layer lists are checked whole (against the layer count) before their first or leading entries
    kinds = h["mlp_layer_types"]
    if not isinstance(kinds, list) or len(kinds) != n or set(kinds) - {"dense", "sparse"}:
        raise ConfigError(f"{path}: mlp_layer_types {kinds!r}: one of \"dense\" / \"sparse\" per layer ({n} layers)")
    lead = _leading_dense(kinds)
    if "dense" in kinds[lead:]:
        raise ConfigError(f"{path}: mlp_layer_types {kinds!r}: a dense layer after a mixture; the converter and "
                          f"llama.cpp's {ARCH} take only a leading block of dense layers (leading_dense_block_count)")
    if h.get("first_k_dense_replace") is not None and h["first_k_dense_replace"] != lead:
        raise ConfigError(f"{path}: first_k_dense_replace {h['first_k_dense_replace']} disagrees with the {lead} "
                          f"leading dense layers of mlp_layer_types (the converter refuses it)")
    types = h["indexer_types"]
    if not isinstance(types, list) or len(types) != n or set(types) - {"full", "shared"}:
        raise ConfigError(f"{path}: indexer_types {types!r}: one of \"full\" / \"shared\" per layer ({n} layers)")
    if types[0] != "full":
        raise ConfigError(f"{path}: indexer_types[0] {types[0]!r}: layer 0 must own an indexer, nothing precedes "
                          f"it to share (llama.cpp's {ARCH} refuses to load otherwise)")
    if h["index_head_dim"] <= h["qk_rope_head_dim"]:
        raise ConfigError(f"{path}: index_head_dim {h['index_head_dim']} is not more than qk_rope_head_dim "
                          f"{h['qk_rope_head_dim']}: llama.cpp's {ARCH} refuses the indexer")


def check_layers(h: dict, stored: dict) -> list:
    """No KV: each layer stores the FFN its mlp_layer_types entry names and an indexer exactly where
    indexer_types says "full" (llama.cpp reads both from the KV, transformers from the lists)."""
    for i, (kind, index) in enumerate(zip(h["mlp_layer_types"], h["indexer_types"])):
        mlp, attn = f"model.layers.{i}.mlp.", f"model.layers.{i}.self_attn.indexer."
        need = ([f"{mlp}gate.weight", f"{mlp}experts.gate_up_proj", f"{mlp}experts.down_proj",
                 f"{mlp}shared_experts.gate_proj.weight"] if kind == "sparse"
                else [f"{mlp}gate_proj.weight", f"{mlp}up_proj.weight", f"{mlp}down_proj.weight"])
        if index == "full":
            need += [attn + p for p in ("wq_b.weight", "wk.weight", "k_norm.weight", "k_norm.bias",
                                        "weights_proj.weight")]
        for name in need:
            if name not in stored:
                raise CheckpointError(f"tensor {name!r} is missing: layer {i} is {kind} by mlp_layer_types and "
                                      f"{index} by indexer_types; a shard may be missing")
        other = f"{mlp}gate_proj.weight" if kind == "sparse" else f"{mlp}gate.weight"
        if other in stored:
            raise CheckpointError(f"tensor {other!r}: layer {i} is {kind} by mlp_layer_types, but the checkpoint "
                                  f"stores the other kind of FFN there")
        if index == "shared" and any(name.startswith(attn) for name in stored):
            raise CheckpointError(f"layer {i} is \"shared\" by indexer_types but stores indexer tensors "
                                  f"({attn}*): the converter refuses it")
    return []


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """DeepseekV2Model's list (n_group / topk_group left out where both are 1, first_k_dense_replace the leading
    dense layers), then HYV4Model's: sigmoid gating, the routed SwiGLU clamp per layer, iHC's stream count,
    epsilon and post magnitude, and the indexer's heads, width, top-k and which layers own one."""
    h = dict(h)
    if h.get("n_group") == 1 and h.get("topk_group") == 1:
        h.pop("n_group"), h.pop("topk_group")
    h["first_k_dense_replace"] = _leading_dense(h["mlp_layer_types"])
    kv = latent_parameters(h, block_count, file_type, arch=ARCH)
    kv.append(u32(Keys.LLM.EXPERT_GATING_FUNC.format(arch=ARCH), 2))
    if (limit := float(h.get("swiglu_limit") or 0.0)) > 0.0:
        kv.append(KV(Keys.LLM.SWIGLU_CLAMP_EXP.format(arch=ARCH), ValueType.ARRAY, [limit] * block_count,
                     ValueType.FLOAT32))
    kv += [u32(Keys.HyperConnection.COUNT.format(arch=ARCH), h["hc_mult"]),
           f32(Keys.HyperConnection.EPSILON.format(arch=ARCH), h["hc_eps"]),
           f32(Keys.HyperConnection.MAGNITUDE.format(arch=ARCH), h["hc_magnitude"]),
           u32(Keys.Attention.Indexer.HEAD_COUNT.format(arch=ARCH), h["index_n_heads"]),
           u32(Keys.Attention.Indexer.KEY_LENGTH.format(arch=ARCH), h["index_head_dim"]),
           u32(Keys.Attention.Indexer.TOP_K.format(arch=ARCH), h["index_topk"]),
           KV(Keys.Attention.Indexer.TYPES.format(arch=ARCH), ValueType.ARRAY,
              [t == "full" for t in h["indexer_types"]],
              ValueType.BOOL)]
    return kv


_HC_MATRIX = re.compile(r"(hc_attn_fn|hc_ffn_fn|output_hc_fn)\.weight$")


def kept_f32(name: str, h: dict) -> bool:
    """HYV4Model.tensor_force_quant: the iHC mixing matrices, and output.weight where enable_lm_head_fp32."""
    return bool(_HC_MATRIX.search(name)) or (name == GGUF.OUTPUT.weight and bool(h.get("enable_lm_head_fp32")))


FAMILY = Family(
    name="hy_v4",
    gguf_arch=ARCH,
    architectures=("HYV4ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=gpt2_vocab,  # DeepseekV2Model.set_vocab: byte-level BPE
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    stored_kv=check_layers,
    aliases=ALIASES,
    kept_f32=kept_f32,
)
