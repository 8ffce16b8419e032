"""DeepSeek-V2's multi-head latent attention: its config keys, tensor table (kv_b split into its key and value
halves, as the converter writes them), checks, hyperparameter KV and what the config class computes."""
from __future__ import annotations

from pathlib import Path

from ...config import ANY, Harmless
from ...errors import CheckpointError, ConfigError
from ...family import Skip, Split, Tensor
from ...names import GGUF, Keys
from ...params import boolean, f32, first, text_model_parameters, u32
from ...views import BlocksTransposed, RowSelection, latent_kv_halves
from .checks import rope_types, silu_only

ARCH = "deepseek2"  # llama.cpp's architecture of DeepSeek-V2's latent attention


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


# head_dim and qk_head_dim: the config class recomputes both from qk_rope_head_dim / qk_nope_head_dim whatever is
# stated; the rest are the remote code's training and parallelism switches (balance losses, expert parallelism)
LATENT_HARMLESS: Harmless = {"head_dim": ANY, "qk_head_dim": ANY, "aux_loss_alpha": ANY, "seq_aux": ANY,
                             "ep_size": ANY}


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
        Tensor(f"{prefix}embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
        Tensor(f"{prefix}norm.weight", GGUF.OUTPUT_NORM.weight),
        Skip("lm_head.weight", when=lambda h: bool(h.get("tie_word_embeddings"))),
        Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=lambda h: not h.get("tie_word_embeddings")),
        Tensor(f"{layer}input_layernorm.weight", GGUF.ATTN_NORM.weight),
        Tensor(f"{layer}self_attn.q_proj.weight", GGUF.ATTN_Q.weight, required=optional),
        Tensor(f"{layer}self_attn.q_a_proj.weight", GGUF.ATTN_Q_A.weight, required=optional),
        Tensor(f"{layer}self_attn.q_a_layernorm.weight", GGUF.ATTN_Q_A_NORM.weight, required=optional),
        Tensor(f"{layer}self_attn.q_b_proj.weight", GGUF.ATTN_Q_B.weight, required=optional),
        Tensor(f"{layer}self_attn.kv_a_proj_with_mqa.weight", GGUF.ATTN_KV_A_MQA.weight),
        Tensor(f"{layer}self_attn.kv_a_layernorm.weight", GGUF.ATTN_KV_A_NORM.weight),
        Split(f"{layer}self_attn.kv_b_proj.weight", ((GGUF.ATTN_K_B.weight, key_half),
                                                    (GGUF.ATTN_V_B.weight, value_half))),
        Tensor(f"{layer}self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
        Tensor(f"{layer}post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
        Skip(f"{layer}self_attn.rotary_emb.inv_freq"),
    )


def _is_lite(h: dict) -> bool:
    """llama.cpp's deepseek2 reads no q_lora_rank for the layer counts of its 'lite' releases (V2-Lite's 27,
    26, or 48 over a 128256-token vocabulary) and expects q_proj there; it requires one elsewhere."""
    n = h["num_hidden_layers"]
    return n in (26, 27) or (n == 48 and h["vocab_size"] == 128256)


def check_latent_attention(h: dict, path: Path, family: str, arch: str = ARCH) -> None:
    """What llama.cpp's deepseek2 (or `arch`, one of its sparse-attention successors) runs of DeepSeek's latent
    attention."""
    silu_only(arch).apply(h, path)
    rope_types(arch, ("default", "yarn")).apply(h, path)
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
    kv += [u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch=arch), dense),
           u32(Keys.LLM.VOCAB_SIZE.format(arch=arch), h["vocab_size"])]
    if h.get("q_lora_rank") is not None:
        kv.append(u32(Keys.Attention.Q_LORA_RANK.format(arch=arch), h["q_lora_rank"]))
    kv += [u32(Keys.Attention.KV_LORA_RANK.format(arch=arch), kv_lora),
           u32(Keys.Attention.KEY_LENGTH.format(arch=arch), kv_lora + h["qk_rope_head_dim"]),
           u32(Keys.Attention.VALUE_LENGTH.format(arch=arch), kv_lora),
           u32(Keys.Attention.KEY_LENGTH_MLA.format(arch=arch), h["qk_nope_head_dim"] + h["qk_rope_head_dim"]),
           u32(Keys.Attention.VALUE_LENGTH_MLA.format(arch=arch), h["v_head_dim"]),
           u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=arch),
               first(h, ["moe_intermediate_size", "intermediate_size"]))]
    if h.get("n_routed_experts") is not None:
        kv.append(u32(Keys.LLM.EXPERT_COUNT.format(arch=arch), h["n_routed_experts"]))
    kv.append(u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch=arch), h.get("n_shared_experts", 0)))
    if h.get("routed_scaling_factor") is not None:
        kv.append(f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch=arch), h["routed_scaling_factor"]))
    if h.get("norm_topk_prob"):
        kv.append(boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch=arch), True))
    kv.append(u32(Keys.Rope.DIMENSION_COUNT.format(arch=arch), h["qk_rope_head_dim"]))
    if (mscale_all_dim := h["rope_parameters"].get("mscale_all_dim")) is not None:
        # the converter's legacy 0.1 factor, which llama.cpp divides out again
        kv.append(f32(Keys.Rope.SCALING_YARN_LOG_MUL.format(arch=arch), 0.1 * mscale_all_dim))
    return kv


def latent_normalise(h: dict) -> dict:
    """DeepseekV2Config.__post_init__: head_dim is the rope width, qk_head_dim the whole query/key head."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    h["qk_head_dim"] = h["qk_nope_head_dim"] + h["qk_rope_head_dim"]
    h["head_dim"] = h["qk_rope_head_dim"]
    return h
