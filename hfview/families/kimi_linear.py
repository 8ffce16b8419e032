"""Kimi Linear (Kimi-Linear-48B-A3B: KimiLinearForCausalLM) -> llama.cpp `kimi-linear` (the converter's
KimiLinearModel).

A hybrid: Kimi Delta Attention layers (q/k/v projections, each through its own causal depthwise short
convolution, stored [channels, 1, kernel] and presented (1, channels, 1, kernel); a low-rank forget gate f_a/f_b
with a per-channel dt_bias (written as the dt "projection"'s bias) and one decay per head, A = -exp(A_log),
computed on read; beta from b_proj; a sigmoid-gated RMSNorm per head (o_norm) over the low-rank gate g_a/g_b)
and, at linear_attn_config.full_attn_layers (1-based), DeepSeek's latent attention without rope (NoPE), whose
kv_b_proj the converter splits into attn_k_b / attn_v_b as for deepseek2 (hfview/families/deepseek_v2.py).
Over each layer a leading dense SwiGLU for first_k_dense_replace layers, then a sigmoid router with a selection
bias over stacked experts (w1 gate, w2 down, w3 up) and fused shared experts, renormalised, times
routed_scaling_factor. KV heads are written per layer (0 on delta-attention layers, 1 on latent layers).

The converter reads the layer kinds from linear_attn_config alone, transformers from layer_types where a
config states them: a config where the two disagree is refused by name. Released Kimi-Linear checkpoints ship
only a tiktoken.model with remote tokenizer code; hfview never runs remote code and refuses such a checkpoint by
name (a checkpoint with a tokenizer.json is read as the converter's first try reads it: byte-level BPE).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, Skip, Split, Tensor, stated, unset
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import f32, text_model_parameters, u32
from ._parts.latent import key_half, value_half
from ._parts.state_space import KIMI_DELTA_ATTENTION, check_kimi_heads, check_leading_dense

ARCH = "kimi-linear"

_L = "model.layers.{bid}."
_A = _L + "self_attn."

# transformers 5.24's KimiLinearConfig defaults (to_dict's names: its attribute map saves n_shared_experts as
# num_shared_experts, n_group as num_expert_group, and so on); head_dim is computed where not stated (normalise)
DEFAULTS = {
    "kimi_linear": dict(vocab_size=163840, hidden_size=2304, intermediate_size=9216, moe_intermediate_size=1024,
                        num_hidden_layers=27, num_attention_heads=32, num_key_value_heads=32, num_shared_experts=1,
                        routed_scaling_factor=2.446, kv_lora_rank=512, q_lora_rank=None, qk_rope_head_dim=64,
                        v_head_dim=128, qk_nope_head_dim=128, num_expert_group=1, topk_group=1,
                        num_experts_per_token=8, moe_renormalize=True, hidden_act="silu", model_max_length=1048576,
                        rms_norm_eps=1e-05, tie_word_embeddings=False, attention_bias=False, num_experts=256,
                        linear_head_dim=128, linear_num_heads=32, linear_conv_kernel_dim=4,
                        pad_token_id=163839, bos_token_id=163584, eos_token_id=163586, pretraining_tp=1,
                        initializer_range=0.02, use_cache=True, attention_dropout=0.0, output_router_logits=False,
                        head_dim=64),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "num_shared_experts", "routed_scaling_factor", "kv_lora_rank",
    "q_lora_rank", "qk_rope_head_dim", "v_head_dim", "qk_nope_head_dim", "num_expert_group", "topk_group",
    "num_experts_per_token", "moe_renormalize", "hidden_act", "model_max_length", "rms_norm_eps",
    "tie_word_embeddings", "attention_bias", "num_experts", "linear_head_dim", "linear_num_heads",
    "linear_conv_kernel_dim", "layer_types", "mlp_layer_types", "head_dim", "linear_attn_config",
    "first_k_dense_replace", "moe_router_activation_func", "rope_theta", "rope_scaling", "rope_parameters",
})
# qk_head_dim: recomputed by the config class, read by neither side; the released code's switches at the values
# every release states (no rope in the latent attention, grouped top-k over one group, no MTP layers, every layer
# after the dense ones a mixture)
HARMLESS: Harmless = {"qk_head_dim": ANY, "mla_use_nope": (True,), "use_grouped_topk": ANY,
                      "num_nextn_predict_layers": (0,), "moe_layer_freq": (1,)}
# the head_dim a config states wins over the one KimiLinearConfig computes (qk_rope_head_dim): read under its own name
ALIASES = {"head_dim": "stated_head_dim"}

some = False  # each exists on the layers of one kind only (llama.cpp checks by head_count_kv and the dense count)


TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Skip("lm_head.weight", when=lambda h: bool(h.get("tie_word_embeddings"))),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=lambda h: not h.get("tie_word_embeddings")),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    *KIMI_DELTA_ATTENTION,
    # latent attention (no rope), and the output projection both mixers have
    Tensor(_A + "kv_a_proj_with_mqa.weight", GGUF.ATTN_KV_A_MQA.weight, required=some),
    Tensor(_A + "kv_a_layernorm.weight", GGUF.ATTN_KV_A_NORM.weight, required=some),
    Split(_A + "kv_b_proj.weight", ((GGUF.ATTN_K_B.weight, key_half),
                                    (GGUF.ATTN_V_B.weight, value_half)), required=some),
    Tensor(_A + "o_proj.weight", GGUF.ATTN_OUT.weight),
    # the leading dense layers and the mixture
    *(Tensor(_L + f"mlp.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=some) for p in ("gate", "up", "down")),
    Tensor(_L + "block_sparse_moe.gate.weight", GGUF.FFN_GATE_INP.weight, required=some),
    Tensor(_L + "block_sparse_moe.gate.e_score_correction_bias", GGUF.FFN_EXP_PROBS_B.bias, required=some),
    *(Experts(_L + f"block_sparse_moe.experts.{{x}}.{w}.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "num_experts",
              required=some) for w, p in (("w1", "gate"), ("w2", "down"), ("w3", "up"))),
    *(Tensor(_L + f"block_sparse_moe.shared_experts.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight",
             required=some) for p in ("gate", "up", "down")),
)

_LINEAR_KEYS = (("head_dim", "linear_head_dim"), ("num_heads", "linear_num_heads"),
                ("short_conv_kernel_size", "linear_conv_kernel_dim"))


def normalise(h: dict) -> dict:
    """KimiLinearConfig.__post_init__: num_key_value_heads defaults to the heads, head_dim to qk_rope_head_dim
    (a stated one stays), the linear-attention sizes and layer kinds from linear_attn_config."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    stated = h.pop("stated_head_dim", None)
    h["head_dim"] = stated if stated is not None else h["qk_rope_head_dim"]
    return h


