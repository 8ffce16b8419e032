"""DBRX (DbrxForCausalLM) -> llama.cpp `dbrx` (the converter's DbrxModel).

LayerNorms without bias, one fused Wqkv (q, k, v in that order, rotate-half rope: as stored) clamped at
clip_qkv, and a mixture in every layer whose experts are stored fused: one [experts x ffn, d_model] tensor per
projection (w1 gate, v1 up, w2 down; no `.weight` suffix). The converter views w1 and v1 as [experts, ffn,
d_model] and transposes each expert of w2, which is stored inputs-first (views.Transposed over expert
blocks). Its own short hyperparameter list comes from attn_config and ffn_config, with a LayerNorm epsilon of
1e-5; every matrix, the router included, is written at the outtype (its tensor_force_quant).

transformers 5.24 no longer reads attn_config.rope_theta: DBRX as released (rope_theta 500000 there only) runs
in transformers with the default 10000, while the converter writes 500000, the theta DBRX was trained with.
tests/test_family_dbrx.py measures that ceiling on a released-layout fixture and shows the view matches
transformers once transformers rotates with the written theta.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, COMMON_HARMLESS, Harmless
from ..errors import ConfigError, shown
from ..family import Family, Refuse, Tensor, unset
from ..names import GGUF, Keys
from ..params import f32, u32
from ..views import Reshaped, Transposed

# transformers 5.24's DbrxAttentionConfig and DbrxFFNConfig fields that reach the converter (its sub-config
# dicts); the attention config has no rope_theta default (the converter fails where none is stated)
ATTN_DEFAULTS = dict(attn_pdrop=0.0, clip_qkv=None, kv_n_heads=1)
FFN_DEFAULTS = dict(ffn_act_fn={"name": "silu"}, ffn_hidden_size=3584, moe_num_experts=4, moe_top_k=1,
                    moe_jitter_eps=None, moe_loss_weight=0.01, moe_normalize_expert_weights=1.0)

# transformers 5.24's DbrxConfig defaults
DEFAULTS = {
    "dbrx": dict(d_model=2048, n_heads=16, n_layers=24, max_seq_len=2048, vocab_size=32000, resid_pdrop=0.0,
                 emb_pdrop=0.0, attn_config=ATTN_DEFAULTS, ffn_config=FFN_DEFAULTS, use_cache=True,
                 initializer_range=0.02, output_router_logits=False,
                 rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, pad_token_id=None,
                 bos_token_id=None, eos_token_id=None, tie_word_embeddings=False),
}

READS = frozenset({
    "d_model", "n_heads", "n_layers", "max_seq_len", "vocab_size", "attn_config", "ffn_config",
    "tie_word_embeddings",
    # what DbrxConfig computes from attn_config (kv_n_heads), saved beside it by transformers 5
    "num_key_value_heads",
    # transformers 5.24 rotates with these; the converter writes attn_config.rope_theta (see the module note)
    "rope_parameters", "rope_scaling", "rope_theta",
})
HARMLESS: Harmless = {"resid_pdrop": ANY, "emb_pdrop": ANY}

# sub-config keys: read, or harmless (dropout, training noise and loss weights; ffn_config.hidden_size, which
# DbrxConfig sets to d_model; and the generic fields every transformers config carries, which released DBRX
# configs dump into both sub-configs: return_dict, temperature, max_length, tie_word_embeddings, ...: inside a
# sub-config they configure nothing)
_SUB_COMMON = set(COMMON_HARMLESS) | {"tie_word_embeddings"}
_ATTN_KEYS = {"clip_qkv", "kv_n_heads", "rope_theta", "attn_pdrop"} | _SUB_COMMON
_FFN_KEYS = {"ffn_act_fn", "ffn_hidden_size", "moe_num_experts", "moe_top_k", "moe_normalize_expert_weights",
             "moe_jitter_eps", "moe_loss_weight", "hidden_size"} | _SUB_COMMON
# the release's remote-code DbrxFFNConfig option (a benchmarking switch), which transformers' DbrxFFN does not
# read: harmless off, refused on
_FFN_OFF = {"uniform_expert_assignment": False}
# DbrxFFNConfig (transformers 5.24, strict) takes these as floats only and refuses the whole config on an integer,
# after which the converter reads the raw config.json instead of the config class's view of it
_FLOAT_ONLY = ("moe_normalize_expert_weights", "moe_loss_weight")


def _as_stack(proj: str):
    """w1 / v1: [experts x ffn, d_model] presented [experts, ffn, d_model] (the same rows)."""
    def make(sources, h):
        ffn = h["ffn_config"]
        shape = (ffn["moe_num_experts"], ffn["ffn_hidden_size"], h["d_model"])
        return Reshaped(sources[0], shape, f"{proj} viewed as [experts, ffn, d_model]")
    return make


def _down_stack(sources, h):
    """w2: each expert's [ffn, d_model] block stored inputs-first, presented [experts, d_model, ffn]."""
    return Transposed(sources[0], blocks=h["ffn_config"]["moe_num_experts"])


