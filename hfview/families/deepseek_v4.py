"""DeepSeek-V4 (DeepSeek-V4-Flash / -Pro as released: DeepseekV4ForCausalLM) -> llama.cpp `deepseek4` (the converter's
DeepseekV4Model, conversion/deepseek.py).

Every layer: four hyper-connection streams (hc_mult; mixes hc_{attn,ffn}_{fn,base,scale} projected onto doubly
stochastic matrices by Sinkhorn steps, and hc_head_* before the output), a query bottleneck, one shared KV head
(wkv, kv_norm) with attention sinks, a grouped low-rank output projection (wo_a over o_groups, wo_b), a sliding window
over the raw keys, and where compress_ratios says 4 or 128 a compressor of the keys (ape, wkv, wgate, norm), the 4:1
layers with a lightning indexer (wq_b, weights_proj, its own compressor); a mixture of routed experts (sqrtsoftplus
scores, a selection bias, clamped SwiGLU at swiglu_limit) and shared ones, the first num_hash_layers routing each token
by a table (tid2eid) instead.

The converter reads DeepSeek's own tensor names and only the released quantized form: each routed expert's w1/w2/w3
as an MXFP4 pair (`.weight` packed e2m1 codes, `.scale` E8M0 exponents per 32), repacked bits only into ggml MXFP4
stacks (views.MXFP4ExpertStack), written first after the hash tables (int32); a weight stored FP8 beside an E8M0
`.scale` is dequantized over [128, 128] blocks and written Q8_0; every other matrix keeps its stored dtype (bf16 as
BF16, f32 as F32) whatever the outtype; the file type is MOSTLY_MXFP4_MOE. So all outtypes give one file. The
next-token-prediction layers (`mtp.*`) are skipped, as the converter skips them without --mtp. The converter writes
the chat template from its own tree (models/templates/deepseek-ai-DeepSeek-V4*.jinja: deepseek_v4_templates.py).
"""
from __future__ import annotations

import re
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, Stacked, Tensor, unset
from ..gguf_layout import KV, ValueType
from ..names import Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..shards import index_shards
from ..views import KeptType, MXFP4ExpertStack, Stored, deepseek_v4_stored
from ._parts.vocab import gpt2_vocab

ARCH = "deepseek4"

# transformers 5.24's DeepseekV4Config defaults (layer_types, mlp_layer_types, compress_rates, partial_rotary_factor
# and rope_parameters it computes from the released keys; qk_rope_head_dim: normalise; the converter reads
# compress_ratios and num_hash_layers from config.json itself, which the config class folds into other fields)
DEFAULTS = {
    "deepseek_v4": dict(vocab_size=129280, hidden_size=4096, moe_intermediate_size=2048, num_hidden_layers=43,
                        num_attention_heads=64, num_key_value_heads=1, head_dim=512, q_lora_rank=1024,
                        num_experts_per_tok=6, n_routed_experts=256, n_shared_experts=1, scoring_func="sqrtsoftplus",
                        norm_topk_prob=True, routed_scaling_factor=1.5, max_position_embeddings=1048576,
                        rope_theta=10000.0, compress_rope_theta=160000.0, qk_rope_head_dim=None,
                        hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6, swiglu_limit=10.0,
                        sliding_window=128, o_groups=8, o_lora_rank=1024, index_n_heads=64, index_head_dim=128,
                        index_topk=512, num_nextn_predict_layers=1, output_router_logits=False,
                        router_aux_loss_coef=0.001, router_jitter_noise=0.0, hidden_act="silu",
                        initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True, pad_token_id=None, bos_token_id=0,
                        eos_token_id=1, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                        attention_dropout=0.0),
}

