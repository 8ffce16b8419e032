"""Kimi-K3 (moonshotai/Kimi-K3: KimiK3ForConditionalGeneration around a kimi_linear text_config, remote code only)
-> llama.cpp `kimi-k3` (the converter's KimiK3Model, conversion/kimi_k3.py).

Kimi-Linear's hybrid (hfview/families/kimi_linear.py: Kimi Delta Attention layers, and at
linear_attn_config.full_attn_layers DeepSeek's latent attention without rope, its kv_b_proj split into attn_k_b /
attn_v_b) with the text model's tensors under `language_model.` (the vision tower and projector skipped, text only)
and what K3 adds:
* cross-layer attention residuals (attn_res_block_size): before attention, before the MLP and before the final norm
  each token mixes the banked block inputs and the running sum by a softmax of scores. Each score is the dot of an
  RMS-normalised input with `<x>_res_norm.weight * <x>_res_proj.weight`, which the converter writes as that one
  product (F32): attn_res_score, ffn_res_score, output_res_score (views.VectorProduct, made where the second of the
  pair is stored);
* a latent MoE: the routed experts run at routed_expert_hidden_size between routed_expert_down_proj and
  routed_expert_up_proj (with routed_expert_norm on their sum), the router and the shared experts at full width;
* the situ activation in every MLP: beta * tanh(gate / beta) * sigmoid(gate) * linear_beta * tanh(up / linear_beta);
* on latent layers a sigmoid output gate before o_proj, on delta layers a full-rank gate for the gated norm: both
  stored as self_attn.g_proj, written attn_gate or ssm_g by the layer's kind (as KimiK3Model.modify_tensors);
* the delta attention's decay, where gate_lower_bound is stated: lower_bound * sigmoid(exp(A_log) * (f + dt_bias)).

No config class fills anything in (the converter reads config.json as stated): a key it needs is refused by name
where absent. Its vocabulary is Kimi-Linear's (tokenizer.json's byte-level BPE where there is one, else Kimi's
tiktoken.model), its EOS then config.json's eos_token_id (the turn terminator), and, where the checkpoint states no
chat template, llama.cpp's bundled Kimi-K3.jinja (_parts/kimi_k3_template.py).
"""
from __future__ import annotations

import re
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, Skip, Split, Stacked, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import boolean, f32, text_model_parameters, u32
from ..shards import index_shards
from ..views import MXFP4ExpertStack, MXFP4Pair, Stack, deepseek_v4_expert, vector_products
from ._parts.latent import key_half, value_half
from ._parts.state_space import KIMI_DELTA_ATTENTION, check_kimi_heads, check_leading_dense

ARCH = "kimi-k3"
_MOSTLY_MXFP4_MOE = 38

_M = "model."
_L = _M + "layers.{bid}."
_A = _L + "self_attn."
_S = _L + "block_sparse_moe."

DEFAULTS = {"kimi_k3": {}}  # no transformers class: nothing is filled in

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "num_shared_experts", "routed_scaling_factor", "kv_lora_rank",
    "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim", "num_expert_group", "topk_group",
    "num_experts_per_token", "moe_renormalize", "hidden_act", "max_position_embeddings", "rms_norm_eps",
    "tie_word_embeddings", "num_experts", "linear_attn_config", "first_k_dense_replace", "moe_router_activation_func",
    "mla_use_nope", "mla_use_output_gate", "routed_expert_hidden_size", "latent_moe_use_norm",
    "activation_situ_beta", "activation_situ_linear_beta", "attn_res_block_size", "rope_parameters",
})
HARMLESS: Harmless = {
    # the multimodal wrapper's keys (the vision tower and its placeholder token, which the text model never sees)
    "vision_config": ANY, "media_placeholder_token_id": ANY, "image_placeholder": ANY, "ignore_index": ANY,
    # the released code's switches at the values every release states: grouped top-k over one group (its
    # noaux_tc selection bias is the router's e_score_correction_bias), no MTP layers, every layer after the dense
    # ones a mixture
    "use_grouped_topk": ANY, "topk_method": ("noaux_tc",), "num_nextn_predict_layers": (0,), "moe_layer_freq": (1,),
}

