"""Falcon (FalconForCausalLM) -> llama.cpp `falcon` (the converter's FalconModel).

Parallel attention and MLP, rope (NeoX style), no biases; the fused query_key_value is stored by KV group and
regrouped as all q, then k, then v ("jploski" layout): Falcon-7B's multi-query (one group: left as it is),
Falcon-40B/180B's new decoder architecture (num_kv_heads groups, and a second LayerNorm before the MLP). The
converter writes its own short list: a context of 2048, a feed-forward width of 4 x hidden, no rope base.

Under transformers 5 the converter reads Falcon-7B's KV head count from num_kv_heads, which FalconConfig fills
with the query head count, and fails on its multi-query tensor; the view takes the count transformers' own
model uses (1 for multi-query outside the new decoder architecture).

Falcon's first revisions ran as remote code (configuration_RW.py, modelling_RW.py; RWForCausalLM, which the
converter registers for this class): model_type RefinedWebModel (Falcon-7B: multi-query, one LayerNorm) and
RefinedWeb (Falcon-40B: n_head_kv groups, ln_attn and ln_mlp: what FalconConfig calls the new decoder
architecture). transformers 5.24 has no config class for either, so the converter reads their config.json as
written, under RWConfig's names (n_head, n_layer, n_head_kv), which the view reads as FalconConfig's; transformers'
FalconForCausalLM is the port of that code, and computes it over the same weights.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Tensor, qkv_by_part
from ..names import GGUF, Keys
from ..params import f32, string, u32
from ._parts.checks import check_stated

# transformers 5.24's FalconConfig defaults
DEFAULTS = {
    "falcon": dict(vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71,
                   num_ln_in_parallel_attn=None, layer_norm_epsilon=1e-05, initializer_range=0.02, use_cache=True,
                   hidden_dropout=0.0, attention_dropout=0.0, num_kv_heads=None, alibi=False,
                   new_decoder_architecture=False, multi_query=True, parallel_attn=True, bias=False,
                   max_position_embeddings=2048, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                   bos_token_id=11, eos_token_id=11, pad_token_id=None, ffn_hidden_size=None, activation="gelu",
                   tie_word_embeddings=True),
    # no config class in transformers 5.24: the converter reads config.json as written (RW_CODE below: what the
    # release's own code takes where a key is absent)
    "RefinedWebModel": {},
    "RefinedWeb": {},
}

# RWConfig's names (its attribute map: num_hidden_layers -> n_layer, num_attention_heads -> n_head; Falcon-40B's
# n_head_kv), read as FalconConfig's. Only for the RW model types: FalconConfig does not read them.
RW_NAMES = {"n_head": "num_attention_heads", "n_layer": "num_hidden_layers", "n_head_kv": "num_kv_heads"}
# What each first revision's own code computes where its config.json is silent: RWConfig's defaults for the
# switches (rotary, no biases), its code's fixed block (a 4 x hidden GELU MLP, one LayerNorm per block (7B) or ln_attn
# and ln_mlp around n_head_kv groups (40B), rope base 10000 as the check takes it where no rope is stated), the
# embeddings tied as PretrainedConfig's default
_RW_BLOCK = dict(alibi=False, bias=False, num_ln_in_parallel_attn=None, ffn_hidden_size=None, activation="gelu",
                 tie_word_embeddings=True)
RW_CODE = {
    # Falcon-7B's code: one KV head under multi_query (which must be stated: RW_STATED); its RWConfig defaults
    # parallel_attn to false, which the check refuses (llama.cpp's falcon runs attention and MLP in parallel only)
    "RefinedWebModel": dict(_RW_BLOCK, parallel_attn=False, new_decoder_architecture=False, num_kv_heads=1),
    # Falcon-40B's code always runs n_head_kv groups with ln_attn / ln_mlp in parallel; it reads neither
    # multi_query nor parallel_attn
    "RefinedWeb": dict(_RW_BLOCK, parallel_attn=True, new_decoder_architecture=True),
}
# stated in every first revision, and needed as stated: the converter reads them from config.json with no default
# (hidden_size, layer_norm_epsilon: a KeyError; n_head_kv: one KV head, where Falcon-40B's RWConfig takes n_head)
RW_STATED = {"RefinedWebModel": ("vocab_size", "hidden_size", "n_layer", "n_head", "layer_norm_epsilon",
                                 "multi_query"),
             "RefinedWeb": ("vocab_size", "hidden_size", "n_layer", "n_head", "n_head_kv", "layer_norm_epsilon")}

READS = frozenset({
    "vocab_size", "hidden_size", "n_embed", "num_hidden_layers", "num_attention_heads", "num_ln_in_parallel_attn",
    "layer_norm_epsilon", "num_kv_heads", "alibi", "new_decoder_architecture", "multi_query", "parallel_attn",
    "bias", "rope_parameters", "rope_scaling", "rope_theta", "ffn_hidden_size", "activation", "tie_word_embeddings",
    *RW_NAMES,  # the first revisions' names (normalise reads them as FalconConfig's; check refuses them elsewhere)
})
# max_position_embeddings: the converter writes a context of 2048 whatever it says (rope is relative).
# apply_residual_connection_post_layernorm: Falcon-7B's release states it false, which is what transformers'
# FalconModel computes (it never reads the key); true is refused by name.
HARMLESS: Harmless = {"max_position_embeddings": ANY, "apply_residual_connection_post_layernorm": (False,)}


def kv_heads(h: dict) -> int:
    """The KV head count transformers' FalconAttention uses."""
    return h["num_kv_heads"] if h["new_decoder_architecture"] or not h["multi_query"] else 1