READS = frozenset({
    "vocab_size", "hidden_size", "moe_intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "q_lora_rank", "qk_rope_head_dim", "num_experts_per_tok", "n_routed_experts",
    "n_shared_experts", "scoring_func", "norm_topk_prob", "routed_scaling_factor", "max_position_embeddings",
    "rope_theta", "rope_scaling", "compress_ratios", "compress_rope_theta", "hc_mult", "hc_sinkhorn_iters", "hc_eps",
    "num_hash_layers", "swiglu_limit", "sliding_window", "o_groups", "o_lora_rank", "index_n_heads",
    "index_head_dim", "index_topk", "num_nextn_predict_layers", "rms_norm_eps", "tie_word_embeddings",
    "attention_bias", "mlp_bias", "hidden_act", "topk_method", "expert_dtype",
})
# the router's training-only knobs, and what transformers computes from the released keys when they are absent
HARMLESS: Harmless = {"output_router_logits": ANY, "router_aux_loss_coef": ANY, "router_jitter_noise": (0.0, 0),
                      "initializer_range": ANY, "layer_types": (None,), "mlp_layer_types": (None,),
                      "compress_rates": (None,), "partial_rotary_factor": (None,)}

_MOSTLY_MXFP4_MOE = 38
_HC_STREAMS = 4  # llama.cpp's deepseek4 asserts four hyper-connection streams (src/models/deepseek4.cpp)
_RATIOS = (0, 4, 128)  # the compressions llama.cpp's loader and transformers' layer types know

REFUSE = (
    Refuse("scoring_func", ("sqrtsoftplus",), f"llama.cpp's {ARCH} loader requires sqrtsoftplus MoE scoring"),
    Refuse("hc_mult", (_HC_STREAMS,), f"llama.cpp's {ARCH} graph asserts {_HC_STREAMS} hyper-connection streams"),
    Refuse("hidden_act", ("silu",), f"llama.cpp's {ARCH} computes its experts' SwiGLU with silu"),
    Refuse("attention_bias", unset, f"llama.cpp's {ARCH} has no attention biases"),
    Refuse("mlp_bias", unset, f"llama.cpp's {ARCH} has no FFN biases"),
    Refuse("tie_word_embeddings", unset, f"llama.cpp's {ARCH} needs an output matrix of its own (head.weight)"),
    Refuse("norm_topk_prob", (True,), "transformers' DeepseekV4 routers always renormalise the chosen weights"),
    # measured: without rope_scaling the converter writes the base alone (no scaling), as transformers' compressed
    # layers then rotate by plain rope
    Refuse("rope_parameters.rope_type", ("default", "yarn"), "DeepSeek-V4 is released with yarn over its compressed "
           "layers (transformers applies no other kind there); the view presents yarn or none", default="default"),
)


def check(h: dict, path: Path) -> None:
    for key in ("compress_ratios", "num_hash_layers"):
        if key not in h:
            raise ConfigError(f"{path}: no {key}: the converter's DeepseekV4Model reads it from config.json (every "
                              f"DeepSeek-V4 release states it) and fails without it")
    n = h["num_hidden_layers"]
    ratios = h["compress_ratios"]
    if not isinstance(ratios, list) or len(ratios) < n or any(r not in _RATIOS for r in ratios):
        raise ConfigError(f"{path}: compress_ratios {ratios!r}: one of {list(_RATIOS)} per layer (at least "
                          f"num_hidden_layers = {n}), the compressions llama.cpp's {ARCH} and transformers know")
    if not 0 <= h["num_hash_layers"] <= n:
        raise ConfigError(f"{path}: num_hash_layers {h['num_hash_layers']}: between 0 and num_hidden_layers ({n})")
    if h.get("num_key_value_heads") != 1:
        raise ConfigError(f"{path}: num_key_value_heads {h.get('num_key_value_heads')}: DeepSeek-V4 attends over one "
                          f"shared KV head (wkv), as llama.cpp's {ARCH} and transformers compute it")
    if h.get("topk_method", "noaux_tc") != "noaux_tc":
        raise ConfigError(f"{path}: topk_method {h['topk_method']!r}: transformers' DeepseekV4 router adds the "
                          f"selection bias (noaux_tc), as llama.cpp's {ARCH} does")


def normalise(h: dict) -> dict:
    """DeepseekV4Config.__post_init__'s qk_rope_head_dim where config.json does not state it: head_dim times its
    default partial rotary factor (64 of 512), which its to_dict gives the converter."""
    if h.get("qk_rope_head_dim") is None:
        h["qk_rope_head_dim"] = int(h["head_dim"] * (h.get("partial_rotary_factor") or 64 / 512))
    return h


