"""MPT (MPTForCausalLM, as MosaicML released it) -> llama.cpp `mpt` (the converter's MPTModel).

ALiBi (the converter writes its maximum bias; llama.cpp computes the slopes), one fused Wqkv in q, k, v order,
LayerNorm with bias, no linear biases, tied output; the optional clamp of q, k, v (clip_qkv). The converter
registers the release's class name only (transformers' own MptForCausalLM is not one it converts) and writes its
own short list: a feed-forward width of 4 x d_model and a LayerNorm epsilon of 1e-5.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor
from ..names import GGUF, Keys
from ..params import f32, u32

# transformers 5.24's MptAttentionConfig fields that reach the converter (its attn_config dict)
ATTN_DEFAULTS = dict(attn_type="multihead_attention", attn_pdrop=0, attn_impl="torch", clip_qkv=None,
                     softmax_scale=None, prefix_lm=False, qk_ln=False, attn_uses_sequence_id=False, alibi=True,
                     alibi_bias_max=8)

# transformers 5.24's MptConfig defaults
DEFAULTS = {
    "mpt": dict(d_model=2048, n_heads=16, n_layers=24, expansion_ratio=4, max_seq_len=2048, vocab_size=50368,
                resid_pdrop=0.0, layer_norm_epsilon=1e-05, emb_pdrop=0.0, learned_pos_emb=True,
                attn_config=ATTN_DEFAULTS, init_device="cpu", logit_scale=None, no_bias=True, embedding_fraction=1.0,
                norm_type="low_precision_layernorm", use_cache=False, initializer_range=0.02,
                tie_word_embeddings=True, pad_token_id=None, bos_token_id=None, eos_token_id=None),
}

READS = frozenset({
    "d_model", "n_heads", "n_layers", "expansion_ratio", "max_seq_len", "vocab_size", "layer_norm_epsilon",
    "attn_config", "ffn_config", "logit_scale", "no_bias", "tie_word_embeddings", "learned_pos_emb", "embedding_fraction",
})
# Dropouts; where weights are initialised; norm_type names the same LayerNorm computed in lower precision during
# training (transformers' MptModel computes a plain LayerNorm).
# init_config: how weights are initialised (training only); fc_type "torch": plain nn.Linear layers, the only
# kind transformers' MPT has (another, e.g. Transformer Engine's, is refused by name).
HARMLESS: Harmless = {"resid_pdrop": ANY, "emb_pdrop": ANY, "init_device": ANY, "norm_type": ANY,
                      "init_config": ANY, "fc_type": ("torch",)}

TENSORS = (
    Tensor("transformer.wte.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("transformer.norm_f.{wb}", GGUF.OUTPUT_NORM.wb),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied (as released)
    Tensor("transformer.blocks.{bid}.norm_1.{wb}", GGUF.ATTN_NORM.wb),
    Tensor("transformer.blocks.{bid}.attn.Wqkv.weight", GGUF.ATTN_QKV.weight),
    Tensor("transformer.blocks.{bid}.attn.out_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("transformer.blocks.{bid}.norm_2.{wb}", GGUF.FFN_NORM.wb),
    Tensor("transformer.blocks.{bid}.ffn.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("transformer.blocks.{bid}.ffn.down_proj.weight", GGUF.FFN_DOWN.weight),
)


def normalise(h: dict) -> dict:
    """MptConfig's constructor turns attn_config into an MptAttentionConfig: absent fields read as defaults."""
    stated = h.get("attn_config") or {}
    if not isinstance(stated, dict):
        raise ConfigError(f"attn_config must be a JSON object, found {stated!r}")
    h["attn_config"] = {**ATTN_DEFAULTS, **stated}
    return h


# The attention kinds transformers' MptAttentionConfig accepts. The converter loads that config (AutoTokenizer asks
# AutoConfig for the tokenizer class), and on any other kind (replit-code-v1_5's grouped_query_attention) its
# validation error sends the converter's vocabulary to its SentencePiece fallback, which finds no tokenizer.model
# beside an MPT release's tokenizer.json (measured in tests/test_converter_refusals.py)
ATTN_TYPES = ("multihead_attention", "multiquery_attention")
ATTN_TYPE_REFUSED = Refuse(
    "attn_config.attn_type", ATTN_TYPES, f"the converter fails on it: transformers' MptConfig, which it loads to pick "
    f"the tokenizer, accepts only {ATTN_TYPES} (\"Field 'attn_type' expected one of ...\"), and its SentencePiece "
    f"fallback then stops with \"FileNotFoundError: File not found: .../tokenizer.model\" (transformers' MPT has no "
    f"grouped-query attention either)", default="multihead_attention")

# normalise states every attn_config field; an absent ffn_config reads as the plain MLP
REFUSE = (ATTN_TYPE_REFUSED, *(
    Refuse(key, (ok,), "transformers' MPT and llama.cpp's mpt, fed what the converter writes (ALiBi, 1/sqrt(head) "
           "scaling, no biases, FFN 4 x d_model, LayerNorm eps 1e-5), agree only without this value; this checkpoint "
           "would run wrong", default=ok)
    for key, ok in (("attn_config.alibi", True), ("attn_config.qk_ln", False), ("attn_config.softmax_scale", None),
                    ("attn_config.prefix_lm", False), ("attn_config.kv_n_heads", None), ("logit_scale", None),
                    ("no_bias", True), ("expansion_ratio", 4), ("layer_norm_epsilon", 1e-5),
                    ("embedding_fraction", 1.0), ("ffn_config.ffn_type", "mptmlp"), ("ffn_config.fc_type", "torch"))))


def parameters(h: dict, block_count: int, file_type: int) -> list:
    attn = h["attn_config"]
    kv = [u32(Keys.LLM.CONTEXT_LENGTH.format(arch="mpt"), h["max_seq_len"]),
          u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="mpt"), h["d_model"]),
          u32(Keys.LLM.BLOCK_COUNT.format(arch="mpt"), block_count),
          u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="mpt"), 4 * h["d_model"]),
          u32(Keys.Attention.HEAD_COUNT.format(arch="mpt"), h["n_heads"]),
          f32(Keys.Attention.LAYERNORM_EPS.format(arch="mpt"), 1e-5)]
    if attn["clip_qkv"] is not None:
        kv.append(f32(Keys.Attention.CLAMP_KQV.format(arch="mpt"), attn["clip_qkv"]))
    kv.append(f32(Keys.Attention.MAX_ALIBI_BIAS.format(arch="mpt"), attn["alibi_bias_max"] if attn["alibi"] else 0.0))
    return kv  # no general.file_type: MPTModel's list leaves it out


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="mpt",
    gguf_arch="mpt",
    architectures=("MPTForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    normalise=normalise,
)
