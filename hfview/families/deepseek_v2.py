"""DeepSeek-V2 (DeepSeek-V2-Lite, V2-Lite-Chat: DeepseekV2ForCausalLM) -> llama.cpp `deepseek2` (the converter's
DeepseekV2Model, which also serves DeepseekV3ForCausalLM: hfview/families/deepseek_v3.py).

Multi-head latent attention: queries from q_proj, or through a low-rank bottleneck (q_a_proj, its RMS norm,
q_b_proj) where q_lora_rank is set; keys and values from one compressed vector (kv_a_proj_with_mqa: kv_lora_rank
latent rows plus one shared rope key of qk_rope_head_dim, the latent RMS-normed) expanded per head by kv_b_proj.
The converter writes kv_b_proj as two tensors for llama.cpp's absorbed attention: each head's key rows
transposed (attn_k_b, [heads, kv_lora_rank, qk_nope_head_dim]) and its value rows (attn_v_b): views over the
stored rows (views.BlocksTransposed, views.RowSelection). Rope pairs are stored interleaved, as llama.cpp's
rope computes them: no permutation. Over it DeepSeek's mixture: first_k_dense_replace dense layers, then a
router over n_routed_experts, their stacked SwiGLU experts and n_shared_experts fused shared experts.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Experts, Family, Skip, Split, Tensor
from ..params import boolean, f32, first, text_model_parameters, u32
from ..views import BlocksTransposed, RowSelection, latent_kv_halves
from .qwen2 import check_architecture, check_rope, check_silu
from .qwen2_moe import gpt2_vocab

ARCH = "deepseek2"

# transformers 5.24's DeepseekV2Config defaults (head_dim and qk_head_dim are computed: normalise)
DEFAULTS = {
    "deepseek_v2": dict(vocab_size=102400, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                        num_attention_heads=32, num_key_value_heads=32, hidden_act="silu",
                        max_position_embeddings=2048, initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True,
                        pad_token_id=None, bos_token_id=1, eos_token_id=2, pretraining_tp=1,
                        tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                        attention_bias=False, attention_dropout=0.0, mlp_bias=False, first_k_dense_replace=0,
                        kv_lora_rank=512, q_lora_rank=1536, n_group=None, n_routed_experts=64, n_shared_experts=2,
                        qk_nope_head_dim=128, qk_rope_head_dim=64, routed_scaling_factor=1.0, topk_group=None,
                        topk_method="greedy", norm_topk_prob=False, v_head_dim=128, num_experts_per_tok=None,
                        moe_intermediate_size=1407),
}

# the latent attention and the mixture, as every DeepseekV2Model config reads them
LATENT_READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias",
    "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size", "first_k_dense_replace",
    "moe_layer_freq", "routed_scaling_factor", "norm_topk_prob", "scoring_func", "topk_method", "n_group",
    "topk_group",
})
READS = LATENT_READS | {"mlp_bias"}
# head_dim and qk_head_dim: the config class recomputes both from qk_rope_head_dim / qk_nope_head_dim whatever is
# stated; the rest are the remote code's training and parallelism switches (balance losses, expert parallelism)
LATENT_HARMLESS: Harmless = {"head_dim": ANY, "qk_head_dim": ANY, "aux_loss_alpha": ANY, "seq_aux": ANY,
                             "ep_size": ANY}
HARMLESS: Harmless = dict(LATENT_HARMLESS)


def _kv_b_parts(h: dict, src) -> tuple[int, int, int]:
    n_head, nope, v = h["num_attention_heads"], h["qk_nope_head_dim"], h["v_head_dim"]
    if len(src.shape) != 2 or src.shape[0] != n_head * (nope + v):
        raise CheckpointError(f"tensor {src.name!r} has shape {list(src.shape)}: kv_b_proj should have "
                              f"{n_head} heads x ({nope} key + {v} value) = {n_head * (nope + v)} rows "
                              f"(num_attention_heads, qk_nope_head_dim, v_head_dim)")
    return n_head, nope, v


def key_half(sources, h):
    """kv_b_proj's key rows of each head, transposed: [heads, kv_lora_rank, qk_nope_head_dim]."""
    src = sources[0]
    n_head, nope, v = _kv_b_parts(h, src)
    return BlocksTransposed(src, latent_kv_halves(n_head, nope, v)[0], f"key rows of {n_head} heads, transposed")