def _arch(key: str) -> str:
    return key.format(arch=ARCH)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's list over the converter's hparams (its rope from the released rope_scaling, no
    feed_forward_length: DeepseekV4Config has no intermediate_size of its own), then DeepseekV4Model's."""
    # the file type MOSTLY_MXFP4_MOE at every outtype: DeepseekV4Model.prepare_tensors sets it after its tensors
    kv = text_model_parameters({k: v for k, v in h.items() if k != "intermediate_size"}, ARCH, block_count,
                               _MOSTLY_MXFP4_MOE)
    n = block_count

    def array(key: str, values: list, kind: ValueType) -> KV:
        return KV(_arch(key), ValueType.ARRAY, values, kind)

    return kv + [
        u32(_arch(Keys.Rope.DIMENSION_COUNT), h["qk_rope_head_dim"]),
        u32(f"{ARCH}.attention.q_lora_rank", h["q_lora_rank"]),
        u32(_arch(Keys.Attention.SLIDING_WINDOW), h["sliding_window"]),
        u32(_arch(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH), h["moe_intermediate_size"]),
        u32(f"{ARCH}.expert_shared_count", h["n_shared_experts"]),
        f32(f"{ARCH}.expert_weights_scale", h["routed_scaling_factor"]),
        boolean(f"{ARCH}.expert_weights_norm", h["norm_topk_prob"]),
        array("{arch}.swiglu_clamp_exp", [float(h["swiglu_limit"])] * n, ValueType.FLOAT32),
        array("{arch}.swiglu_clamp_shexp", [float(h["swiglu_limit"])] * n, ValueType.FLOAT32),
        u32(f"{ARCH}.attention.indexer.head_count", h["index_n_heads"]),
        u32(f"{ARCH}.attention.indexer.key_length", h["index_head_dim"]),
        u32(f"{ARCH}.attention.indexer.top_k", h["index_topk"]),
        u32(f"{ARCH}.attention.output_group_count", h["o_groups"]),
        u32(f"{ARCH}.attention.output_lora_rank", h["o_lora_rank"]),
        array("{arch}.attention.compress_ratios", list(h["compress_ratios"]), ValueType.INT32),
        f32(f"{ARCH}.attention.compress_rope_freq_base", h["compress_rope_theta"]),
        u32(f"{ARCH}.hyper_connection.count", h["hc_mult"]),
        u32(f"{ARCH}.hyper_connection.sinkhorn_iterations", h["hc_sinkhorn_iters"]),
        f32(f"{ARCH}.hyper_connection.epsilon", h["hc_eps"]),
        u32(f"{ARCH}.hash_layer_count", h["num_hash_layers"]),
        u32(f"{ARCH}.embedding_length_out", h["hidden_size"] * h["hc_mult"]),
    ]


def template_kv(h: dict, stored: dict) -> list:
    """The chat template DeepseekV4Model.__init__ writes from the converter's own tree, chosen by the checkpoint
    directory's name (its model id hint), before any other key but the architecture."""
    from hfview.tokenizer.special import CHAT_TEMPLATE

    from ._parts.deepseek_v4_templates import FLASH_0731, V4
    folder = next(iter(stored.values())).path.parent.name if stored else ""
    return [KV(CHAT_TEMPLATE, ValueType.STRING, FLASH_0731 if "0731" in folder else V4)]


def _experts(sources, h):
    return MXFP4ExpertStack(tuple(sources))


def _kept(sources, h):
    """The stored dtype decides the type (KeptType), as DeepseekV4Model.tensor_force_quant decides it."""
    return KeptType(Stored(sources[0]))


def rename(name: str, h: dict) -> str:
    """A hash layer's selection bias (unused: tid2eid routes its tokens) is dropped by the converter."""
    m = re.match(r"layers\.(\d+)\.ffn\.gate\.bias$", name)
    return f"unused_hash_layer_bias.{m.group(1)}" if m and int(m.group(1)) < h["num_hash_layers"] else name


def index(path: Path) -> dict:
    return deepseek_v4_stored(index_shards(path))


def vocab(model_dir: Path, h: dict) -> list:
    """TextModel.set_vocab: byte-level BPE."""
    return gpt2_vocab(model_dir, h)