_BLOCK = "transformer.blocks.{bid}."
TENSORS = (
    Tensor("transformer.wte.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("transformer.norm_f.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_BLOCK + "norm_attn_norm.norm_1.weight", GGUF.ATTN_NORM.weight),
    Tensor(_BLOCK + "norm_attn_norm.attn.Wqkv.weight", GGUF.ATTN_QKV.weight),
    Tensor(_BLOCK + "norm_attn_norm.attn.out_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(_BLOCK + "norm_attn_norm.norm_2.weight", GGUF.ATTN_OUT_NORM.weight),
    Tensor(_BLOCK + "ffn.router.layer.weight", GGUF.FFN_GATE_INP.weight),
    Tensor(_BLOCK + "ffn.experts.mlp.w1", GGUF.FFN_GATE_EXP.weight, _as_stack("w1")),
    Tensor(_BLOCK + "ffn.experts.mlp.v1", GGUF.FFN_UP_EXP.weight, _as_stack("v1")),
    Tensor(_BLOCK + "ffn.experts.mlp.w2", GGUF.FFN_DOWN_EXP.weight, _down_stack),
)


def _sub(h: dict, key: str, defaults: dict) -> dict:
    stated = h.get(key) or {}
    if not isinstance(stated, dict):
        raise ConfigError(f"{key} must be a JSON object, found {shown(stated)}")
    return {**defaults, **stated}


def normalise(h: dict) -> dict:
    """DbrxConfig's constructor: each sub-config with its class's defaults; the KV heads are attn_config's."""
    h["attn_config"] = _sub(h, "attn_config", ATTN_DEFAULTS)
    h["ffn_config"] = _sub(h, "ffn_config", FFN_DEFAULTS)
    h["num_key_value_heads"] = h["attn_config"]["kv_n_heads"]
    return h


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1 << 32


def _positive_number(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and v > 0


def _silu(act) -> bool:
    return isinstance(act, dict) and act.get("name", "silu") == "silu" and not set(act) - {"name"}


REFUSE = (
    # `is`: off is a bool, and a tuple (False,) would also let 0 pass
    *(Refuse(f"ffn_config.{key}", lambda v, off=off: v is off, f"transformers' DBRX does not read it and computes "
             f"as if it were {off}, so this checkpoint would run as a model it is not", default=off)
      for key, off in _FFN_OFF.items()),
    *(Refuse(f"ffn_config.{key}", lambda v: not isinstance(v, int) or isinstance(v, bool), "an integer: "
             "transformers 5.24's DbrxFFNConfig takes a float only and refuses this config, so the converter would "
             "read the raw config.json instead; write it as a float") for key in _FLOAT_ONLY),
    *(Refuse(key, _positive_int, "expected an integer >= 1") for key in (
        "attn_config.kv_n_heads", "ffn_config.ffn_hidden_size", "ffn_config.moe_num_experts", "ffn_config.moe_top_k")),
    Refuse("attn_config.rope_theta", _positive_number, "expected a number > 0; the converter writes it as DBRX's rope "
           "base and fails without it (KeyError), as every released DBRX states it"),
    Refuse("attn_config.clip_qkv", _positive_number, "the converter writes it as the clamp of q, k, v (a number > 0, "
           "as every released DBRX has 8) and fails on anything else"),
    Refuse("ffn_config.ffn_act_fn", _silu, "llama.cpp's dbrx computes SwiGLU (SiLU) only; this checkpoint would run "
           "wrong"),
    Refuse("ffn_config.moe_normalize_expert_weights", (1,), "llama.cpp's dbrx renormalises the chosen experts' "
           "weights to sum to one (a p-norm of 1) and nothing else"),
    Refuse("rope_parameters.rope_type", ("default",), "the converter writes no rope scaling for dbrx, so llama.cpp "
           "would rotate unscaled", default="default"),
    Refuse("tie_word_embeddings", unset, "DbrxConfig refuses it and llama.cpp's dbrx needs an output matrix of its "
           "own"),
)


def check(h: dict, path: Path) -> None:
    attn, ffn = h["attn_config"], h["ffn_config"]
    for where, sub, known in (("attn_config", attn, _ATTN_KEYS), ("ffn_config", ffn, _FFN_KEYS | set(_FFN_OFF))):
        unknown = sorted(set(sub) - known)
        if unknown:
            raise ConfigError(f"{path}: config key {where}.{unknown[0]} (= {shown(sub[unknown[0]])}) is not one the "
                              f"dbrx family knows; hfview will not guess whether it changes the model")
    if ffn["moe_top_k"] > ffn["moe_num_experts"]:
        raise ConfigError(f"{path}: ffn_config.moe_top_k {ffn['moe_top_k']} is more than the "
                          f"{ffn['moe_num_experts']} experts")
    if h["n_heads"] % attn["kv_n_heads"] or h["d_model"] % h["n_heads"]:
        raise ConfigError(f"{path}: d_model {h['d_model']}, n_heads {h['n_heads']}, attn_config.kv_n_heads "
                          f"{attn['kv_n_heads']}: the heads do not split d_model and the KV heads evenly")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """DbrxModel.set_gguf_parameters, in its order."""
    attn, ffn = h["attn_config"], h["ffn_config"]
    return [
        u32(Keys.LLM.BLOCK_COUNT.format(arch="dbrx"), block_count),
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch="dbrx"), h["max_seq_len"]),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="dbrx"), h["d_model"]),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="dbrx"), ffn["ffn_hidden_size"]),
        u32(Keys.Attention.HEAD_COUNT.format(arch="dbrx"), h["n_heads"]),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch="dbrx"), attn["kv_n_heads"]),
        f32(Keys.Rope.FREQ_BASE.format(arch="dbrx"), attn["rope_theta"]),
        f32(Keys.Attention.CLAMP_KQV.format(arch="dbrx"), attn["clip_qkv"]),
        u32(Keys.LLM.EXPERT_COUNT.format(arch="dbrx"), ffn["moe_num_experts"]),
        u32(Keys.LLM.EXPERT_USED_COUNT.format(arch="dbrx"), ffn["moe_top_k"]),
        f32(Keys.Attention.LAYERNORM_EPS.format(arch="dbrx"), 1e-5),
        u32(Keys.General.FILE_TYPE, file_type),
    ]


def vocab(model_dir: Path, h: dict) -> list:
    """TextModel.set_vocab: byte-level BPE."""
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="dbrx",
    gguf_arch="dbrx",
    architectures=("DbrxForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    matrices_at_outtype=True,
    notes={"ceiling": "transformers 5.24 ignores attn_config.rope_theta, which the converter writes: released "
                      "configs are tested against the converter's own file's measured miss"},
)
