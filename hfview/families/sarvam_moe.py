"""Sarvam-MoE (Sarvam-30B: SarvamMoEForCausalLM) -> llama.cpp `bailingmoe2` (the converter's SarvamMoEModel, a
BailingMoeV2Model with full rotary and a centred selection bias).

Ling 2.0's block under Sarvam's name; transformers 5.24 runs it as Glm4MoeForCausalLM over the release's tensor
names: one fused query_key_value (q rows, then k, then v: llama.cpp's attn_qkv as stored), per-head q/k RMSNorms
(`query_layernorm`, `key_layernorm`), rotate-half rope over the whole head, first_k_dense_replace leading dense
SwiGLU layers, then mixtures: a sigmoid router (`mlp.gate`) whose top-k choice adds `mlp.gate.expert_bias`
(exp_probs_b; the converter subtracts its mean, which changes no choice), group limits (n_group, topk_group),
the chosen weights renormalised where norm_topk_prob says and times routed_scaling_factor, per-expert SwiGLUs
stacked down, gate, up, and one always-on shared expert.

The pinned converter reads num_experts and num_shared_experts, the release's names, which transformers 5.24's
SarvamMoEConfig reads into n_routed_experts and n_shared_experts: through AutoConfig it fails ("could not find
any of: ['num_local_experts', 'num_experts']"). The view presents what it writes had the names survived
(tests/converter_variant.py).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Experts, Family, Refuse, Tensor
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..views import MINUS_MEAN
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.vocab import gpt2_vocab

ARCH = "bailingmoe2"

# transformers 5.24's SarvamMoEConfig defaults
DEFAULTS = {
    "sarvam_moe": dict(vocab_size=262144, hidden_size=4096, intermediate_size=8192, num_hidden_layers=19,
                       num_attention_heads=64, num_key_value_heads=4, hidden_act="silu", max_position_embeddings=131072,
                       initializer_range=0.006, rms_norm_eps=1e-06, use_cache=True, tie_word_embeddings=False,
                       rope_parameters={"rope_theta": 8000000.0, "partial_rotary_factor": 1.0, "rope_type": "default"},
                       attention_bias=False, attention_dropout=0.0, moe_intermediate_size=1024, num_experts_per_tok=6,
                       output_router_logits=False, n_shared_experts=1, n_routed_experts=128,
                       routed_scaling_factor=2.5, n_group=1, topk_group=1, first_k_dense_replace=1,
                       norm_topk_prob=True, use_qk_norm=True, bos_token_id=None, eos_token_id=1, pad_token_id=0,
                       num_nextn_predict_layers=0, head_dim=64),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings",
    "attention_bias", "use_qk_norm",  # checked: no q/k/v biases, q/k norms there (llama.cpp's bailingmoe2 layout)
    "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts",
    "moe_shared_expert_intermediate_size",  # checked: the shared expert's width transformers builds
    "routed_scaling_factor", "n_group", "topk_group", "first_k_dense_replace", "norm_topk_prob",
    "score_function",  # the gating function the converter writes: sigmoid, as transformers scores
    "num_nextn_predict_layers",  # checked: none (transformers' class has no MTP layers)
    # the release's names of those keys (ALIASES), read as the class reads them
    "num_local_experts", "num_experts", "num_shared_experts", "num_mtp_layers", "use_qkv_bias",
})
HARMLESS: Harmless = {}
# SarvamMoEConfig's attribute map: the release's names (and its remote code's) read as the class's keys
ALIASES = {"num_local_experts": "n_routed_experts", "num_experts": "n_routed_experts",
           "num_shared_experts": "n_shared_experts", "num_mtp_layers": "num_nextn_predict_layers",
           "use_qkv_bias": "attention_bias"}

_L = "model.layers.{bid}."
_MLP = _L + "mlp."
TENSORS = (
    Tensor("model.word_embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "attention.query_key_value.weight", GGUF.ATTN_QKV.weight),
    Tensor(_L + "attention.dense.weight", GGUF.ATTN_OUT.weight),
    Tensor(_L + "attention.query_layernorm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor(_L + "attention.key_layernorm.weight", GGUF.ATTN_K_NORM.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    # the leading dense layers' FFN, or a mixture: which layer holds which is checked in stored_kv
    *(Tensor(f"{_MLP}{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}.weight", required=False)
      for proj in ("gate", "up", "down")),
    Tensor(_MLP + "gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Tensor(_MLP + "gate.expert_bias", GGUF.FFN_EXP_PROBS_B.bias, steps=(MINUS_MEAN,), required=False),
    *(Experts(f"{_MLP}experts.{{x}}.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}_exps.weight", "n_routed_experts",
              required=False) for proj in ("down", "gate", "up")),
    *(Tensor(f"{_MLP}shared_experts.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}_shexp.weight", required=False)
      for proj in ("gate", "up", "down")),
)


def head_dim(h: dict) -> int:
    return h.get("head_dim") or h["hidden_size"] // h["num_attention_heads"]


def check_block(h: dict, path: Path, arch: str = ARCH, *, one_shared: bool = True) -> None:
    """What llama.cpp's bailingmoe2 graph computes, against a config transformers computes otherwise.
    `one_shared` False: the family checks its shared experts' count and width itself (Param2's two, fused)."""
    silu_only(arch).apply(h, path)
    rope_types(arch).apply(h, path)
    check_no_pooling(path)
    if h.get("attention_bias"):
        raise ConfigError(f"{path}: attention_bias true: llama.cpp's {arch} loads no q/k/v biases, so they would "
                          f"be dropped")
    if not h.get("use_qk_norm", True):
        raise ConfigError(f"{path}: use_qk_norm false: llama.cpp's {arch} always applies per-head q/k RMSNorms")
    if h.get("tie_word_embeddings"):
        raise ConfigError(f"{path}: tie_word_embeddings true: llama.cpp's {arch} needs an output matrix of its own, "
                          f"which a tied checkpoint does not store")
    if head_dim(h) * h["num_attention_heads"] != h["hidden_size"]:
        raise ConfigError(f"{path}: head_dim {head_dim(h)} x {h['num_attention_heads']} heads is not hidden_size "
                          f"{h['hidden_size']}; llama.cpp's {arch} sizes its fused attn_qkv by hidden_size")
    if not h.get("n_routed_experts"):
        raise ConfigError(f"{path}: {h.get('n_routed_experts')!r} experts: llama.cpp's {arch} needs a mixture")
    if one_shared and h.get("n_shared_experts") != 1:
        raise ConfigError(f"{path}: n_shared_experts {h.get('n_shared_experts')!r}: llama.cpp's {arch} loads one "
                          f"shared FFN of the written shared width times the shared count again, which fits only "
                          f"a single shared expert (every release has one)")
    stated = h.get("moe_shared_expert_intermediate_size")
    if one_shared and stated is not None and stated != h["moe_intermediate_size"] * h["n_shared_experts"]:
        raise ConfigError(f"{path}: moe_shared_expert_intermediate_size {stated}: transformers builds the shared "
                          f"expert moe_intermediate_size x n_shared_experts = "
                          f"{h['moe_intermediate_size'] * h['n_shared_experts']} wide, the converter writes {stated}")
    if "score_function" not in h:
        raise ConfigError(f"{path}: no score_function: transformers scores experts by sigmoid, but without the key "
                          f"the converter writes no gating function, which llama.cpp's {arch} requires; state "
                          f"score_function \"sigmoid\" as the releases do (transformers 5 leaves it out on save)")
    if h["score_function"] != "sigmoid":
        raise ConfigError(f"{path}: score_function {h['score_function']!r}: transformers scores experts by "
                          f"sigmoid only")
    n_group, topk_group, n_expert = h.get("n_group") or 1, h.get("topk_group") or 1, h["n_routed_experts"]
    if n_group > 1 and (n_expert % n_group or n_expert // n_group < 2 or not 0 < topk_group < n_group):
        raise ConfigError(f"{path}: n_group {n_group}, topk_group {topk_group} over {n_expert} experts: llama.cpp's "
                          f"{arch} keeps topk_group (fewer than n_group) of n_group equal groups of at least two")
    if h.get("num_nextn_predict_layers"):
        raise ConfigError(f"{path}: num_nextn_predict_layers {h['num_nextn_predict_layers']}: transformers' class "
                          f"has no next-token-prediction layers; the view presents the main model only")
    if h["num_experts_per_tok"] > n_expert:
        raise ConfigError(f"{path}: num_experts_per_tok {h['num_experts_per_tok']} is more than the {n_expert} "
                          f"experts")


REFUSE = (
    Refuse("rope_parameters.partial_rotary_factor", (1.0,), "the converter writes Sarvam's rope over the whole head, "
           "so a partial rotary would run wrong in llama.cpp", default=1.0),
)


def check_layers(h: dict, stored: dict) -> list:
    """No KV: each layer holds the FFN llama.cpp's bailingmoe2 loads for it (dense before first_k_dense_replace,
    then a router, experts and the shared expert)."""
    for i in range(h["num_hidden_layers"]):
        mlp = f"model.layers.{i}.mlp."
        mixture = i >= h["first_k_dense_replace"]
        need = ([f"{mlp}gate.weight", f"{mlp}experts.0.gate_proj.weight", f"{mlp}shared_experts.gate_proj.weight"]
                if mixture else [f"{mlp}gate_proj.weight", f"{mlp}up_proj.weight", f"{mlp}down_proj.weight"])
        for name in need:
            if name not in stored:
                raise CheckpointError(f"tensor {name!r} is missing: layer {i} is {'a mixture' if mixture else 'dense'} "
                                      f"by the config (first_k_dense_replace {h['first_k_dense_replace']}); a shard "
                                      f"may be missing")
        other = f"{mlp}gate_proj.weight" if mixture else f"{mlp}gate.weight"
        if other in stored:
            raise CheckpointError(f"tensor {other!r}: layer {i} is {'a mixture' if mixture else 'dense'} by the "
                                  f"config, but the checkpoint stores the other kind of FFN there")
    return []


def bailing_v2_parameters(rope_dim) -> callable:
    """BailingMoeV2Model.set_gguf_parameters after TextModel's: the rope width (`rope_dim` of the hparams), the
    leading dense layers, the vocabulary, the expert widths and counts, the router's scale and renormalisation."""
    def parameters(h: dict, block_count: int, file_type: int) -> list:
        kv = [*text_model_parameters(h, ARCH, block_count, file_type),
              u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), rope_dim(h)),
              u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=ARCH), h["first_k_dense_replace"]),
              u32(Keys.LLM.VOCAB_SIZE.format(arch=ARCH), h["vocab_size"]),
              u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_intermediate_size"]),
              u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=ARCH),
                  h.get("moe_shared_expert_intermediate_size", h["moe_intermediate_size"] * h["n_shared_experts"])),
              f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=ARCH), h["routed_scaling_factor"]),
              u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=ARCH), h["n_shared_experts"]),
              boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=ARCH), h["norm_topk_prob"])]
        if h.get("num_nextn_predict_layers") is not None:
            kv.append(u32(Keys.LLM.NEXTN_PREDICT_LAYERS.format(arch=ARCH), h["num_nextn_predict_layers"]))
        return kv
    return parameters


FAMILY = Family(
    name="sarvam_moe",
    gguf_arch=ARCH,
    architectures=("SarvamMoEForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=bailing_v2_parameters(head_dim),  # SarvamMoEModel: the whole head rotates
    vocab=gpt2_vocab,
    refuse=REFUSE,
    check=check_block,
    stored_kv=check_layers,
    aliases=ALIASES,
)