def _layer_kinds(h: dict, path: Path) -> list[str]:
    lac = h["linear_attn_config"]
    n = h["num_hidden_layers"]
    full, kda = lac["full_attn_layers"], lac["kda_layers"]
    ok = all(isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= n for i in (*full, *kda))
    if not ok or sorted([*full, *kda]) != list(range(1, n + 1)):
        raise ConfigError(f"{path}: linear_attn_config full_attn_layers {full!r} and kda_layers {kda!r}: together "
                          f"they must name each of the {n} layers once (1-based)")
    kinds = ["full_attention" if i + 1 in full else "linear_attention" for i in range(n)]
    types = h.get("layer_types")
    if types is not None and list(types) != kinds:
        raise ConfigError(f"{path}: layer_types {list(types)} (length {len(types)}) disagree with "
                          f"linear_attn_config's layers {kinds}: transformers runs layer_types, the converter "
                          f"writes linear_attn_config's, so the file would run another model")
    return kinds


REFUSE = (
    # the engine reads the first name only; this family reads the one name alone
    Refuse("architectures", lambda v: list(v or ["KimiLinearForCausalLM"]) == ["KimiLinearForCausalLM"],
           "the kimi_linear family reads KimiLinearForCausalLM"),
    Refuse("linear_attn_config", lambda v: isinstance(v, dict) and "full_attn_layers" in v and "kda_layers" in v,
           "the converter reads which layers are latent attention from linear_attn_config.full_attn_layers (and "
           "transformers from its kda_layers): state both, as every Kimi-Linear release does"),
    Refuse("hidden_act", ("silu",), "llama.cpp's kimi-linear computes SiLU"),
    Refuse("tie_word_embeddings", unset, "llama.cpp's kimi-linear requires an output.weight, which the converter does "
           "not write for tied embeddings, so the file would not load"),
    Refuse("attention_bias", unset, "llama.cpp's kimi-linear has no attention biases"),
    # a stated null refused too: the converter writes it as the leading dense count
    Refuse("first_k_dense_replace", stated, "the converter needs it (KeyError) and transformers "
           "defaults it to 1; state it, as every Kimi-Linear release does"),
    Refuse("moe_router_activation_func", stated, "transformers' Kimi-Linear router scores by "
           "sigmoid, but without the key the converter writes no gating function and llama.cpp's kimi-linear cannot "
           "load the file; state \"sigmoid\" as every release does"),
    Refuse("moe_router_activation_func", ("sigmoid",), "transformers' Kimi-Linear router scores by sigmoid only"),
    Refuse("moe_renormalize", bool, "llama.cpp's kimi-linear always renormalises the chosen experts' weights"),
    Refuse("num_expert_group", (1,), "the converter writes no expert group count for kimi-linear, so llama.cpp would "
           "not limit the groups transformers limits"),
    Refuse("qk_nope_head_dim", lambda v: v >= 1, "the latent attention needs a key part outside the shared one"),
    Refuse("q_lora_rank", (None,), "no released Kimi-Linear has a query bottleneck, and llama.cpp's kimi-linear graph "
           "reads q_proj only"),
)