def value_half(sources, h):
    """kv_b_proj's value rows of each head: [heads, v_head_dim, kv_lora_rank]."""
    src = sources[0]
    n_head, nope, v = _kv_b_parts(h, src)
    return RowSelection(src, latent_kv_halves(n_head, nope, v)[1], f"value rows of {n_head} heads",
                        presented=(n_head, v, src.shape[1]))


_L = "model.layers.{bid}."


def latent_tensors(prefix: str = "model.", skip_mtp: bool = True) -> tuple:
    """Embeddings, norms and the latent attention of every block (DeepseekV2Model's names). `skip_mtp`: drop the
    next-token-prediction layers stored after num_hidden_layers, as DeepseekV2Model does (its subclasses for
    DeepSeek-V3.2 and GLM-5 keep them)."""
    layer = f"{prefix}layers.{{bid}}."
    optional = False  # with or without the query bottleneck, as q_lora_rank says (llama.cpp checks which)
    mtp = (Skip(f"{layer}{{rest}}", from_block=lambda h: h["num_hidden_layers"]),) if skip_mtp else ()
    return (
        # the converter skips the next-token-prediction layers stored after num_hidden_layers
        *mtp,
        Tensor(f"{prefix}embed_tokens.weight", "token_embd.weight"),
        Tensor(f"{prefix}norm.weight", "output_norm.weight"),
        Skip("lm_head.weight", when=lambda h: bool(h.get("tie_word_embeddings"))),
        Tensor("lm_head.weight", "output.weight", required=lambda h: not h.get("tie_word_embeddings")),
        Tensor(f"{layer}input_layernorm.weight", "blk.{bid}.attn_norm.weight"),
        Tensor(f"{layer}self_attn.q_proj.weight", "blk.{bid}.attn_q.weight", required=optional),
        Tensor(f"{layer}self_attn.q_a_proj.weight", "blk.{bid}.attn_q_a.weight", required=optional),
        Tensor(f"{layer}self_attn.q_a_layernorm.weight", "blk.{bid}.attn_q_a_norm.weight", required=optional),
        Tensor(f"{layer}self_attn.q_b_proj.weight", "blk.{bid}.attn_q_b.weight", required=optional),
        Tensor(f"{layer}self_attn.kv_a_proj_with_mqa.weight", "blk.{bid}.attn_kv_a_mqa.weight"),
        Tensor(f"{layer}self_attn.kv_a_layernorm.weight", "blk.{bid}.attn_kv_a_norm.weight"),
        Split(f"{layer}self_attn.kv_b_proj.weight", (("blk.{bid}.attn_k_b.weight", key_half),
                                                    ("blk.{bid}.attn_v_b.weight", value_half))),
        Tensor(f"{layer}self_attn.o_proj.weight", "blk.{bid}.attn_output.weight"),
        Tensor(f"{layer}post_attention_layernorm.weight", "blk.{bid}.ffn_norm.weight"),
        Skip(f"{layer}self_attn.rotary_emb.inv_freq"),
    )