_L = "layers.{bid}."
_EXPERT = _L + "ffn.experts.{x}."
_OPTIONAL = ("attn.compressor.", "attn.indexer.", "ffn.gate.bias")  # by the layer's compression / routing

# DeepSeek's names -> the converter's GGUF names (_map_dsv4_tensor_name), each matrix in the type its stored dtype
# decides (KeptType)
_NAMES = {
    "embed.weight": "token_embd.weight", "head.weight": "output.weight", "hc_head_fn": "output_hc_fn.weight",
    "hc_head_base": "output_hc_base.weight", "hc_head_scale": "output_hc_scale.weight",
    **{_L + f"hc_{p}_{leaf}": f"blk.{{bid}}.hc_{p}_{leaf}.weight" for p in ("attn", "ffn")
       for leaf in ("fn", "base", "scale")},
    _L + "attn.attn_sink": "blk.{bid}.attn_sinks.weight",
    _L + "attn.wq_a.weight": "blk.{bid}.attn_q_a.weight", _L + "attn.wq_b.weight": "blk.{bid}.attn_q_b.weight",
    _L + "attn.q_norm.weight": "blk.{bid}.attn_q_a_norm.weight", _L + "attn.wkv.weight": "blk.{bid}.attn_kv.weight",
    _L + "attn.kv_norm.weight": "blk.{bid}.attn_kv_a_norm.weight",
    _L + "attn.wo_a.weight": "blk.{bid}.attn_output_a.weight",
    _L + "attn.wo_b.weight": "blk.{bid}.attn_output_b.weight",
    **{_L + f"attn.{w}compressor.{leaf}": f"blk.{{bid}}.{g}_compressor_{n}.weight"
       for w, g in (("", "attn"), ("indexer.", "indexer"))
       for leaf, n in (("ape", "ape"), ("wkv.weight", "kv"), ("wgate.weight", "gate"), ("norm.weight", "norm"))},
    _L + "attn.indexer.wq_b.weight": "blk.{bid}.indexer.attn_q_b.weight",
    _L + "attn.indexer.weights_proj.weight": "blk.{bid}.indexer.proj.weight",
    _L + "attn_norm.weight": "blk.{bid}.attn_norm.weight", _L + "ffn_norm.weight": "blk.{bid}.ffn_norm.weight",
    _L + "ffn.gate.weight": "blk.{bid}.ffn_gate_inp.weight", _L + "ffn.gate.bias": "blk.{bid}.exp_probs_b.bias",
    _L + "ffn.gate.bias_vl": "blk.{bid}.exp_probs_b_vl.bias",
    **{_L + f"ffn.shared_experts.w{k}.weight": f"blk.{{bid}}.ffn_{g}_shexp.weight"
       for k, g in ((1, "gate"), (2, "down"), (3, "up"))},
}

TENSORS = (
    Tensor(_L + "ffn.gate.tid2eid", "blk.{bid}.ffn_gate_tid2eid.weight", _kept, required=False),
    *(Stacked(_EXPERT + f"w{k}.weight", f"blk.{{bid}}.ffn_{g}_exps.weight", "n_routed_experts", group="experts",
              view=_experts) for k, g in ((1, "gate"), (2, "down"), (3, "up"))),
    Tensor("norm.weight", "output_norm.weight"),
    *(Tensor(hf, gguf, _kept, required=not hf.removeprefix(_L).startswith(_OPTIONAL + ("ffn.gate.bias_vl",)))
      for hf, gguf in _NAMES.items()),
    Skip("unused_hash_layer_bias.{rest}"),
    Skip("mtp.{rest}"),  # the MTP layers, which the converter skips without --mtp
)


FAMILY = Family(
    name="deepseek_v4",
    gguf_arch=ARCH,
    architectures=("DeepseekV4ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    stored_kv=template_kv,
    index=index,
    rename=rename,
    aliases={"num_local_experts": "n_routed_experts"},  # DeepseekV4Config's attribute map
    # llama.cpp's deepseek4 applies the window over the raw keys (LLAMA_SWA_TYPE_STANDARD, n_swa), as transformers
    # does: past the 8-token window of the fixtures the logits agree (test_without_the_experts_...)
    runner=RunnerFacts(llama_cpp_applies_window=True),
)