def check(h: dict, path: Path) -> None:
    kinds = _layer_kinds(h, path)
    lac, n = h["linear_attn_config"], h["num_hidden_layers"]
    if "linear_attention" not in kinds:
        raise ConfigError(f"{path}: no delta-attention layer: llama.cpp's kimi-linear needs its recurrent layers "
                          f"(no released Kimi-Linear is all latent attention)")
    missing = [k for k, _ in _LINEAR_KEYS if k not in lac]
    if missing:
        raise ConfigError(f"{path}: linear_attn_config has no {', '.join(missing)}: the converter then writes no "
                          f"{'kda.head_dim' if 'head_dim' in missing else 'ssm.conv_kernel'} and llama.cpp's "
                          f"kimi-linear cannot load the file")
    check_kimi_heads(h, path, ARCH, "transformers")
    dense = check_leading_dense(h, path, n, ARCH)
    if dense < n and (not h["num_experts"] or not h["num_experts_per_token"] or not h["num_shared_experts"]):
        raise ConfigError(f"{path}: num_experts {h['num_experts']}, num_experts_per_token "
                          f"{h['num_experts_per_token']}, num_shared_experts {h['num_shared_experts']}: llama.cpp's "
                          f"kimi-linear needs routed and shared experts in its mixture layers")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """KimiLinearModel.set_gguf_parameters: TextModel's entries (one KV head: latent attention read as multi-query),
    the per-layer KV heads written over that entry, the vocabulary size, the short-conv kernel and delta heads'
    width, the latent ranks and widths (key_length written over TextModel's), the expert widths and counts."""
    kv = text_model_parameters(dict(h, num_key_value_heads=1), ARCH, block_count, file_type)
    lac, kv_lora, rope = h["linear_attn_config"], h["kv_lora_rank"], h["qk_rope_head_dim"]
    heads = [1 if k == "full_attention" else 0 for k in _layer_kinds(h, Path("config.json"))]
    at = next(i for i, e in enumerate(kv) if e.key == f"{ARCH}.attention.head_count_kv")
    kv[at] = KV(Keys.Attention.HEAD_COUNT_KV.format(arch=ARCH), ValueType.ARRAY, heads, ValueType.INT32)
    key_at = next(i for i, e in enumerate(kv) if e.key == f"{ARCH}.attention.key_length")
    kv[key_at] = u32(Keys.Attention.KEY_LENGTH.format(arch=ARCH), kv_lora + rope)
    kv += [u32(Keys.LLM.VOCAB_SIZE.format(arch=ARCH), h["vocab_size"]),
           u32(Keys.SSM.CONV_KERNEL.format(arch=ARCH), lac["short_conv_kernel_size"]),
           u32(Keys.KDA.HEAD_DIM.format(arch=ARCH), lac["head_dim"]),
           u32(Keys.Attention.KV_LORA_RANK.format(arch=ARCH), kv_lora),
           u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), rope),
           u32(Keys.Attention.KEY_LENGTH_MLA.format(arch=ARCH), h["qk_nope_head_dim"] + rope),
           u32(Keys.Attention.VALUE_LENGTH_MLA.format(arch=ARCH), h["v_head_dim"]),
           u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=ARCH), h["moe_intermediate_size"]),
           u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=ARCH), h["num_shared_experts"]),
           u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=ARCH), h["first_k_dense_replace"]),
           f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=ARCH), h["routed_scaling_factor"])]
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    """KimiLinearModel.set_vocab: tokenizer.json's byte-level BPE where there is one; where a release ships Kimi's
    tiktoken.model alone (every Kimi-Linear release), its kimi-k2 branch, as DeepSeek-V2's reads it
    (hfview/families/kimi_tiktoken.py), with the tokenizer's own EOS id written last."""
    from ._parts.kimi_tiktoken import is_kimi_tiktoken, kimi_vocab
    model_dir = Path(model_dir)
    if is_kimi_tiktoken(model_dir):
        return kimi_vocab(model_dir, h, eos_from_tokenizer=True)
    if not (model_dir / "tokenizer.json").is_file():
        raise ConfigError(f"{model_dir}: neither tokenizer.json nor tiktoken.model: the converter reads Kimi-Linear's "
                          f"vocabulary from one of them")
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="kimi_linear",
    gguf_arch=ARCH,
    architectures=("KimiLinearForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    aliases=ALIASES,
)