some = False  # each exists on the layers of one kind only (llama.cpp tells them by head_count_kv and the dense count)

# the pairs whose product the converter writes (KimiK3Model._RES_FUSIONS): the stored endings, the fused one
RES_PAIRS = (("self_attention_res_norm.weight", "self_attention_res_proj.weight", "self_attention_res_score"),
             ("mlp_res_norm.weight", "mlp_res_proj.weight", "mlp_res_score"),
             ("output_attn_res_norm.weight", "output_attn_res_proj.weight", "output_attn_res_score"))

def _experts(sources, h):
    """The block's experts stacked: as stored, or (the release) their MXFP4 pairs repacked bits only into ggml's."""
    if isinstance(sources[0], MXFP4Pair):
        return MXFP4ExpertStack(tuple(sources))
    return Stack(tuple(sources))


TENSORS = (
    Skip("vision_tower.{rest}"),
    Skip("mm_projector.{rest}"),
    Tensor(_M + "embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor(_M + "norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_M + "output_attn_res_score", "output_res_score.weight"),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor(_L + "self_attention_res_score", "blk.{bid}.attn_res_score.weight"),
    Tensor(_L + "mlp_res_score", "blk.{bid}.ffn_res_score.weight"),
    # K3's delta attention has the full-rank gate only (g_a / g_b are Kimi-Linear's)
    *(r for r in KIMI_DELTA_ATTENTION if not r.hf.endswith(("g_a_proj.weight", "g_b_proj.weight"))),
    Tensor(_A + "g_proj_kda.weight", "blk.{bid}.ssm_g.weight", required=some),
    # latent attention (no rope), its query bottleneck where q_lora_rank says, its output gate
    Tensor(_A + "q_a_proj.weight", GGUF.ATTN_Q_A.weight, required=some),
    Tensor(_A + "q_a_layernorm.weight", GGUF.ATTN_Q_A_NORM.weight, required=some),
    Tensor(_A + "q_b_proj.weight", GGUF.ATTN_Q_B.weight, required=some),
    Tensor(_A + "kv_a_proj_with_mqa.weight", GGUF.ATTN_KV_A_MQA.weight, required=some),
    Tensor(_A + "kv_a_layernorm.weight", GGUF.ATTN_KV_A_NORM.weight, required=some),
    Split(_A + "kv_b_proj.weight", ((GGUF.ATTN_K_B.weight, key_half),
                                    (GGUF.ATTN_V_B.weight, value_half)), required=some),
    Tensor(_A + "g_proj_mla.weight", GGUF.ATTN_GATE.weight, required=some),
    Tensor(_A + "o_proj.weight", GGUF.ATTN_OUT.weight),
    # the leading dense layers, then the latent mixture
    *(Tensor(_L + f"mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=some) for p in ("gate", "up", "down")),
    Tensor(_S + "gate.weight", GGUF.FFN_GATE_INP.weight, required=some),
    Tensor(_S + "gate.e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias, required=some),
    *(Stacked(_S + f"experts.{{x}}.{w}.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "num_experts", required=some,
              group="experts", view=_experts) for w, p in (("w1", "gate"), ("w2", "down"), ("w3", "up"))),
    *(Tensor(_S + f"shared_experts.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=some)
      for p in ("gate", "up", "down")),
    *(Tensor(_S + f"routed_expert_{p}.weight", f"blk.{{bid}}.ffn_routed_{g}.weight", required=some)
      for p, g in (("down_proj", "down"), ("up_proj", "up"), ("norm", "norm"))),
)

_G_PROJ = re.compile(r"model\.layers\.(\d+)\.self_attn\.g_proj\.weight$")


def rename(name: str, h: dict) -> str:
    """self_attn.g_proj is two tensors under one name: the full-rank gate on delta layers, the output gate on latent
    ones; the converter resolves it by the layer's kind, and so does this name."""
    m = _G_PROJ.search(name)
    if not m:
        return name
    latent = int(m.group(1)) + 1 in h["linear_attn_config"]["full_attn_layers"]
    return name.removesuffix(".weight") + ("_mla.weight" if latent else "_kda.weight")


_MXFP4_FORMAT = "mxfp4-pack-quantized"
_PACKED_EXPERT = re.compile(r"model\.layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.(w[123])\.weight_packed$")


def mxfp4_packed(h: dict) -> bool:
    """KimiK3Model._is_mxfp4_packed: compressed-tensors' mxfp4-pack-quantized (the release's routed experts)."""
    quant = h.get("quantization_config") or {}
    return quant.get("quant_method") == "compressed-tensors" and quant.get("format") == _MXFP4_FORMAT


def _mxfp4_experts(stored: dict) -> dict:
    """KimiK3Model's MXFP4 path: each routed expert's weight_packed / weight_scale one MXFP4Pair (the layout
    DeepSeek-V4's experts share) named as its unquantized weight, all of them first, block by block and w1, w2, w3
    within a block (its generate_extra_tensors, sorted by block and projection), then the rest in order. A packed
    weight outside the routed experts is refused, as the converter refuses it (it has no repack path for it)."""
    experts, out = [], {}
    for name, t in stored.items():
        if name.endswith(".weight_scale") and name.removesuffix("_scale") + "_packed" in stored:
            continue  # read with its packed codes
        if not name.endswith(".weight_packed"):
            out[name] = t
            continue
        m = _PACKED_EXPERT.search(name)
        if m is None:
            raise CheckpointError(f"{t.path.name}: {name!r} is MXFP4 outside the routed experts; the converter "
                                  f"repacks only the routed experts and refuses it (NotImplementedError)")
        scale = stored.get(name.removesuffix("_packed") + "_scale")
        if scale is None:
            raise CheckpointError(f"{t.path.name}: {name!r} has no weight_scale beside it (KeyError in the converter)")
        key = (int(m.group(1)), m.group(3), int(m.group(2)))
        experts.append((key, name.removesuffix("_packed"), deepseek_v4_expert(t, scale)))
    return {**{name: pair for _, name, pair in sorted(experts, key=lambda e: e[0])}, **out}


def index(path: Path) -> dict:
    """The stored tensors as KimiK3Model takes them: each residual score's norm and proj one product, where the
    second of the pair is stored; where the config states mxfp4-pack-quantized, the routed experts' MXFP4 pairs
    first (_mxfp4_experts)."""
    from ..config import read_checkpoint_config

    stored = vector_products(index_shards(path), RES_PAIRS)
    return _mxfp4_experts(stored) if mxfp4_packed(read_checkpoint_config(Path(path))[0]) else stored


# keys KimiK3Model reads without a default (a KeyError or a failed assert in the converter where absent)
_NEEDED = ("hidden_act", "mla_use_nope", "moe_router_activation_func", "linear_attn_config", "first_k_dense_replace",
           "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "num_experts",
           "num_experts_per_token", "moe_intermediate_size", "num_shared_experts", "routed_scaling_factor",
           "moe_renormalize", "activation_situ_beta", "activation_situ_linear_beta", "attn_res_block_size",
           "num_key_value_heads", "rms_norm_eps", "vocab_size")

REFUSE = (
    *(Refuse(k, stated, "KimiK3Model reads it without a default (the converter fails without it) and no config "
          "class fills it in; state it as the release does") for k in _NEEDED),
    Refuse("hidden_act", ("situ",), "KimiK3Model asserts the situ activation, the one llama.cpp's kimi-k3 computes"),
    Refuse("mla_use_nope", (True,), "KimiK3Model asserts latent attention without rope (llama.cpp's kimi-k3 has no "
           "position input)"),
    Refuse("moe_router_activation_func", ("sigmoid",), "KimiK3Model asserts a sigmoid router"),
    Refuse("moe_renormalize", bool, "written as expert_weights_norm, a flag"),
    Refuse("num_expert_group", (1, None), "neither the converter nor llama.cpp's kimi-k3 limits the groups the "
           "release's router would"),
    Refuse("tie_word_embeddings", unset, "llama.cpp's kimi-k3 requires an output.weight, which the converter does not "
           "write for tied embeddings"),
    Refuse("linear_attn_config.use_full_rank_gate", (True,), "llama.cpp's kimi-k3 reads the delta attention's "
           "full-rank gate (ssm_g) only, not Kimi-Linear's g_a / g_b pair"),
    Refuse("num_shared_experts", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
           "every mixture layer of the release has shared experts, whose width it scales"),
    Refuse("qk_nope_head_dim", lambda v: v >= 1, "the latent attention needs a key part outside the shared one"),
)


def check(h: dict, path: Path) -> None:
    lac, n = h["linear_attn_config"], h["num_hidden_layers"]
    full, kda = lac.get("full_attn_layers"), lac.get("kda_layers")
    ok = isinstance(full, list) and isinstance(kda, list) and all(
        isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= n for i in (*full, *kda))
    if not ok or sorted([*full, *kda]) != list(range(1, n + 1)):
        raise ConfigError(f"{path}: linear_attn_config full_attn_layers {full!r} and kda_layers {kda!r}: together "
                          f"they must name each of the {n} layers once (1-based)")
    if not kda:
        raise ConfigError(f"{path}: no delta-attention layer: llama.cpp's kimi-k3 needs its recurrent layers "
                          f"(no released Kimi-K3 is all latent attention)")
    missing = [k for k in ("head_dim", "num_heads", "short_conv_kernel_size") if k not in lac]
    if missing:
        raise ConfigError(f"{path}: linear_attn_config has no {', '.join(missing)}: KimiK3Model reads them")
    check_kimi_heads(h, path, ARCH, "the release")
    dense = check_leading_dense(h, path, n, ARCH)
    if dense < n and (not h["num_experts"] or not h["num_experts_per_token"]):
        raise ConfigError(f"{path}: num_experts {h['num_experts']}, num_experts_per_token "
                          f"{h['num_experts_per_token']}: llama.cpp's kimi-k3 needs routed experts in its mixture "
                          f"layers")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """KimiK3Model.set_gguf_parameters: TextModel's entries (one KV head: latent attention read as multi-query), the
    per-layer KV heads written over that entry, then the vocabulary size, the delta attention's sizes and gate bound,
    the latent ranks and widths, the mixture's sizes and routing, the latent width, situ's betas and the residual
    block size."""
    # MXFP4 experts: the file type MOSTLY_MXFP4_MOE at every outtype (KimiK3Model.prepare_tensors sets it after its
    # tensors)
    kv = text_model_parameters(dict(h, num_key_value_heads=1), ARCH, block_count,
                               _MOSTLY_MXFP4_MOE if mxfp4_packed(h) else file_type)
    lac, kv_lora, rope = h["linear_attn_config"], h["kv_lora_rank"], h["qk_rope_head_dim"]
    heads = [1 if i + 1 in lac["full_attn_layers"] else 0 for i in range(h["num_hidden_layers"])]
    at = next(i for i, e in enumerate(kv) if e.key == f"{ARCH}.attention.head_count_kv")
    kv[at] = KV(Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH), ValueType.ARRAY, heads, ValueType.INT32)
    kv += [u32(Keys.LLM.VOCAB_SIZE.format(arch=ARCH), h["vocab_size"]),
           u32(Keys.SSM.CONV_KERNEL.format(arch=ARCH), lac["short_conv_kernel_size"]),
           u32(Keys.KDA.HEAD_DIM.format(arch=ARCH), lac["head_dim"])]
    if lac.get("gate_lower_bound") is not None:
        kv.append(f32(Keys.KDA.GATE_LOWER_BOUND.format(arch=ARCH), lac["gate_lower_bound"]))
    if h.get("q_lora_rank") is not None:
        kv.append(u32(Keys.Attention.Q_LORA_RANK.format(arch=ARCH), h["q_lora_rank"]))
    kv += [u32(Keys.Attention.KV_LORA_RANK.format(arch=ARCH), kv_lora),
           u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), rope),
           u32(Keys.Attention.KEY_LENGTH.format(arch=ARCH), kv_lora + rope),
           u32(Keys.Attention.VALUE_LENGTH.format(arch=ARCH), kv_lora),
           u32(Keys.Attention.KEY_LENGTH_MLA.format(arch=ARCH), h["qk_nope_head_dim"] + rope),
           u32(Keys.Attention.VALUE_LENGTH_MLA.format(arch=ARCH), h["v_head_dim"]),
           u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_intermediate_size"]),
           u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=ARCH), h["num_shared_experts"]),
           u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=ARCH), h["first_k_dense_replace"]),
           f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=ARCH), h["routed_scaling_factor"]),
           boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=ARCH), h["moe_renormalize"])]
    kv = _over(kv, u32(Keys.LLM.EXPERT_GATING_FUNC.format(arch=ARCH), 2))  # sigmoid, written over TextModel's
    if h.get("routed_expert_hidden_size") is not None:
        kv.append(u32(Keys.LLM.EXPERT_LATENT_LENGTH.format(arch=ARCH), h["routed_expert_hidden_size"]))
    kv += [f32(Keys.Activation.SITU_BETA.format(arch=ARCH), h["activation_situ_beta"]),
           f32(Keys.Activation.SITU_LINEAR_BETA.format(arch=ARCH), h["activation_situ_linear_beta"]),
           u32(Keys.AttnRes.BLOCK_SIZE.format(arch=ARCH), h["attn_res_block_size"])]
    return kv


