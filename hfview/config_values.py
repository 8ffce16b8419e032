"""The type and range of every config value the view reads, declared once.

A hostile config.json ends in a ConfigError naming the file, the key, the value found and what was expected:
never in a TypeError inside a family, nor in a list sized by an unchecked number. Three passes, each before the
code that relies on it:

* `check_values`: the config as stated, before defaults are merged or any family computes with it.
  A key's rule is its entry in RULES, else the type of its family's default (its transformers config class's
  type: an int default takes an int, not a bool; a float default any number). tests/test_config_values.py
  checks that every key a family reads or defaults has a rule.
* `check_shapes`: counts against each other (heads divide widths, per-layer lists as long as the layer count).
* `check_against_tensors`: the counts that size lists (layers, head width, vocabulary) against what the
  shards store, before normalise builds per-layer lists or the tokenizer pads its vocabulary.
"""
from __future__ import annotations

import math
from pathlib import Path

from .errors import ConfigError, shown
from .shapes import (ANY, BOOL, COUNT, FRACTION, INT, LIST, NON_NEGATIVE, NUMBER, OBJECT, POSITIVE, STRING,
                     TOKEN_IDS, U32_MAX, Rule, check, is_int, list_of, object_of)

ROPE: dict[str, Rule] = {
    "rope_type": STRING, "type": STRING, "factor": POSITIVE, "rope_theta": POSITIVE,
    "original_max_position_embeddings": COUNT, "low_freq_factor": POSITIVE, "high_freq_factor": POSITIVE,
    "beta_fast": NUMBER, "beta_slow": NUMBER, "attention_factor": NUMBER, "attn_factor": NUMBER,
    "extrapolation_factor": NUMBER, "mscale": NUMBER, "mscale_all_dim": NUMBER, "truncate": BOOL,
    "short_factor": list_of(NUMBER), "long_factor": list_of(NUMBER), "partial_rotary_factor": FRACTION,
}
ROPE_OBJECT = object_of(ROPE).or_null()
# transformers 5's per-layer-kind layout (Gemma 3): {"full_attention": {...}, "sliding_attention": {...}}
ROPE["full_attention"] = ROPE["sliding_attention"] = ROPE_OBJECT

_COUNTS = (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "max_position_embeddings", "num_experts_per_tok", "original_max_position_embeddings",
    "dim", "n_layers", "n_heads", "hidden_dim", "num_layers", "n_layer", "n_head", "n_embd",
    "num_experts_per_token", "top_k_experts", "attention_head_dim", "n_embed", "block_ff_dim",
    "pad_vocab_size_multiple", "conv_kernel", "d_conv", "d_inner", "d_model", "d_state", "state_size", "expand",
    "n_groups", "num_heads",
    "no_rope_layer_interval", "sliding_window_pattern", "_sliding_window_pattern",
    "pretraining_tp", "vocab_size_per_layer_input", "seq_length", "multi_query_group_num",
    "attention_dim", "kv_channels", "padded_vocab_size", "prefix_dense_intermediate_size",
    "dense_intermediate_size", "weight_bits", "input_bits",
)
_NULLABLE_COUNTS = ("num_key_value_heads", "n_kv_heads", "head_dim", "model_max_length", "n_ctx", "n_positions",
                    "max_length", "n_inner", "ffn_hidden_size", "max_sequence_length", "num_kv_heads", "num_ln_in_parallel_attn",
                    "n_head_kv")  # n_head_kv: Falcon-40B RWConfig's num_kv_heads (None: n_head)
# counts where 0 states "none" (experts of a dense config, a shared expert's width, a window switched off): the
# family's own check says what a 0 means for it
_ZERO_OR_COUNTS = ("num_local_experts", "num_experts", "n_routed_experts", "shared_intermediate_size",
                   "shared_expert_intermediate_size")
