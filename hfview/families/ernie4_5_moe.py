"""ERNIE 4.5 MoE (ERNIE-4.5-21B-A3B, ERNIE-4.5-300B-A47B: Ernie4_5_MoeForCausalLM) -> llama.cpp `ernie4_5-moe`
(the converter's Ernie4_5MoeModel, derived from its Ernie4_5Model).

ERNIE 4.5's decoder (hfview.families.ernie4_5: interleaved rope, Q/K as stored, SentencePiece vocabulary) whose
first moe_layer_start_index layers keep a dense SwiGLU FFN and whose others hold a mixture: a router
(`mlp.gate`, softmax; the top-k choice adds `moe_statics.e_score_correction_bias`, presented as exp_probs_b),
per-expert SwiGLU FFNs stacked in the converter's merge order (gate, up, down), and moe_num_shared_experts
always-on experts fused into one SwiGLU (`mlp.shared_experts`). The converter writes the shared width as
intermediate_size / num_key_value_heads, which is the fused width in every release: other configs are refused.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Experts, Family, Refuse, Tensor, unset
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from . import ernie4_5
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.decoder import LM_HEAD, decoder_tensors

# transformers 5.24's Ernie4_5_MoeConfig defaults
DEFAULTS = {
    "ernie4_5_moe": dict(vocab_size=103424, pad_token_id=0, bos_token_id=1, eos_token_id=2, hidden_size=2560,
                         intermediate_size=12288, num_hidden_layers=28, num_attention_heads=20, num_key_value_heads=4,
                         hidden_act="silu", max_position_embeddings=131072, initializer_range=0.02, rms_norm_eps=1e-05,
                         use_cache=True, tie_word_embeddings=True,
                         rope_parameters={"rope_theta": 500000.0, "rope_type": "default"}, use_bias=False,
                         moe_intermediate_size=1536, moe_k=6, moe_num_experts=64, moe_num_shared_experts=2,
                         moe_layer_start_index=1, moe_layer_end_index=27, moe_layer_interval=1, moe_norm_min=1e-12,
                         output_router_logits=False, router_aux_loss_coef=0.001),
}

READS = frozenset({
    *ernie4_5.READS,
    "moe_num_experts", "moe_k", "moe_intermediate_size", "moe_num_shared_experts",
    # which layers hold a mixture, read as transformers reads them and checked against llama.cpp's rule
    "moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval",
    "moe_norm_min",  # checked: never reached by the chosen weights' sum, as llama.cpp's own clamp is not
})
HARMLESS: Harmless = {}
# Ernie4_5_MoeConfig's attribute map
ALIASES = {"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_k"}

_MLP = "model.layers.{bid}.mlp."
_DENSE_FFN = ("mlp.gate_proj.", "mlp.up_proj.", "mlp.down_proj.")
TENSORS = (
    # the dense FFN is held by the leading dense layers only: each layer's FFN is checked in stored_kv
    *(r if not any(part in r.hf for part in _DENSE_FFN) else Tensor(r.hf, r.gguf, r.view, r.steps, required=False)
      for r in decoder_tensors("model.")),
    LM_HEAD,
    Tensor(_MLP + "gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Tensor(_MLP + "moe_statics.e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias, required=False),
    # the converter merges gate, up, down in that order
    *(Experts(f"{_MLP}experts.{{x}}.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}_exps.weight", "moe_num_experts",
              required=False) for proj in ("gate", "up", "down")),
    *(Tensor(f"{_MLP}shared_experts.{proj}_proj.weight", f"blk.{{bid}}.ffn_{proj}_shexp.weight", required=False)
      for proj in ("gate", "up", "down")),
)


def _mixture_layers(h: dict) -> list[bool]:
    """Which layers hold a mixture in transformers: (i + 1) % interval == 0, between start and end index."""
    return [(i + 1) % h["moe_layer_interval"] == 0 and h["moe_layer_start_index"] <= i <= h["moe_layer_end_index"]
            for i in range(h["num_hidden_layers"])]


def normalise(h: dict) -> dict:
    return ernie4_5.normalise(h)


REFUSE = (
    silu_only("ernie4_5-moe"),
    rope_types("ernie4_5-moe"),
    Refuse("use_bias", unset, "llama.cpp's ernie4_5-moe has no biases on its FFNs or experts; this checkpoint would "
           "run wrong"),
    Refuse("moe_num_experts", bool, "a config without experts is a dense ERNIE 4.5, which the converter does not "
           "write as ernie4_5-moe"),
    *(Refuse(key, lambda v, least=least: isinstance(v, int) and not isinstance(v, bool) and v >= least,
             f"expected an integer >= {least}")
      for key, least in (("moe_layer_start_index", 0), ("moe_layer_end_index", 0), ("moe_layer_interval", 1))),
    Refuse("moe_layer_interval", (1,), "transformers then keeps every layer i with (i + 1) % moe_layer_interval != 0 "
           "dense, while llama.cpp's ernie4_5-moe loads experts for every layer past the leading dense ones, so such "
           "a checkpoint cannot load there"),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    n, start, end = h["num_hidden_layers"], h["moe_layer_start_index"], h["moe_layer_end_index"]
    if start >= n:
        raise ConfigError(f"{path}: moe_layer_start_index {start} with {n} layers: no layer holds a mixture")
    if end < n - 1:
        raise ConfigError(f"{path}: moe_layer_end_index {end} with {n} layers: transformers keeps layers past {end} "
                          f"dense, which llama.cpp's ernie4_5-moe (a mixture in every layer from "
                          f"moe_layer_start_index on; the converter writes no end) cannot run")
    if h["moe_k"] > h["moe_num_experts"]:
        raise ConfigError(f"{path}: moe_k {h['moe_k']} is more than the {h['moe_num_experts']} experts")
    if not h["moe_norm_min"] < h["moe_k"] / h["moe_num_experts"]:
        raise ConfigError(f"{path}: moe_norm_min {h['moe_norm_min']!r}: transformers divides the chosen experts' "
                          f"weights by their sum clamped at it, which a sum of {h['moe_k']} of {h['moe_num_experts']} "
                          f"softmax weights can fall below; llama.cpp's ernie4_5-moe clamps at 6.1e-5 only")
    shared = h.get("moe_num_shared_experts") or 0
    if shared:
        written = h["intermediate_size"] // h["num_key_value_heads"]
        if written != shared * h["moe_intermediate_size"]:
            raise ConfigError(f"{path}: the converter writes the shared experts' width as intermediate_size / "
                              f"num_key_value_heads = {written}, but transformers fuses {shared} shared experts of "
                              f"moe_intermediate_size {h['moe_intermediate_size']} ({shared * h['moe_intermediate_size']} "
                              f"wide): llama.cpp could not load them")


def check_layers(h: dict, stored: dict) -> list:
    """No KV: each layer holds the FFN llama.cpp's ernie4_5-moe loads for it (dense before
    moe_layer_start_index, a router, experts and, where configured, shared experts after)."""
    names = set(stored)
    for i, mixture in enumerate(_mixture_layers(h)):
        layer = f"model.layers.{i}.mlp."
        need = ([f"{layer}gate.weight", f"{layer}experts.0.gate_proj.weight"]
                + ([f"{layer}shared_experts.gate_proj.weight"] if h.get("moe_num_shared_experts") else [])
                if mixture else [f"{layer}{p}weight" for p in ("gate_proj.", "up_proj.", "down_proj.")])
        unwanted = [f"{layer}gate_proj.weight"] if mixture else [f"{layer}gate.weight"]
        for name in need:
            if name not in names:
                raise CheckpointError(f"tensor {name!r} is missing: layer {i} is "
                                      f"{'a mixture' if mixture else 'dense'} by the config "
                                      f"(moe_layer_start_index {h['moe_layer_start_index']}); a shard may be missing")
        for name in unwanted:
            if name in names:
                raise CheckpointError(f"tensor {name!r}: layer {i} is {'a mixture' if mixture else 'dense'} by the "
                                      f"config, but the checkpoint stores the other kind of FFN there")
    return []


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's list, then Ernie4_5MoeModel's: expert counts, the mixture's layout, the widths."""
    arch = "ernie4_5-moe"
    kv = [*text_model_parameters(h, arch, block_count, file_type),
          u32(Keys.LLM.EXPERT_COUNT.format(arch=arch), h["moe_num_experts"]),
          u32(Keys.LLM.EXPERT_USED_COUNT.format(arch=arch), h["moe_k"]),
          u32(Keys.LLM.INTERLEAVE_MOE_LAYER_STEP.format(arch=arch), h["moe_layer_interval"]),
          u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=arch), h["moe_layer_start_index"])]
    if h.get("moe_intermediate_size") is not None:
        kv.append(u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=arch), h["moe_intermediate_size"]))
    if (shared := h.get("moe_num_shared_experts")) is not None:
        kv.append(u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=arch), shared))
        if shared > 0:
            kv.append(u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch=arch),
                          h["intermediate_size"] // h["num_key_value_heads"]))
    return kv


FAMILY = Family(
    name="ernie4_5_moe",
    gguf_arch="ernie4_5-moe",
    architectures=("Ernie4_5_MoeForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=ernie4_5.vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    stored_kv=check_layers,
    aliases=ALIASES,
)