def mixture_tensors(prefix: str = "model.") -> tuple:
    """The leading dense FFNs, the router (and its selection bias), stacked experts and fused shared experts;
    each exists in some layers only (llama.cpp checks which by leading_dense_block_count)."""
    layer = f"{prefix}layers.{{bid}}.mlp."
    some = False
    return (
        *(Tensor(f"{layer}{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=some) for p in ("gate", "up", "down")),
        Tensor(f"{layer}gate.weight", "blk.{bid}.ffn_gate_inp.weight", required=some),
        Tensor(f"{layer}gate.e_score_correction_bias", "blk.{bid}.exp_probs_b.bias", required=some),
        *(Experts(f"{layer}experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "n_routed_experts",
                  required=some) for p in ("down", "gate", "up")),
        *(Tensor(f"{layer}shared_experts.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=some)
          for p in ("gate", "up", "down")),
    )


TENSORS = (*latent_tensors(), *mixture_tensors())


def _is_lite(h: dict) -> bool:
    """llama.cpp's deepseek2 reads no q_lora_rank for the layer counts of its 'lite' releases (V2-Lite's 27,
    26, or 48 over a 128256-token vocabulary) and expects q_proj there; it requires one elsewhere."""
    n = h["num_hidden_layers"]
    return n in (26, 27) or (n == 48 and h["vocab_size"] == 128256)


def check_latent_attention(h: dict, path: Path, family: str, arch: str = ARCH) -> None:
    """What llama.cpp's deepseek2 (or `arch`, one of its sparse-attention successors) runs of DeepSeek's latent
    attention."""
    check_silu(h, path, arch)
    check_rope(h, path, arch, allowed=("default", "yarn"))
    if h["num_key_value_heads"] != h["num_attention_heads"]:
        raise ConfigError(f"{path}: num_key_value_heads {h['num_key_value_heads']} is not num_attention_heads "
                          f"{h['num_attention_heads']}: latent attention expands the key and value of every "
                          f"query head from kv_b_proj, and the converter splits kv_b_proj by num_key_value_heads; "
                          f"state num_key_value_heads = num_attention_heads, as every {family} release does")
    if h.get("attention_bias"):
        raise ConfigError(f"{path}: attention_bias true: llama.cpp's deepseek2 architecture has no biases on "
                          f"q_a_proj, kv_a_proj_with_mqa or o_proj, so this checkpoint would run wrong")
    if h["qk_nope_head_dim"] < 1:
        raise ConfigError(f"{path}: qk_nope_head_dim {h['qk_nope_head_dim']}: llama.cpp's deepseek2 needs a "
                          f"key part without rope")
    if arch != ARCH:  # deepseek32 / glm-dsa: the query bottleneck always, at any layer count
        if h.get("q_lora_rank") is None:
            raise ConfigError(f"{path}: q_lora_rank null (queries without a bottleneck): llama.cpp's {arch} and "
                              f"transformers' {family} read queries through q_a_proj / q_b_proj only, and the "
                              f"indexer reads its queries from that bottleneck")
        return
    if h.get("q_lora_rank") is None and not _is_lite(h):
        raise ConfigError(f"{path}: q_lora_rank null (queries without a bottleneck) over {h['num_hidden_layers']} "
                          f"layers: llama.cpp's deepseek2 reads queries without a bottleneck only at the layer "
                          f"counts of DeepSeek-V2-Lite (26 or 27; 48 over a 128256-token vocabulary) and fails "
                          f"to load any other without q_lora_rank")
    if h.get("q_lora_rank") and _is_lite(h):  # a rank of 0 says "no bottleneck", as llama.cpp reads lite ones
        raise ConfigError(f"{path}: q_lora_rank {h['q_lora_rank']} over {h['num_hidden_layers']} layers: "
                          f"llama.cpp's deepseek2 takes that layer count for DeepSeek-V2-Lite's and reads no "
                          f"query bottleneck there, so this checkpoint would not load")


def check_mixture(h: dict, path: Path) -> None:
    if h.get("moe_layer_freq", 1) != 1:
        raise ConfigError(f"{path}: moe_layer_freq {h['moe_layer_freq']!r}: the released code then makes every "
                          f"layer i with i % {h['moe_layer_freq']!r} != 0 dense; transformers, the converter and "
                          f"llama.cpp's deepseek2 make every layer after first_k_dense_replace a mixture")
    for key in ("n_routed_experts", "num_experts_per_tok"):
        if not h.get(key):
            raise ConfigError(f"{path}: {key} {h.get(key)!r}: llama.cpp's deepseek2 needs routed experts "
                              f"(n_expert and n_expert_used > 0)")
    if not h.get("n_shared_experts"):
        raise ConfigError(f"{path}: n_shared_experts {h.get('n_shared_experts')!r}: llama.cpp's deepseek2 needs "
                          f"shared-expert tensors in every mixture layer")


def check(h: dict, path: Path) -> None:
    check_architecture(h, path, "deepseek_v2", ("DeepseekV2ForCausalLM",))
    check_latent_attention(h, path, "DeepSeek-V2")
    check_mixture(h, path)
    if h.get("mlp_bias"):
        raise ConfigError(f"{path}: mlp_bias true: llama.cpp's deepseek2 architecture has no FFN biases")
    # transformers' DeepseekV2 router: softmax over all experts, top-k, never renormalised
    if h.get("scoring_func", "softmax") != "softmax":
        raise ConfigError(f"{path}: scoring_func {h['scoring_func']!r}: transformers' DeepseekV2 scores experts by "
                          f"softmax only (DeepseekV3ForCausalLM is the sigmoid router)")
    if h.get("norm_topk_prob"):
        raise ConfigError(f"{path}: norm_topk_prob true: transformers' DeepseekV2 never renormalises the chosen "
                          f"experts' weights, while the converter then has llama.cpp renormalise them")
    if (h.get("n_group") or 1) > 1:
        raise ConfigError(f"{path}: n_group {h['n_group']} (topk_method {h.get('topk_method')!r}): the converter "
                          f"writes the group counts, and llama.cpp's deepseek2 then ranks groups by the sum of "
                          f"their two best scores (DeepSeek-V3's rule), while DeepSeek-V2's group_limited_greedy "
                          f"ranks them by their best score alone: expert choices would differ")
    if h.get("topk_method", "greedy") not in ("greedy", "group_limited_greedy"):
        raise ConfigError(f"{path}: topk_method {h['topk_method']!r}: transformers' DeepseekV2 knows greedy and "
                          f"group_limited_greedy only")


def normalise(h: dict) -> dict:
    """DeepseekV2Config.__post_init__: head_dim is the rope width, qk_head_dim the whole query/key head."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    h["qk_head_dim"] = h["qk_nope_head_dim"] + h["qk_rope_head_dim"]
    h["head_dim"] = h["qk_rope_head_dim"]
    return h


def latent_parameters(h: dict, block_count: int, file_type: int, arch: str = ARCH) -> list:
    """DeepseekV2Model.set_gguf_parameters: TextModel's entries with one KV head (latent attention read as
    multi-query), then the leading dense layers, the ranks and head widths of the latent attention, the expert
    widths and counts, the router's scale and renormalisation, the rope width and yarn's log multiplier (under
    `arch`: deepseek2, or a subclass's own architecture)."""
    kv = text_model_parameters(dict(h, num_key_value_heads=1), arch, block_count, file_type)
    dense = h.get("first_k_dense_replace")
    if dense is None:
        dense = h["num_hidden_layers"] if h.get("n_routed_experts") is None else 0
    kv_lora = h.get("kv_lora_rank", 512)
    kv += [u32(f"{arch}.leading_dense_block_count", dense), u32(f"{arch}.vocab_size", h["vocab_size"])]
    if h.get("q_lora_rank") is not None:
        kv.append(u32(f"{arch}.attention.q_lora_rank", h["q_lora_rank"]))
    kv += [u32(f"{arch}.attention.kv_lora_rank", kv_lora),
           u32(f"{arch}.attention.key_length", kv_lora + h["qk_rope_head_dim"]),
           u32(f"{arch}.attention.value_length", kv_lora),
           u32(f"{arch}.attention.key_length_mla", h["qk_nope_head_dim"] + h["qk_rope_head_dim"]),
           u32(f"{arch}.attention.value_length_mla", h["v_head_dim"]),
           u32(f"{arch}.expert_feed_forward_length", first(h, ["moe_intermediate_size", "intermediate_size"]))]
    if h.get("n_routed_experts") is not None:
        kv.append(u32(f"{arch}.expert_count", h["n_routed_experts"]))
    kv.append(u32(f"{arch}.expert_shared_count", h.get("n_shared_experts", 0)))
    if h.get("routed_scaling_factor") is not None:
        kv.append(f32(f"{arch}.expert_weights_scale", h["routed_scaling_factor"]))
    if h.get("norm_topk_prob"):
        kv.append(boolean(f"{arch}.expert_weights_norm", True))
    kv.append(u32(f"{arch}.rope.dimension_count", h["qk_rope_head_dim"]))
    if (mscale_all_dim := h["rope_parameters"].get("mscale_all_dim")) is not None:
        # the converter's legacy 0.1 factor, which llama.cpp divides out again
        kv.append(f32(f"{arch}.rope.scaling.yarn_log_multiplier", 0.1 * mscale_all_dim))
    return kv


FAMILY = Family(
    name="deepseek_v2",
    gguf_arch=ARCH,
    architectures=("DeepseekV2ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=latent_parameters,
    vocab=gpt2_vocab,  # DeepseekV2Model.set_vocab: byte-level BPE
    check=check,
    normalise=normalise,
)
