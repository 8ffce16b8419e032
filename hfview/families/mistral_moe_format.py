"""Mistral Large 3 / Small 4 in Mistral's own format -> llama.cpp `deepseek2`, as the converter's
`--mistral-format` writes it (its MistralMoeModel, a DeepseekV2Model: hfview/families/deepseek_v2.py).

A directory with params.json, consolidated*.safetensors and tekken.json (no config.json). HfCheckpoint reaches
this family where params.json has a "moe" object (Family.claims); dense params.json files are mistral_format's.
params.json is read as it stands; `normalise` applies the converter's remapping of Mistral's keys to DeepSeek's
(dim -> hidden_size, moe.num_experts -> n_routed_experts, ...; topk_method None, norm_topk_prob true, scoring_func
softmax), so DeepSeek-V2's latent attention and mixture are presented by deepseek_v2's own pieces: kv_b (wkv_b)
split into attn_k_b / attn_v_b, experts stacked, the same KV. Over them come Mistral's yarn KVs, the attention
temperature of llama_4_scaling (scale beta, length yarn's original context) and the converter's fixed yarn log
multiplier 0.1, which llama.cpp reads as mscale_all_dim 1 (DeepSeek's softmax scaling): what yarn.apply_scale false
means (the converter's own mapping for dense Mistral models: mscale_all_dim 1 when not apply_scale), so a
params.json with apply_scale true is refused by name.

Mistral's names: layers.N.attention.{wq_a, q_a_norm, wq_b, wkv_a_with_mqa, kv_a_norm, wkv_b, wo}, layers.N.gate,
layers.N.experts.E.w1/w2/w3, layers.N.shared_experts.w1/w2/w3, feed_forward.w1/w2/w3 in the leading dense layers,
attention_norm, ffn_norm, tok_embeddings, norm, output. A vision tower (params.json's vision_encoder,
vision_encoder.* / vision_language_adapter.* / patch_merger.* / pre_mm_projector_norm tensors) is left out, as the
converter's text conversion leaves it (its --mmproj file is another GGUF).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, RunnerFacts, Skip, Split, Stacked, Tensor, unset
from ..names import GGUF, Keys
from ..params import f32, string, u32
from ._parts.deepseek_moe import check_groups, check_mixture
from ._parts.latent import check_latent_attention, key_half, latent_parameters, value_half
from .mistral_format import consolidated_tensors

MODEL_TYPE = "mistral-params-moe"
ARCH = "deepseek2"

READS = frozenset({
    "dim", "n_layers", "head_dim", "hidden_dim", "n_heads", "n_kv_heads", "norm_eps", "rope_theta", "vocab_size",
    "max_position_embeddings", "tied_embeddings", "activation",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "moe", "yarn", "llama_4_scaling",
})
# max_seq_len / max_batch_size: serving limits of Mistral's reference code (the converter copies max_seq_len into
# its hparams and writes nothing of it); vision_encoder: the tower, which the text conversion leaves out
HARMLESS: Harmless = {"max_seq_len": ANY, "max_batch_size": ANY, "vision_encoder": ANY}

# params.json's moe object: what the converter maps (Mistral key -> DeepSeek key), and its parallelism switches
MOE_KEYS = {"route_every_n": "moe_layer_freq", "first_k_dense_replace": "first_k_dense_replace",
            "num_experts_per_tok": "num_experts_per_tok", "num_experts": "n_routed_experts",
            "expert_hidden_dim": "moe_intermediate_size", "routed_scale": "routed_scaling_factor",
            "num_shared_experts": "n_shared_experts", "num_expert_groups": "n_group",
            "num_expert_groups_per_tok": "topk_group"}
MOE_HARMLESS = frozenset({"expert_parallel", "expert_model_parallel"})
# the converter's top-level renames (MistralMoeModel.__init__)
TOP_KEYS = {"dim": "hidden_size", "norm_eps": "rms_norm_eps", "n_kv_heads": "num_key_value_heads",
            "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads", "hidden_dim": "intermediate_size"}
_REQUIRED = ("dim", "n_layers", "n_heads", "n_kv_heads", "hidden_dim", "norm_eps", "vocab_size", "kv_lora_rank",
             "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "yarn")
_MOE_REQUIRED = ("num_experts", "num_experts_per_tok", "expert_hidden_dim", "num_shared_experts")
_YARN_KEYS = ("factor", "beta", "alpha", "original_max_position_embeddings", "apply_scale")

_L = "layers.{bid}."
_SOME = False  # dense layers have feed_forward.*, mixture layers gate / experts / shared_experts

TENSORS = (
    # the vision tower and its adapter: the converter's text conversion drops these names
    Skip("vision_encoder.{rest}"), Skip("vision_language_adapter.{rest}"), Skip("patch_merger.{rest}"),
    Skip("pre_mm_projector_norm.{rest}"),
    Tensor("tok_embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("norm.weight", GGUF.OUTPUT_NORM.weight),
    # Mistral's name is not the lm_head.weight the converter skips when tied: written whenever stored
    Tensor(GGUF.OUTPUT.weight, GGUF.OUTPUT.weight, required=lambda h: not h.get("tie_word_embeddings")),
    Tensor(_L + "attention_norm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "attention.wq_a.weight", GGUF.ATTN_Q_A.weight),
    Tensor(_L + "attention.q_a_norm.weight", GGUF.ATTN_Q_A_NORM.weight),
    Tensor(_L + "attention.wq_b.weight", GGUF.ATTN_Q_B.weight),
    Tensor(_L + "attention.wkv_a_with_mqa.weight", GGUF.ATTN_KV_A_MQA.weight),
    Tensor(_L + "attention.kv_a_norm.weight", GGUF.ATTN_KV_A_NORM.weight),
    Split(_L + "attention.wkv_b.weight", ((GGUF.ATTN_K_B.weight, key_half),
                                          (GGUF.ATTN_V_B.weight, value_half))),
    Tensor(_L + "attention.wo.weight", GGUF.ATTN_OUT.weight),
    Tensor(_L + "ffn_norm.weight", GGUF.FFN_NORM.weight),
    Tensor(_L + "feed_forward.w1.weight", GGUF.FFN_GATE.weight, required=_SOME),
    Tensor(_L + "feed_forward.w2.weight", GGUF.FFN_DOWN.weight, required=_SOME),
    Tensor(_L + "feed_forward.w3.weight", GGUF.FFN_UP.weight, required=_SOME),
    Tensor(_L + "gate.weight", GGUF.FFN_GATE_INP.weight, required=_SOME),
    # one group: the converter stacks a block's experts when their last tensor arrives, down / gate / up
    Stacked(_L + "experts.{x}.w2.weight", GGUF.FFN_DOWN_EXP.weight, "n_routed_experts", _SOME, "experts"),
    Stacked(_L + "experts.{x}.w1.weight", GGUF.FFN_GATE_EXP.weight, "n_routed_experts", _SOME, "experts"),
    Stacked(_L + "experts.{x}.w3.weight", GGUF.FFN_UP_EXP.weight, "n_routed_experts", _SOME, "experts"),
    Tensor(_L + "shared_experts.w1.weight", GGUF.FFN_GATE_SHEXP.weight, required=_SOME),
    Tensor(_L + "shared_experts.w2.weight", GGUF.FFN_DOWN_SHEXP.weight, required=_SOME),
    Tensor(_L + "shared_experts.w3.weight", GGUF.FFN_UP_SHEXP.weight, required=_SOME),
)


def claims(params: dict) -> bool:
    """params.json with a "moe" object: the converter's MistralMoeModel (dense ones are MistralModel's)."""
    return params.get("moe") is not None


def normalise(h: dict) -> dict:
    """MistralMoeModel.__init__'s remapping, onto a copy: DeepSeek's keys beside Mistral's, the converter's
    defaults where params.json is silent, the router it states for every Mistral mixture."""
    h = dict(h)
    for key, new in TOP_KEYS.items():
        if key in h:
            h[new] = h[key]
    h["hidden_act"] = h.get("activation", "silu")
    h["tie_word_embeddings"] = h.get("tied_embeddings", False)
    h["max_position_embeddings"] = h.get("max_position_embeddings", 128_000)
    for key, new in MOE_KEYS.items():
        if key in h["moe"]:
            h[new] = h["moe"][key]
    h.update(topk_method=None, norm_topk_prob=True, scoring_func="softmax")
    return h


REFUSE = (
    Refuse("moe", lambda v: isinstance(v, dict), "must be an object (Mistral's mixture: num_experts, ...)"),
    # yarn's shape is checked after its presence (check); a yarn that is no object reads apply_scale as absent
    Refuse("yarn.apply_scale", unset, "the converter's own mapping of it is mscale_all_dim 0 (plain YaRN, the "
           "rotations scaled), but for a mixture it writes yarn_log_multiplier 0.1 (mscale_all_dim 1, the softmax "
           "scaled by (1 + 0.1 ln factor)^2) whatever apply_scale says, so llama.cpp would compute otherwise than the "
           "model; every release states false"),
    Refuse("llama_4_scaling", lambda v: v is None or isinstance(v, dict) and "beta" in v
           and "original_max_position_embeddings" in v, "must be an object with beta and "
           "original_max_position_embeddings"),
    Refuse("vision_encoder", lambda v: v is None or isinstance(v, dict), "must be an object (the tower's parameters)"),
)


def check(h: dict, path: Path) -> None:
    moe = h["moe"]
    unknown = sorted(set(moe) - set(MOE_KEYS) - MOE_HARMLESS)
    if unknown:
        raise ConfigError(f"{path}: 'moe' key {unknown[0]!r} is not one the converter reads or hfview knows to be "
                          f"harmless ({', '.join(sorted(MOE_KEYS))}); the checkpoint may compute otherwise")
    missing = [k for k in _REQUIRED if k not in h] + [f"moe.{k}" for k in _MOE_REQUIRED if k not in moe]
    if missing:
        raise ConfigError(f"{path}: 'moe' (a Mistral Large 3 / Small 4 mixture with latent attention) but "
                          f"{', '.join(missing)} missing; Mistral's params.json states them all (without yarn the "
                          f"converter fails: its MistralMoeModel reads yarn's original context unconditionally)")
    yarn = h["yarn"]
    if not isinstance(yarn, dict) or any(k not in yarn for k in _YARN_KEYS):
        raise ConfigError(f"{path}: 'yarn' must be an object with {', '.join(_YARN_KEYS)}")
    # here, not in REFUSE: a params.json missing several keys is better told so by the list above
    if h.get("q_lora_rank") is None:
        raise ConfigError(f"{path}: no q_lora_rank (queries without a bottleneck): Mistral's mixtures read queries "
                          f"through wq_a / wq_b, and llama.cpp's deepseek2 requires the rank at this layer count")
    l4 = h.get("llama_4_scaling")
    if l4 is not None and l4["original_max_position_embeddings"] != yarn["original_max_position_embeddings"]:
        raise ConfigError(f"{path}: llama_4_scaling.original_max_position_embeddings "
                          f"{l4['original_max_position_embeddings']} differs from yarn's "
                          f"{yarn['original_max_position_embeddings']}: the converter writes yarn's as the "
                          f"attention temperature length, so llama.cpp would scale queries at other positions "
                          f"than the model does")
    expected = h["qk_nope_head_dim"] + h["qk_rope_head_dim"]
    if h.get("head_dim") is not None and h["head_dim"] != expected:
        raise ConfigError(f"{path}: head_dim {h['head_dim']} is not qk_nope_head_dim + qk_rope_head_dim = "
                          f"{expected}: the query heads of latent attention are that wide")
    check_latent_attention(h, path, "Mistral Large 3")
    check_mixture(h, path)
    if (h.get("n_group") or 1) > 1:
        check_groups(h, path)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """DeepseekV2Model's KV over the remapped hparams, then MistralModel.set_mistral_config (yarn, llama_4_scaling's
    temperature scale), the temperature length (yarn's original context) and the yarn log multiplier 0.1 that
    replaces set_mistral_config's, in its place."""
    yarn = h["yarn"]
    kv = latent_parameters(h, block_count, file_type)
    kv += [string(Keys.Rope.SCALING_TYPE.format(arch=ARCH), "yarn"),
           f32(Keys.Rope.SCALING_FACTOR.format(arch=ARCH), yarn["factor"]),
           f32(Keys.Rope.SCALING_YARN_BETA_FAST.format(arch=ARCH), yarn["beta"]),
           f32(Keys.Rope.SCALING_YARN_BETA_SLOW.format(arch=ARCH), yarn["alpha"]),
           f32(Keys.Rope.SCALING_YARN_LOG_MUL.format(arch=ARCH), 0.0 if yarn["apply_scale"] else 1.0),
           u32(Keys.Rope.SCALING_ORIG_CTX_LEN.format(arch=ARCH), yarn["original_max_position_embeddings"])]
    if (l4 := h.get("llama_4_scaling")) is not None:
        kv.append(f32(Keys.Attention.TEMPERATURE_SCALE.format(arch=ARCH), l4["beta"]))
    kv += [u32(Keys.Attention.TEMPERATURE_LENGTH.format(arch=ARCH), yarn["original_max_position_embeddings"]),
           # [TAG_DEEPSEEK2_YARN_LOG_MUL_FIX]: mscale_all_dim 1 times the legacy 0.1, whatever apply_scale says
           f32(Keys.Rope.SCALING_YARN_LOG_MUL.format(arch=ARCH), 0.1)]
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.mistral import mistral_vocab

    embedding = consolidated_tensors(Path(model_dir)).get("tok_embeddings.weight")
    return mistral_vocab(model_dir, ARCH, n_vocab=embedding.shape[0] if embedding and embedding.shape else 0)


FAMILY = Family(
    name="mistral_moe_format",
    gguf_arch=ARCH,
    architectures=(),
    defaults={MODEL_TYPE: {}},  # params.json is read as it stands: no config class, no defaults
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    config_file="params.json",
    claims=claims,
    index=consolidated_tensors,
    notes={"yarn": "apply_scale false (every release): DeepSeek's mscale_all_dim 1, as the converter writes it; "
                   "apply_scale true is refused: the converter writes the same multiplier for it"},
    runner=RunnerFacts(applies_ffn_scales=False),  # llama.cpp's deepseek2 graph passes its FFNs no scale
)