TENSORS = (
    Tensor("word_embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("ln_f.{wb}", GGUF.OUTPUT_NORM.wb),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied (as released)
    Tensor("h.{bid}.input_layernorm.{wb}", GGUF.ATTN_NORM.wb, required=lambda h: _norms(h) == 1),
    # llama.cpp's falcon feeds the MLP from attn_norm and, where a block has a second norm, attention from attn_norm_2
    Tensor("h.{bid}.ln_mlp.{wb}", GGUF.ATTN_NORM.wb, required=lambda h: _norms(h) == 2),
    Tensor("h.{bid}.ln_attn.{wb}", GGUF.ATTN_NORM_2.wb, required=lambda h: _norms(h) == 2),
    Tensor("h.{bid}.self_attention.query_key_value.weight", GGUF.ATTN_QKV.weight,
           qkv_by_part("num_attention_heads", kv_heads)),
    Tensor("h.{bid}.self_attention.dense.weight", GGUF.ATTN_OUT.weight),
    Tensor("h.{bid}.mlp.dense_h_to_4h.weight", GGUF.FFN_UP.weight),
    Tensor("h.{bid}.mlp.dense_4h_to_h.weight", GGUF.FFN_DOWN.weight),
)


def _norms(h: dict) -> int:
    """LayerNorms a block has (FalconDecoderLayer: two in the new decoder architecture unless it says one)."""
    n = h["num_ln_in_parallel_attn"]
    return (2 if n is None else n) if h["new_decoder_architecture"] else 1


def normalise(h: dict) -> dict:
    """FalconConfig's constructor: KV heads and FFN width filled in."""
    if h.get("model_type") in RW_CODE:
        return _first_revision(h)
    if h["num_kv_heads"] is None:
        h["num_kv_heads"] = h["num_attention_heads"]
    if h["ffn_hidden_size"] is None:
        h["ffn_hidden_size"] = 4 * h["hidden_size"]
    return h


def _first_revision(h: dict) -> dict:
    """A RefinedWeb / RefinedWebModel config read as FalconConfig: RWConfig's names as FalconConfig's (a config
    stating both is refused by the check), what the release's code takes where it is silent; nothing filled in for
    what the converter reads without a default (the check refuses it missing)."""
    h = dict(h)
    for old, new in RW_NAMES.items():
        if old in h and new not in h:
            h[new] = h.pop(old)
    h = {**RW_CODE[h["model_type"]], **h}
    if h["ffn_hidden_size"] is None and isinstance(h.get("hidden_size"), int):
        h["ffn_hidden_size"] = 4 * h["hidden_size"]
    return h


def check_first_revision(h: dict, path: Path) -> None:
    """A RefinedWeb / RefinedWebModel config states what the converter reads without a default, under one name
    each, and computes what llama.cpp's falcon does; in a falcon config RWConfig's names are refused by name
    (FalconConfig does not read them: transformers would take its own default)."""
    model_type = h.get("model_type")
    old = sorted(k for k in RW_NAMES if k in h)
    if model_type not in RW_CODE:
        if old:
            raise ConfigError(f"{path}: config key {old[0]!r} is RWConfig's name (Falcon's first, remote-code "
                              f"revisions, model_type RefinedWebModel / RefinedWeb); FalconConfig (model_type "
                              f"{model_type}) does not read it, so transformers would take its own default; state "
                              f"{RW_NAMES[old[0]]} instead")
        return
    if old:
        raise ConfigError(f"{path}: config keys {old[0]!r} and {RW_NAMES[old[0]]!r} are both stated; the converter "
                          f"reads {RW_NAMES[old[0]]}, Falcon's remote code {old[0]}; state one")
    check_stated(h, path, RW_STATED[model_type], "transformers has no config class for it, so the converter reads "
                 "config.json as it stands; state them, as Falcon's first revisions do", names=RW_NAMES)
    flags = [k for k in ("multi_query", "parallel_attn", "alibi", "bias") if k in h and not isinstance(h[k], bool)]
    if flags:
        raise ConfigError(f"{path}: {flags[0]} is {h[flags[0]]!r}; expected true or false")
    if model_type == "RefinedWebModel" and (h["multi_query"] is not True or h["num_kv_heads"] != 1):
        raise ConfigError(f"{path}: multi_query {h['multi_query']}, n_head_kv {h['num_kv_heads']}: Falcon-7B's code "
                          f"(RefinedWebModel) runs one KV head only under multi_query and reads no n_head_kv, and the "
                          f"converter writes n_head_kv (one where it is absent); this checkpoint would run wrong")


def check(h: dict, path: Path) -> None:
    check_first_revision(h, path)
    wrong = [f"{k} {h[k]}" for k, ok in (("alibi", False), ("bias", False), ("parallel_attn", True)) if h[k] != ok]
    if wrong:
        raise ConfigError(f"{path}: {', '.join(wrong)}: llama.cpp's falcon runs rope, without biases, attention and "
                          f"MLP in parallel only (Falcon-RW's layout is not among them); this checkpoint would run "
                          f"wrong")
    rope = h["rope_parameters"]
    if rope.get("rope_type", "default") != "default" or float(rope.get("rope_theta", 10000.0)) != 10000.0:
        raise ConfigError(f"{path}: rope {rope}: the converter writes no rope base or scaling for Falcon, so llama.cpp "
                          f"rotates with base 10000 unscaled; this checkpoint would run wrong")
    if h["ffn_hidden_size"] != 4 * h["hidden_size"] or h["activation"] != "gelu":
        raise ConfigError(f"{path}: ffn_hidden_size {h['ffn_hidden_size']} / activation {h['activation']!r}: the "
                          f"converter writes a feed-forward width of 4 x hidden and llama.cpp's falcon computes GELU")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [u32(Keys.LLM.CONTEXT_LENGTH.format(arch="falcon"), 2048),
            string(Keys.LLM.TENSOR_DATA_LAYOUT.format(arch="falcon"), "jploski"),
            u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="falcon"), h["hidden_size"]),
            u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="falcon"), 4 * h["hidden_size"]),
            u32(Keys.LLM.BLOCK_COUNT.format(arch="falcon"), block_count),
            u32(Keys.Attention.HEAD_COUNT.format(arch="falcon"), h["num_attention_heads"]),
            u32(Keys.Attention.HEAD_COUNT_KV.format(arch="falcon"), kv_heads(h)),
            f32(Keys.Attention.LAYERNORM_EPS.format(arch="falcon"), h["layer_norm_epsilon"]),
            u32(Keys.General.FILE_TYPE, file_type)]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="falcon",
    gguf_arch="falcon",
    architectures=("FalconForCausalLM", "RWForCausalLM"),  # RWForCausalLM: the first revisions' remote code
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    check=check,
    normalise=normalise,
    optional_prefix="transformer.",
    aliases={"n_embed": "hidden_size"},  # FalconConfig's constructor alias
)
