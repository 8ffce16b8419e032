"""Laguna (poolside Laguna-XS.2 / S.2 / M.1: LagunaForCausalLM) -> llama.cpp `laguna` (the converter's LagunaModel).

Per-head q/k RMS norms, a gate on the attention output (`self_attn.g_proj`: one value per head, or per element),
a head count per layer (num_attention_heads_per_layer, written as an array in place of the scalar), one rope per
layer kind (rope_parameters.full_attention / sliding_attention, each with its partial_rotary_factor), leading
dense layers (mlp_layer_types) then sigmoid-routed experts chosen with a selection bias
(`mlp.experts.e_score_correction_bias`), always renormalised, times moe_routed_scaling_factor, plus a shared
expert. llama.cpp's laguna fixes the layer pattern where a window is set: global at every 4th layer from layer 0,
the others sliding; the converter writes no pattern.

Rope scaling: yarn on the global layers (rope_parameters.full_attention), written by TextModel as for any family;
llama.cpp's laguna applies it there and runs its sliding layers with plain rope, so scaling on sliding_attention is
refused. Vocabulary: _set_vocab_gpt2, then a chat_template.jinja beside the weights replaces the template
(releases wrap it in tokenizer_config.json as an include directive), and an eos_token_id list registers its first
id other than bos_token_id as the end-of-turn token (eot).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Experts, Family, Refuse, RunnerFacts, Tensor, stored, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ._parts.checks import check_no_pooling, silu_only

_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0}}

# transformers 5.24's LagunaConfig defaults (layer_types, mlp_layer_types and num_attention_heads_per_layer are
# derived: normalise)
DEFAULTS = {
    "laguna": dict(vocab_size=100352, hidden_size=2048, intermediate_size=8192, num_hidden_layers=40,
                   num_attention_heads=48, num_key_value_heads=8, hidden_act="silu", max_position_embeddings=131072,
                   initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, tie_word_embeddings=False,
                   rope_parameters=_ROPE, attention_bias=False, attention_dropout=0.0, head_dim=128,
                   sliding_window=512, layer_types=None, mlp_layer_types=None, num_attention_heads_per_layer=None,
                   gating=True, moe_intermediate_size=512, shared_expert_intermediate_size=512, num_experts=256,
                   num_experts_per_tok=8, moe_routed_scaling_factor=1.0, moe_apply_router_weight_on_input=False,
                   moe_router_logit_softcapping=0.0, output_router_logits=False, router_aux_loss_coef=0.001,
                   pad_token_id=None, bos_token_id=None, eos_token_id=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_attention_heads_per_layer", "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps",
    "rope_parameters", "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias",
    "sliding_window", "layer_types", "mlp_layer_types", "gating", "gating_types", "moe_intermediate_size",
    "shared_expert_intermediate_size", "num_experts", "num_experts_per_tok", "moe_routed_scaling_factor",
    "moe_apply_router_weight_on_input", "moe_router_logit_softcapping", "partial_rotary_factor",
})
HARMLESS: Harmless = {}

_GATINGS = ("per-head", "per-element", "per_element")  # besides true


def _per_head(h: dict) -> bool:
    return h.get("gating") is True or h.get("gating") == "per-head"


def _gate(sources, h):
    """The attention output gate, its rows checked against the gating (the converter stops on a mismatch)."""
    src = sources[0]
    bid = int(src.name.split(".")[2])
    heads = h["num_attention_heads_per_layer"][bid]
    rows = heads if _per_head(h) else heads * h["head_dim"]
    if src.shape[0] != rows:
        raise CheckpointError(f"{src.path.name}: tensor {src.name!r} has {src.shape[0]} rows; gating "
                              f"{h.get('gating')!r} with {heads} heads needs {rows}: weights and config disagree")
    return stored(sources, h)


_LAYER = "model.layers.{bid}."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(f"{_LAYER}input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(f"{_LAYER}post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    *(Tensor(f"{_LAYER}self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{p}.weight") for p in ("q", "k", "v")),
    Tensor(f"{_LAYER}self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(f"{_LAYER}self_attn.g_proj.weight", GGUF.ATTN_GATE.weight, _gate),
    Tensor(f"{_LAYER}self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor(f"{_LAYER}self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight),
    # each of these exists in some layers only: dense FFNs first, then the mixtures
    *(Tensor(f"{_LAYER}mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=False)
      for p in ("gate", "up", "down")),
    Tensor(f"{_LAYER}mlp.gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Tensor(f"{_LAYER}mlp.experts.e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias, required=False),
    *(Experts(f"{_LAYER}mlp.experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "num_experts",
              required=False) for p in ("gate", "up", "down")),
    *(Tensor(f"{_LAYER}mlp.shared_expert.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=False)
      for p in ("gate", "up", "down")),
)


def normalise(h: dict) -> dict:
    """What LagunaConfig's __post_init__ computes: layer kinds (all global unless stated), MLP kinds (one dense
    layer, then mixtures), per-layer heads, and its per-layer-kind rope where config.json names none."""
    n = h["num_hidden_layers"]
    if h.get("layer_types") is None:
        h["layer_types"] = ["full_attention"] * n
    if h.get("mlp_layer_types") is None:
        h["mlp_layer_types"] = ["dense"] + ["sparse"] * (n - 1)
    if h.get("num_attention_heads_per_layer") is None:
        h["num_attention_heads_per_layer"] = [h["num_attention_heads"]] * n
    rope = h.get("rope_parameters") or {}
    if "full_attention" not in rope and "sliding_attention" not in rope and "rope_theta" not in rope:
        h["rope_parameters"] = {kind: dict(r) for kind, r in _ROPE.items()}
    return h


def _dense_lead(h: dict) -> int:
    kinds = h["mlp_layer_types"]
    return next((i for i, t in enumerate(kinds) if t != "dense"), len(kinds))


REFUSE = (
    silu_only("laguna"),
    # absent layer kinds read as plain rope here; check refuses a rope_parameters without both
    Refuse("rope_parameters.full_attention.rope_type", ("default", "yarn"), "llama.cpp's laguna runs plain rope or "
           "yarn on its global layers", default="default"),
    Refuse("rope_parameters.sliding_attention.rope_type", ("default",), "llama.cpp's laguna runs its sliding layers "
           "with plain rope (the converter writes the global layers' scaling only)", default="default"),
    Refuse("moe_router_logit_softcapping", unset, "the converter writes no softcap, so llama.cpp's laguna would "
           "route otherwise"),
    Refuse("moe_apply_router_weight_on_input", unset, "transformers' Laguna does not implement it"),
    Refuse("tie_word_embeddings", unset, "the view presents Laguna with its own output matrix"),
    Refuse("attention_bias", unset, "llama.cpp's laguna has no attention biases"),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    n = h["num_hidden_layers"]
    for key in ("layer_types", "mlp_layer_types", "num_attention_heads_per_layer"):
        if len(h[key]) != n:
            raise ConfigError(f"{path}: {key} lists {len(h[key])} layers, num_hidden_layers is {n}")
    kinds = list(h["mlp_layer_types"])
    lead = _dense_lead(h)
    if set(kinds) - {"dense", "sparse"} or "dense" in kinds[lead:] or lead == n:
        raise ConfigError(f"{path}: mlp_layer_types {kinds}: llama.cpp's laguna has dense layers only before the "
                          f"first mixture (leading_dense_block_count), and needs mixtures")
    if h.get("sliding_window"):
        pattern = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(n)]
        if list(h["layer_types"]) != pattern:
            raise ConfigError(f"{path}: layer_types {h['layer_types']}: llama.cpp's laguna makes every 4th layer "
                              f"from layer 0 global and the others sliding (the converter writes no pattern)")
    elif "sliding_attention" in h["layer_types"]:
        raise ConfigError(f"{path}: sliding layers without a sliding_window: llama.cpp's laguna slides nowhere then")
    # transformers gates per head where gating is true or "per-head", per element otherwise; the converter reads
    # these four spellings alike, stops on others, and writes nothing of it (the gate's width is its tensor's,
    # which llama.cpp's laguna reads as per head or per element). The converter takes gating_types (per layer) over
    # gating, transformers ignores it: read alike only where every layer's entry is gating's kind (Laguna-S.2.1)
    kind = "per_head" if _per_head(h) else "per_element"
    types = h.get("gating_types")
    if not (h.get("gating") is True or (isinstance(h.get("gating"), str) and h["gating"] in _GATINGS)) \
            or (types and (not isinstance(types, list) or len(types) != n
                           or any(str(t).replace("-", "_") != kind for t in types))):
        raise ConfigError(f"{path}: gating {h.get('gating')!r} / gating_types {h.get('gating_types')!r}: the view "
                          f"presents gating true or \"per-head\" (one gate per head, as Laguna-XS.2) and "
                          f"\"per-element\" (as Laguna-M.1), which transformers and the converter read alike, "
                          f"and gating_types only where every layer's entry is gating's kind (transformers reads "
                          f"gating alone, the converter gating_types first)")
    rope = h["rope_parameters"]
    if "full_attention" not in rope or "sliding_attention" not in rope:
        raise ConfigError(f"{path}: rope_parameters {rope}: Laguna names one rope per layer kind "
                          f"(full_attention, sliding_attention)")
    # a top-level partial_rotary_factor (Laguna-XS.2 states 0.5 beside the per-kind ones): transformers fills it into a
    # layer kind's rope that states none, the converter reads only the per-kind ones (1.0 where absent)
    unstated = [k for k in ("full_attention", "sliding_attention") if "partial_rotary_factor" not in rope[k]]
    if h.get("partial_rotary_factor") is not None and unstated:
        raise ConfigError(f"{path}: partial_rotary_factor {h['partial_rotary_factor']} with rope_parameters."
                          f"{unstated[0]} stating none: transformers rotates that kind's heads by it, the converter "
                          f"writes all of them (it reads the per-kind factors only)")
    if rope["full_attention"].get("rope_type") == "yarn" and not rope["full_attention"].get("factor"):
        raise ConfigError(f"{path}: rope_parameters.full_attention yarn without a factor: the converter then writes "
                          f"no scaling, which transformers applies")
    full = rope["full_attention"]
    if full.get("rope_type") == "yarn" and full.get("mscale") and full.get("mscale_all_dim"):
        raise ConfigError(f"{path}: rope_parameters.full_attention mscale {full['mscale']} / mscale_all_dim "
                          f"{full['mscale_all_dim']}: transformers scales attention by their ratio, which the "
                          f"converter does not write (llama.cpp's laguna would scale by 0.1 ln(factor) + 1)")
    if full.get("rope_type") == "yarn" and full.get("truncate") is False:
        raise ConfigError(f"{path}: rope_parameters.full_attention truncate false: transformers then ramps yarn "
                          f"over unrounded correction dimensions, llama.cpp rounds them")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """LagunaModel.set_gguf_parameters: TextModel's entries with the per-layer head counts in place of the
    scalar head count, then vocab size, window, mixture, dense lead and the two rope widths."""
    heads = KV(Keys.Attention.HEAD_COUNT.format(arch="laguna"), ValueType.ARRAY,
               list(h["num_attention_heads_per_layer"]),
               ValueType.INT32)
    kv = [heads if k.key == heads.key else k for k in text_model_parameters(h, "laguna", block_count, file_type)]
    kv.append(u32(Keys.LLM.VOCAB_SIZE.format(arch="laguna"), h["vocab_size"]))
    if (h.get("sliding_window") or 0) > 0:
        kv.append(u32(Keys.Attention.SLIDING_WINDOW.format(arch="laguna"), h["sliding_window"]))
    rope = h["rope_parameters"]
    return [*kv,
            u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch="laguna"), h["moe_intermediate_size"]),
            u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch="laguna"), h["shared_expert_intermediate_size"]),
            boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch="laguna"), True),
            f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch="laguna"), float(h["moe_routed_scaling_factor"])),
            u32(Keys.LLM.EXPERT_GATING_FUNC.format(arch="laguna"), 2),  # sigmoid
            u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch="laguna"), _dense_lead(h)),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch="laguna"),
                int(h["head_dim"] * float(rope["full_attention"].get("partial_rotary_factor", 1.0)))),
            u32(Keys.Rope.DIMENSION_COUNT_SWA.format(arch="laguna"),
                int(h["head_dim"] * float(rope["sliding_attention"].get("partial_rotary_factor", 1.0))))]


def vocab(model_dir: Path, h: dict) -> list:
    """LagunaModel.set_vocab: _set_vocab_gpt2 with </assistant> (the assistant turn-end) typed CONTROL; then
    chat_template.jinja's text as the template (in the place SpecialVocab's template took, GGUFWriter keeping a
    re-added key's place), and from an eos_token_id list its first id other than bos_token_id as eot."""
    from hfview.tokenizer.special import write_chat_template
    from hfview.tokenizer.vocab import CONTROL, MODEL, PRE, TOKEN_TYPE, TOKENS, SpecialVocab, bpe_tokens
    from hfview.tokenizer.writer import KVWriter
    tokens, types, pre = bpe_tokens(model_dir, h)
    types = [CONTROL if tok == "</assistant>" else t for tok, t in zip(tokens, types)]
    w = KVWriter()
    w.add_string(MODEL, "gpt2")
    w.add_string(PRE, pre)
    w.add_array(TOKENS, tokens)
    w.add_array(TOKEN_TYPE, types)
    SpecialVocab(model_dir, load_merges=True).write(w)
    if (jinja := Path(model_dir) / "chat_template.jinja").is_file():
        write_chat_template(w, jinja.read_text(encoding="utf-8"))
    if isinstance(eos := h.get("eos_token_id"), list):
        if extra := [e for e in eos if e != h.get("bos_token_id")]:
            w.add_uint32(Keys.Tokenizer.EOT_ID, extra[0])
    return w.kvs()


FAMILY = Family(
    name="laguna",
    gguf_arch="laguna",
    architectures=("LagunaForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    # llama.cpp's laguna slides on three layers of four, as layer_types says
    runner=RunnerFacts(llama_cpp_applies_window=True),
)