ZERO_OR_COUNT = Rule("an integer >= 0", lambda v: is_int(v) and 0 <= v <= U32_MAX)
_EPSILONS = ("rms_norm_eps", "norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "layernorm_epsilon")

RULES: dict[str, Rule] = {
    **{k: COUNT for k in _COUNTS},
    **{k: COUNT.or_null() for k in _NULLABLE_COUNTS},
    **{k: ZERO_OR_COUNT for k in _ZERO_OR_COUNTS},
    "sliding_window": ZERO_OR_COUNT.or_null(),
    # Mamba's step rank: a count, or "auto" (the width / 16, rounded up)
    **{k: Rule("an integer >= 1 or \"auto\"", lambda v: is_int(v) and 1 <= v <= U32_MAX or v == "auto")
       for k in ("time_step_rank", "dt_rank", "mamba_dt_rank")},
    # a clamp's bounds are never written to the file: any finite number, past float32's range too (Nemotron-3-Ultra's
    # [0.0, 1e+308], whose upper bound clamps nothing; families.state_space.clamps_nothing)
    "time_step_limit": list_of(Rule("a finite number",
                                    lambda v: is_int(v) or isinstance(v, float) and math.isfinite(v))),
    "full_attn_idxs": list_of(ZERO_OR_COUNT).or_null(),
    "mixer_rms_eps": NON_NEGATIVE, "rotary_emb_base": POSITIVE,
    **{k: BOOL for k in ("use_bias", "use_conv_bias", "norm_before_gate")},
    "summary_activation": STRING.or_null(),
    "logit_scale": ANY.or_null(), "ffn_config": OBJECT.or_null(),  # MPT: a number or "inv_sqrt_d_model"; the family refuses any
    **{k: NON_NEGATIVE for k in _EPSILONS},
    **{k: TOKEN_IDS for k in ("bos_token_id", "eos_token_id", "pad_token_id", "eod_token_id", "sep_token_id")},
    **{k: BOOL for k in ("bias", "qkv_bias", "use_cla", "use_rotary_pos_emb", "is_causal", "tied_embeddings",
                         "attention_bias", "mlp_bias", "tie_word_embeddings", "use_qk_norm")},
    **{k: NUMBER for k in ("scale_emb", "scale_depth")},
    "dim_model_base": POSITIVE,
    **{k: STRING for k in ("hidden_act", "hidden_activation", "activation_function", "norm_type", "model_type")},
    **{k: POSITIVE.or_null() for k in ("attn_logit_softcapping", "final_logit_softcapping", "clip_qkv")},
    "use_bidirectional_attention": BOOL.or_null(),
    "max_window_layers": Rule("an integer >= 0", lambda v: is_int(v) and 0 <= v <= U32_MAX),
    "rope_theta": POSITIVE, "rope_local_base_freq": POSITIVE, "rope_ratio": POSITIVE, "query_pre_attn_scalar": POSITIVE,
    "partial_rotary_factor": FRACTION, "rotary_pct": FRACTION,
    "rope_parameters": ROPE_OBJECT, "rope_scaling": ROPE_OBJECT,
    "yarn": object_of({"factor": POSITIVE, "beta": NUMBER, "alpha": NUMBER, "original_max_position_embeddings": COUNT,
                       "apply_scale": BOOL}).or_null(),
    # one entry per layer: the length is checked against the layer count in check_shapes
    "layer_types": list_of(STRING).or_null(),
    "no_rope_layers": list_of(Rule("0, 1, true or false", lambda v: INT.test(v) and v in (0, 1) or isinstance(v, bool))).or_null(),
    "layer_rope_theta": list_of(POSITIVE).or_null(),
    "architectures": list_of(STRING),
    # read only to refuse them by name when present (Mistral's format)
    "moe": ANY, "vision_encoder": ANY, "llama_4_scaling": ANY,
    # merged over the top level / refused before any value is read
    "text_config": ANY, "quantization_config": ANY,
    # DeepSeek's mixture and latent attention (deepseek, deepseek_v2, deepseek_v3, minicpm3)
    **{k: COUNT for k in ("moe_intermediate_size", "moe_layer_freq", "kv_lora_rank", "qk_nope_head_dim",
                          "qk_rope_head_dim", "v_head_dim")},
    **{k: COUNT.or_null() for k in ("q_lora_rank", "n_group", "topk_group")},
    **{k: ZERO_OR_COUNT for k in ("first_k_dense_replace", "n_shared_experts", "num_nextn_predict_layers")},
    **{k: STRING for k in ("scoring_func", "topk_method")},
    "norm_topk_prob": BOOL, "routed_scaling_factor": NUMBER,
    # the Mamba-2 hybrids' mixer sizes (Granite 4.0, Bamba), read as written, and Granite's multipliers
    **{k: COUNT for k in ("mamba_n_heads", "mamba_d_state", "mamba_n_groups", "mamba_d_conv", "mamba_expand",
                          "attn_rotary_emb")},
    "mamba_d_head": Rule("an integer >= 1 or \"auto\"", lambda v: is_int(v) and 1 <= v <= U32_MAX or v == "auto"),
    **{k: BOOL for k in ("mamba_conv_bias", "mamba_proj_bias")},
    **{k: NUMBER for k in ("embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling")},
    **{k: STRING.or_null() for k in ("position_embedding_type", "normalization_function")},
    "attn_layer_indices": list_of(ZERO_OR_COUNT).or_null(),
    # Falcon-H1's mixer width and switches, and its muP multipliers (folded into the weights)
    "mamba_d_ssm": COUNT,
    **{k: BOOL for k in ("mamba_rms_norm", "mamba_norm_before_gate", "projectors_bias")},
    **{k: NUMBER for k in ("lm_head_multiplier", "key_multiplier", "attention_in_multiplier",
                           "attention_out_multiplier", "ssm_in_multiplier", "ssm_out_multiplier")},
    **{k: list_of(NUMBER) for k in ("mlp_multipliers", "ssm_multipliers")},
}
# where one family's config class types a key unlike the others
OVERRIDES: dict[tuple[str, str], Rule] = {
    # EXAONE 4: 0 with no sliding window (1.2B), a layer-kind string ("LLLG", 32B)
    # Granite 4.0's dense hybrids (granite-4.0-h-micro) state 0 experts and 0 per token
    ("granitemoehybrid", "num_experts_per_tok"): ZERO_OR_COUNT,
    ("exaone4", "sliding_window_pattern"): Rule("an integer >= 0 or a pattern string such as \"LLLG\"",
                                                lambda v: is_int(v) and 0 <= v <= U32_MAX or isinstance(v, str)),
    # DeepseekV2Config defaults it to None (the family refuses a config without one)
    ("deepseek_v2", "num_experts_per_tok"): COUNT.or_null(),
}
# mixtures, wave 2a part B (MiniMax-M2, Hunyuan-A13B, Llama 4, Granite MoE SWA)
from .shapes import any_of  # noqa: E402
RULES.update({
    "rotary_dim": COUNT, "scoring_func": STRING, "qk_norm_type": STRING,
    "attn_type_list": list_of(INT), "moe_layers": list_of(ZERO_OR_COUNT).or_null(),
    # Hunyuan-A13B: one entry per layer (the family checks their length and that they agree); an integer where
    # transformers allows it, which the family refuses by name
    **{k: any_of(COUNT, list_of(COUNT)) for k in ("moe_topk", "moe_intermediate_size", "num_shared_expert")},
})
# mixtures, wave 2a part C (AFMoE): keys of Trinity's config.json AfmoeConfig does not define
RULES.update({"route_norm": BOOL, "score_func": STRING})
# Hunyuan-A13B's release (model_type hunyuan) states its config class's latent-attention widths null beside use_mla
# false (the family holds use_mla false)
OVERRIDES.update({("hunyuan_v1_moe", k): COUNT.or_null()
                  for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")})
# (Cohere 2 MoE): one MLP kind per layer (the family checks the length and the kinds)
RULES.update({"mlp_layer_types": list_of(STRING).or_null(), "shared_expert_combination_strategy": STRING,
              "expert_selection_fn": STRING})
# Cohere2MoeConfig defaults it to None (the family refuses a dense layer without it)
OVERRIDES[("cohere2_moe", "prefix_dense_intermediate_size")] = COUNT.or_null()
OVERRIDES[("cohere2_moe", "rms_norm_eps")] = NON_NEGATIVE.or_null()  # None: Cohere's LayerNorm instead
# (Mellum): its MTP layer count (null: none) and the MTP layers' kinds, which the converter does not read
OVERRIDES[("mellum", "num_nextn_predict_layers")] = ZERO_OR_COUNT.or_null()
RULES.update({k: list_of(STRING).or_null() for k in ("mtp_layer_types", "mtp_mlp_layer_types")})
# K-EXAONE's first config.json (transformers 5.0.0.dev0): EXAONE 4's layer-kind string ("LLLG"), the converter's
# fallback name for first_k_dense_replace, and per-layer MoE flags
OVERRIDES[("exaone_moe", "sliding_window_pattern")] = OVERRIDES[("exaone4", "sliding_window_pattern")]
RULES.update({"first_last_k_dense_replace": ZERO_OR_COUNT, "is_moe_layer": list_of(BOOL)})
# (Laguna): per-layer head counts and gate kinds, the gate switch (true, or "per-head" / "per-element"), the router
RULES.update({"num_attention_heads_per_layer": list_of(COUNT).or_null(), "gating_types": list_of(STRING).or_null(),
              "gating": ANY, "moe_routed_scaling_factor": NUMBER, "moe_router_logit_softcapping": NUMBER,
              "moe_apply_router_weight_on_input": BOOL})
PER_LAYER = ("layer_types", "no_rope_layers", "layer_rope_theta")
LAYER_COUNTS = ("n_layers", "num_hidden_layers", "n_layer", "num_layers")  # the converter's search order

_BY_DEFAULT_TYPE = {bool: BOOL, int: INT, float: NUMBER, str: STRING, dict: OBJECT, list: LIST}


def rule_for(family_name: str, defaults: dict, key: str) -> Rule | None:
    """A key's rule: declared, or the type of its family's default; None when neither says."""
    rule = OVERRIDES.get((family_name, key)) or RULES.get(key)
    if rule is None and defaults.get(key) is not None:
        rule = _BY_DEFAULT_TYPE.get(type(defaults[key]))
    return rule


def check_values(family_name: str, defaults: dict, config: dict, path: Path) -> None:
    """Every stated key that has a rule, checked against it."""
    def refuse(where, value, rule):
        return ConfigError(f"{path}: {where} is {shown(value)}; expected {rule.expect}. Fix the config or "
                           f"re-download it")

    for key, value in config.items():
        rule = rule_for(family_name, defaults, key)
        if rule is not None:
            check(value, rule, key, refuse)


def layer_count(h: dict) -> int | None:
    return next((h[k] for k in LAYER_COUNTS if h.get(k) is not None), None)


def check_shapes(h: dict, path: Path, extra_blocks: int = 0) -> None:
    """Counts against each other, on the config with its defaults (all values already of their types). A per-layer
    list may also run over the `extra_blocks` the converter writes after the trunk, where the family says its
    releases list them (Step-3.5's MTP layers' types in layer_types)."""
    for heads, kv in (("num_attention_heads", "num_key_value_heads"), ("n_heads", "n_kv_heads")):
        if h.get(heads) is not None and h.get(kv) is not None and h[heads] % h[kv]:
            raise ConfigError(f"{path}: {heads} = {h[heads]} is not a multiple of {kv} = {h[kv]}: each KV head is "
                              f"shared by a whole number of query heads. Fix the config")
    for width, heads in (("hidden_size", "num_attention_heads"), ("dim", "n_heads")):
        # latent attention (qk_rope_head_dim stated or defaulted) states its head widths itself
        if h.get("head_dim") is None and h.get("qk_rope_head_dim") is None and h.get(width) is not None and h.get(heads) is not None and h[width] % h[heads]:
            raise ConfigError(f"{path}: {width} = {h[width]} does not split into {heads} = {h[heads]} heads and no "
                              f"head_dim is stated. Fix the config")
    layers = layer_count(h)
    for key in PER_LAYER:
        stated = h.get(key)
        if isinstance(stated, list) and layers is not None and len(stated) not in (layers, layers + extra_blocks):
            raise ConfigError(f"{path}: {key} lists {len(h[key])} layers, the config has {layers}. Fix the config")


# counts that size what the view builds, and the stored fact that bounds them
_WIDTHS = ("head_dim", "hidden_size", "dim", "n_embd", "attention_head_dim", "num_attention_heads",
           "num_key_value_heads", "n_heads", "n_kv_heads")
_PER_TENSOR = (*LAYER_COUNTS, "num_local_experts", "num_experts", "n_routed_experts")
VOCAB_COUNTS = ("vocab_size", "padded_vocab_size", "vocab_size_per_layer_input")


MAX_LAYERS = 1 << 16  # where no shard can be read to bound them: far past any released model


def check_against_tensors(config: dict, shapes: list[tuple[int, ...]] | None, path: Path) -> None:
    """Stated counts no larger than the stored tensors can justify: a layer or an expert has tensors of its
    own, a head or a width is no wider than some stored dimension. `shapes` None: the shards are unreadable,
    and the counts that size per-layer lists are held to MAX_LAYERS instead."""
    if shapes is None:
        for key in _PER_TENSOR:
            if is_int(config.get(key)) and config[key] > MAX_LAYERS:
                raise ConfigError(f"{path}: {key} = {config[key]} is past any model's ({MAX_LAYERS}). Fix the config")
        return
    widest = max((d for s in shapes for d in s), default=0)
    for key in _WIDTHS:
        if is_int(config.get(key)) and config[key] > widest:
            raise ConfigError(f"{path}: {key} = {config[key]}, but no stored tensor has a dimension that large "
                              f"(the largest is {widest}): the config does not describe these weights")
    for key in _PER_TENSOR:
        if is_int(config.get(key)) and config[key] > len(shapes):
            raise ConfigError(f"{path}: {key} = {config[key]}, but the shards store only {len(shapes)} tensors and "
                              f"each of those has its own: the config does not describe these weights")


def check_vocab(h: dict, embedding_rows: int, embedding: str, path: Path) -> None:
    """The vocabulary the tokenizer is padded to has an embedding row for every token."""
    for key in VOCAB_COUNTS:
        if is_int(h.get(key)) and h[key] > embedding_rows:
            raise ConfigError(f"{path}: {key} = {h[key]} is more than the {embedding_rows} rows of the token "
                              f"embedding {embedding!r}: tokens past them would have no embedding. Fix {key} or "
                              f"re-download the weights")
# older families with their own tensor paths: CodeShell's KV group count
RULES.update({"num_query_groups": COUNT})
# Ling-style mixtures (Sarvam-MoE, Ling 2.0, Ling 1.x)
RULES.update({"score_function": STRING, "moe_shared_expert_intermediate_size": COUNT,
              "num_shared_experts": ZERO_OR_COUNT, "num_mtp_layers": ZERO_OR_COUNT, "use_qkv_bias": BOOL})
RULES.update({k: BOOL for k in ("use_bias", "norm_head", "norm_softmax", "use_rmsnorm",
                                "using_split_qkv_in_self_attention")})
RULES.update({"router_scaling_factor": NUMBER})  # mlp_layer_types: a list or null, above
# Nemotron-H (nemotron_h): its layer kinds in both spellings, Mamba-2 and mixture sizes (its config.json is read as
# written, so no class default types them)
RULES.update({
    "hybrid_override_pattern": STRING, "mtp_hybrid_override_pattern": STRING,
    "layers_block_type": list_of(STRING), "mtp_layers_block_type": list_of(STRING).or_null(),
    **{k: COUNT for k in ("mamba_head_dim", "mamba_num_heads", "ssm_state_size",
                          "moe_shared_expert_intermediate_size")},
    "moe_latent_size": COUNT.or_null(), "residual_in_fp32": BOOL,
    **{k: STRING for k in ("mamba_hidden_act", "mlp_hidden_act")},
})
# Qwen3-Next / Qwen3.5: the attention layer every full_attention_interval-th (the config class builds layer_types
# from it where none is stated)
RULES.update({"full_attention_interval": COUNT})
# Kimi Linear (kimi_linear): its delta-attention sizes and layer lists (1-based; the family checks them against the
# layer count) and its router's activation, which no class default types
RULES.update({
    "linear_attn_config": object_of({"full_attn_layers": list_of(COUNT), "kda_layers": list_of(COUNT),
                                     "head_dim": COUNT, "num_heads": COUNT, "short_conv_kernel_size": COUNT}),
    "moe_router_activation_func": STRING,
})
# Nanbeige 4.2 (nanbeige): how many times the stored layers run, and whether the final norm closes only the last
# pass (its config.json is read as written, so no class default types them)
RULES.update({"num_loops": COUNT, "skip_loop_final_norm": BOOL})
# Qwen3-Next / Qwen3.5: the MTP block count (the converter counts the stored mtp.layers where none is stated)
RULES.update({"mtp_num_hidden_layers": ZERO_OR_COUNT})
# MiMo-V2-Flash (mimo_v2_flash): the releases' sliding-layer sizes, layer pattern (0 full, 1 sliding) and MLP pattern
# (0 dense, 1 mixture) as lists, the window's size, thetas and value scale; its null scale and shared-expert count
RULES.update({
    **{k: COUNT for k in ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim", "swa_v_head_dim")},
    "hybrid_layer_pattern": list_of(ZERO_OR_COUNT), "sliding_window_size": COUNT.or_null(),
    "swa_rope_theta": POSITIVE, "attention_value_scale": NUMBER.or_null(),
})
OVERRIDES[("mimo_v2_flash", "moe_layer_freq")] = list_of(ZERO_OR_COUNT).or_null()
OVERRIDES[("mimo_v2_flash", "routed_scaling_factor")] = NUMBER.or_null()
OVERRIDES[("mimo_v2_flash", "n_shared_experts")] = ZERO_OR_COUNT.or_null()
# TeleChat2 (telechat): the lengths its rotary base is computed from (its config.json is read as written)
RULES.update({"training_seqlen": COUNT, "base_seqlen": COUNT.or_null()})
# Tele-FLM (teleflm): its µScaling switch and multipliers (its config.json is read as written)
RULES.update({"use_mup": BOOL, **{k: NUMBER for k in ("input_mult", "output_mult", "mup_scale_factor")}})
# Hy4 (hy_v4): which layers own a DSA indexer (null: the config class's pattern), and the converter's switch for an
# F32 output matrix
RULES.update({"indexer_types": list_of(STRING).or_null(), "enable_lm_head_fp32": BOOL})
# Gemma 4 (gemma4): the full-attention layers' head width and KV heads (as released, or folded by transformers 5.24
# into per_layer_config: layer index -> overrides), the E models' per-layer input width and shared KV layers (0
# where none), and use_bidirectional_attention, a string there ("vision", "all") where Gemma 3's is a bool
RULES.update({
    "global_head_dim": COUNT, "num_global_key_value_heads": COUNT.or_null(),
    "per_layer_config": object_of(values=object_of({"head_dim": COUNT, "num_key_value_heads": COUNT})).or_null(),
    "hidden_size_per_layer_input": ZERO_OR_COUNT.or_null(), "num_kv_shared_layers": ZERO_OR_COUNT,
    "expert_intermediate_size": COUNT.or_null(),
})
OVERRIDES[("gemma4", "use_bidirectional_attention")] = STRING.or_null()
OVERRIDES[("gemma4", "moe_intermediate_size")] = COUNT.or_null()
OVERRIDES[("gemma4", "num_experts")] = ZERO_OR_COUNT.or_null()
OVERRIDES[("gemma4", "top_k_experts")] = COUNT.or_null()
OVERRIDES[("gemma4", "enable_moe_block")] = BOOL  # Gemma 4 Unified's config class has no default for it
# sparse attention's indexer (deepseek_v32, glm_moe_dsa): its sizes, GLM-5's per-layer kinds ("full" / "shared",
# checked against the layer count by the family) and the config class's inputs to them where none are stated
RULES.update({"index_topk": COUNT, "index_head_dim": COUNT, "index_n_heads": COUNT,
              "indexer_types": list_of(STRING).or_null(), "index_topk_freq": COUNT,
              "index_skip_topk_offset": ZERO_OR_COUNT,
              "index_topk_pattern": any_of(STRING, list_of(STRING)).or_null()})
# Nemotron-NAS (deci): one attention and one ffn object per layer (the family checks each key and value)
RULES.update({"block_configs": list_of(object_of({"attention": OBJECT, "ffn": OBJECT}))})
OVERRIDES[("deci", "intermediate_size")] = COUNT.or_null()  # null in every release: block_configs sizes each FFN
# Gemma 3n (gemma3n): one MLP width per layer (or one for all), each layer's target activation sparsity (null: the
# config class's pattern), AltUp's and Laurel's sizes
OVERRIDES[("gemma3n", "intermediate_size")] = any_of(COUNT, list_of(COUNT))
_SPARSITY = Rule("a number in [0, 1)", lambda v: NUMBER.ok(v) and 0 <= v < 1)
RULES.update({"activation_sparsity_pattern": any_of(_SPARSITY, list_of(_SPARSITY)).or_null(),
              "altup_num_inputs": COUNT, "altup_active_idx": ZERO_OR_COUNT, "laurel_rank": COUNT,
              "altup_correct_scale": BOOL, "altup_coef_clip": NUMBER.or_null()})
# MiniMax-01 (minimax_01): the release's residual weights and switches (the family checks their values)
RULES.update({**{f"layernorm_{part}_{ab}": NUMBER for part in ("full_attention", "linear_attention", "mlp")
                 for ab in ("alpha", "beta")},
              "postnorm": BOOL, "shared_moe_mode": STRING, "block_size": COUNT})
# dots3-note: the sliding layers' latent geometry, and the switches the converter checks (the family refuses all
# but the values it converts)
RULES.update({**{k: COUNT for k in ("swa_kv_lora_rank", "swa_q_lora_rank", "swa_qk_nope_head_dim",
                                    "swa_qk_rope_head_dim", "shared_experts_intermediate_size")},
              **{k: BOOL.or_null() for k in ("apply_mla_qkv_lora_rescale", "k_rope_only_layernorm", "use_dsa",
                                             "use_dynamic_rsf", "moe_gating_fp32", "use_sliding_window")},
              **{k: STRING for k in ("attention_gate_type", "swa_attention_gate_type", "normalization", "final_norm")}})
# (Muse Glimmer): 0 states a layer without rope (NoPE), as released
OVERRIDES[("muse_glimmer_text", "layer_rope_theta")] = list_of(NON_NEGATIVE).or_null()
# Nemotron-H Puzzle (nemotron_h_puzzle): one object per layer (block_type; a moe block's expert width and top-k; the
# family compares any other key with the top level's), the layer count null where block_configs gives it, the MTP
# head's blocks (dropped)
OVERRIDES[("nemotron_h_puzzle", "block_configs")] = list_of(object_of(
    {"block_type": STRING, "moe_intermediate_size": COUNT.or_null(), "num_experts_per_tok": COUNT.or_null()}))
OVERRIDES[("nemotron_h_puzzle", "num_hidden_layers")] = COUNT.or_null()
RULES.update({"mtp_block_configs": list_of(OBJECT).or_null()})
# HRM-Text (hrm_text): the two stacks' cycle counts and per-stack depth (null: num_hidden_layers is it), the embedding
# scale (null: 1 / initializer_range), the prefix-LM switch, the training-only gradient list; an initializer_range in
# HrmTextConfig's interval, since the scale may be its inverse
RULES.update({"H_cycles": COUNT, "L_cycles": COUNT, "num_layers_per_stack": COUNT.or_null(),
              "embedding_scale": POSITIVE.or_null(), "prefix_lm": BOOL, "L_bp_cycles": list_of(INT).or_null()})
OVERRIDES[("hrm_text", "initializer_range")] = Rule("a number in [0, 1]", lambda v: NUMBER.ok(v) and 0 <= v <= 1)
# HyperCLOVA X: attention_multiplier null means head_dim ** -0.5 (HyperCLOVAXConfig computes it)
OVERRIDES[("hyperclovax", "attention_multiplier")] = NUMBER.or_null()
# GLM-5.3-Flash (glm5_next_text): latent attention without rope (qk_rope_head_dim 0, head_dim the rope width 0),
# the delta attention's sizes and gate bound, mHC's streams, the indexer's key pool, the SwiGLU clamp
for _key in ("head_dim", "qk_rope_head_dim"):
    OVERRIDES[("glm5_next_text", _key)] = ZERO_OR_COUNT.or_null()
OVERRIDES[("glm5_next_text", "linear_attn_config")] = object_of({
    "full_attn_layers": list_of(ZERO_OR_COUNT), "kda_layers": list_of(ZERO_OR_COUNT), "head_dim": COUNT,
    "num_heads": COUNT, "short_conv_kernel_size": COUNT, "gate_lower_bound": NUMBER.or_null(), "safe_gate": BOOL})
OVERRIDES[("glm5_next_text", "linear_lower_bound")] = NUMBER.or_null()
OVERRIDES[("glm5_next_text", "swiglu_limit")] = NUMBER.or_null()
RULES.update({"mla_use_nope": BOOL, "mhc": BOOL, "index_kpool": COUNT, "index_kpool_always_select_tail": BOOL,
              "hc_sinkhorn_iters": COUNT})
# (PLaMo 3): its flat rope keys (the sliding layers' base, the YaRN factor and the length it scales from, null where
# unscaled), its window, the embedding scale switch and the linear layers' kind (the family refuses all but normal)
RULES.update({"rope_local_theta": POSITIVE.or_null(), "rope_scaling_factor": POSITIVE.or_null(),
              "initial_context_length": COUNT.or_null(), "window_size": ZERO_OR_COUNT.or_null(),
              "scale_embedding": BOOL, "linear_type": STRING,
              "interleaved_sliding_window": list_of(COUNT.or_null()).or_null()})
# MiniMax-M3 (minimax_m3_vl_text): moe_layer_freq is one 0/1 per layer; sparse_attention_config is an object the
# family checks key by key
OVERRIDES[("minimax_m3_vl_text", "moe_layer_freq")] = list_of(ZERO_OR_COUNT)
RULES.update({"sparse_attention_config": OBJECT})
# (Step-3.5-Flash): rope_theta as one base per layer, the sliding layers' heads, the mixture's keys (moe_layers_enum
# a comma-separated string of layer indices), the per-layer rotary fractions and SwiGLU clamps (0 or null: none)
for _family in ("step3p5", "step3p7"):  # step3p7: Step-3.7's image-text wrapper around the same text model
    OVERRIDES[(_family, "rope_theta")] = any_of(POSITIVE, list_of(POSITIVE))
RULES.update({"num_attention_groups": COUNT, "attention_other_setting": OBJECT.or_null(),
              "moe_top_k": COUNT, "share_expert_dim": ZERO_OR_COUNT,
              "moe_layers_enum": STRING, "moe_every_n_layer": COUNT, "moe_router_activation": STRING,
              "moe_router_scaling_factor": NUMBER, "use_moe_router_bias": BOOL, "norm_expert_weight": BOOL,
              "need_fp32_gate": BOOL, "use_head_wise_attn_gate": BOOL, "partial_rotary_factors": list_of(FRACTION),
              "swiglu_limits": list_of(NON_NEGATIVE.or_null()).or_null(),
              "swiglu_limits_shared": list_of(NON_NEGATIVE.or_null()).or_null(),
              "yarn_only_types": list_of(STRING).or_null(), "max_seq_len": COUNT,
              "use_rope_layers": list_of(BOOL).or_null()})
# ERNIE 4.5 MoE states moe_num_experts 0 for "no experts" (its family refuses that by name): a count for step3p5 only
OVERRIDES[("step3p5", "moe_num_experts")] = OVERRIDES[("step3p7", "moe_num_experts")] = COUNT
# (PLaMo 1): the query heads sharing each KV head (num_attention_heads / n_shared_head KV heads)
RULES.update({"n_shared_head": COUNT})
# JAIS 1 (jais): its config.json is read as written (no config class types it): the attention switches, the muP
# multipliers in both spellings releases use, and the ALiBi scaling object (the family refuses all but null)
for _key in ("scale_attn_weights", "scale_attn_by_inverse_layer_idx", "scale_qk_dot_by_d", "mup_scale_qk_dot_by_d",
             "reorder_and_upcast_attn"):
    OVERRIDES[("jais", _key)] = BOOL
for _key in ("embeddings_scale", "mup_embeddings_scale", "width_scale", "mup_width_scale", "mup_output_alpha"):
    OVERRIDES[("jais", _key)] = POSITIVE
OVERRIDES[("jais", "alibi_scaling")] = OBJECT.or_null()
# (Refact): multi_query is a switch (no config class defaults it for model_type gpt_refact; the family refuses false)
OVERRIDES[("refact", "multi_query")] = BOOL
# (Gemma 3): attention_chunk_size, read only to refuse chunked attention (Rnj-1.5) by name
OVERRIDES[("gemma3", "attention_chunk_size")] = COUNT.or_null()
# Qwen-1: its long-context and bias switches, and the Qwen-VL / Qwen-Audio encoder configs it refuses
OVERRIDES.update({("qwen", k): BOOL for k in ("use_dynamic_ntk", "use_logn_attn", "no_bias")})
OVERRIDES.update({("qwen", k): OBJECT for k in ("visual", "audio")})
# Ling 3.0 (bailing_hybrid): the hybrid's group size, its delta attention's switches, conv kernel and gate bound (the
# family refuses a bound that is not negative), the attention gate's granularity and the SwiGLU clamp lists (null in
# every release; the family refuses others by name)
for _key, _rule in (("layer_group_size", COUNT), ("short_conv_kernel_size", COUNT), ("qk_head_dim", COUNT),
                    ("kda_lower_bound", NUMBER), ("kda_safe_gate", BOOL), ("no_kda_lora", BOOL), ("use_kda_lora", BOOL),
                    ("gated_attention_proj_granularity_type", STRING.or_null()),
                    ("expert_swiglu_limit_list", list_of(NUMBER.or_null()).or_null()),
                    ("share_expert_swiglu_limit_list", list_of(NUMBER.or_null()).or_null())):
    OVERRIDES[("bailing_hybrid", _key)] = _rule
# Mistral Large 3 / Small 4 in Mistral's format (mistral_moe_format): params.json's activation (the converter's
# hidden_act; the family refuses any but silu)
OVERRIDES[("mistral_moe_format", "activation")] = STRING
# LFM2 (lfm2_vl): the first LFM2 / LFM2-VL releases' duplicated widths and eps under Liquid's own names (the
# family refuses any that disagrees with hidden_size / num_attention_heads / norm_eps)
OVERRIDES.update({("lfm2", k): COUNT.or_null() for k in ("block_dim", "conv_dim", "conv_dim_out")})
OVERRIDES[("lfm2", "block_norm_eps")] = NON_NEGATIVE.or_null()
# PLaMo 2 (plamo2): its head width, the Mamba/attention layer pattern and the switch that turns Mamba off (the family
# refuses mamba_enabled false: no Mamba layer)
OVERRIDES.update({("plamo2", "hidden_size_per_head"): COUNT, ("plamo2", "mamba_step"): COUNT,
                  ("plamo2", "mamba_enabled"): BOOL})
RULES.update({"rope_interleave": BOOL})  # deepseek_v3's; kimi_k2 (no transformers class, no defaults) needs it stated
# DeepSeek-V4 (deepseek_v4): the per-layer compressions and hash-layer count the converter reads from config.json, the
# experts' form; qk_rope_head_dim computed by DeepseekV4Config where unstated (the family's normalise)
RULES.update({"compress_ratios": list_of(ZERO_OR_COUNT), "num_hash_layers": ZERO_OR_COUNT, "expert_dtype": STRING})
OVERRIDES[("deepseek_v4", "qk_rope_head_dim")] = COUNT.or_null()
# Kimi-K3 (kimi_k3, no transformers class, so no class default types them): situ's two betas (divisors), the residual
# block size, the latent width, the release's switches and its router's sizes that Kimi-Linear's class defaults type
RULES.update({"activation_situ_beta": POSITIVE, "activation_situ_linear_beta": NUMBER, "attn_res_block_size": COUNT,
              "routed_expert_hidden_size": COUNT.or_null(), "latent_moe_use_norm": BOOL, "mla_use_output_gate": BOOL,
              "moe_renormalize": BOOL, "num_expert_group": COUNT.or_null()})
# Falcon's first revisions (RefinedWebModel / RefinedWeb) have no config class to give their keys a default's type:
# the same types FalconConfig's defaults give them
OVERRIDES.update({("falcon", k): BOOL for k in ("alibi", "multi_query", "new_decoder_architecture", "parallel_attn")})
OVERRIDES[("falcon", "activation")] = STRING