def _over(kv: list, entry: KV) -> list:
    """`entry` in the place of the one of its key (GGUFWriter keeps a key's first place), else at the end."""
    at = next((i for i, e in enumerate(kv) if e.key == entry.key), None)
    if at is None:
        return [*kv, entry]
    return [*kv[:at], entry, *kv[at + 1:]]


def vocab(model_dir: Path, h: dict) -> list:
    """KimiK3Model.set_vocab: Kimi-Linear's (tokenizer.json's byte-level BPE where there is one, else Kimi's
    tiktoken.model as its kimi-k2 branch reads it), its EOS then config.json's eos_token_id written over the
    tokenizer's, and llama.cpp's bundled Kimi-K3 template where the checkpoint states no chat template."""
    from hfview.tokenizer.special import CHAT_TEMPLATE
    from hfview.tokenizer.vocab import gpt2_vocab

    from ._parts.kimi_k3_template import TEMPLATE
    from ._parts.kimi_tiktoken import is_kimi_tiktoken, kimi_vocab
    model_dir = Path(model_dir)
    if is_kimi_tiktoken(model_dir):
        kv = kimi_vocab(model_dir, h, eos_from_tokenizer=True)
    elif (model_dir / "tokenizer.json").is_file():
        kv = gpt2_vocab(model_dir, h)
    else:
        raise ConfigError(f"{model_dir}: neither tokenizer.json nor tiktoken.model: the converter reads Kimi-K3's "
                          f"vocabulary from one of them")
    if h.get("eos_token_id") is not None:
        kv = _over(kv, u32(Keys.Tokenizer.EOS_ID, h["eos_token_id"]))
    if not any(e.key == CHAT_TEMPLATE for e in kv):
        kv.append(KV(CHAT_TEMPLATE, ValueType.STRING, TEMPLATE))
    return kv


FAMILY = Family(
    name="kimi_k3",
    gguf_arch=ARCH,
    # the converter picks KimiK3Model by the wrapper's name; the merged config states its text_config's
    architectures=("KimiK3ForConditionalGeneration", "KimiLinearForCausalLM"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    rename=rename,
    index=index,
)
