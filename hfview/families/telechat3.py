"""TeleChat3 (Telechat3ForCausalLM; model_type telechat3; remote code) -> llama.cpp `llama`, under hfview's own
mapping: the pinned converter has no class for it (and transformers 5.24 none either), so there is no converter file
to be byte-identical to.

The decoder is Llama's under Llama's tensor names (the release's Telechat3Attention / Telechat3MLP /
Telechat3RMSNorm / Telechat3DecoderLayer as its public copies state them: RMSNorm before attention and MLP and at
the end, q/k/v/o projections without biases (attention_bias false), rotate-half rotary over the whole head, grouped
KV heads shared by consecutive query heads, scores times head_dim^-0.5, down_proj(silu(gate_proj(x)) * up_proj(x))
without biases (mlp_bias false), an untied lm_head; vLLM serves it as its LlamaForCausalLM, mlx-lm as a stock Llama).

What is TeleChat3's own is its rotary scaling, rope_type "telechat3-yarn" (the release's
_compute_telechat_yarn_parameters, registered as ROPE_INIT_FUNCTIONS["telechat3-yarn"]): YaRN as transformers 4.53
computes it (factor = max_position_embeddings / original_max_position_embeddings where the latter is stated, else
rope_scaling.factor over max_position_embeddings; corrections floored and ceiled; beta_fast / beta_slow 32 / 1),
except that the cos/sin scale is 0.07 * ln(factor) + 1 rather than YaRN's 0.1 * ln(factor) + 1 (an
attention_factor stated wins; mscale and mscale_all_dim, both stated, give the ratio of two such scales). vLLM's
TeleChat3RoPEScaledRotaryEmbedding states the same 0.07; mlx-lm routes the type to its plain YarnRoPE (0.1), which is
not the release's arithmetic.

llama.cpp's YaRN scales cos/sin by (0.1 * ln(factor) + 1) * {arch}.rope.scaling.attn_factor (llama-context.cpp
cancels its own get_mscale and ggml's rope_yarn multiplies 1 + 0.1 * ln(1 / freq_scale) back in), with the same
floored/ceiled correction dims and the same linear ramp, and beta_fast / beta_slow fixed at 32 / 1 for `llama`. So
the view writes the code's factor, original length and attn_factor = scale / (0.1 * ln(factor) + 1).

Config: the release's Telechat3Config defaults fill what config.json leaves out; rope_scaling keys the release's code
does not read are refused by name (vLLM's truncate only at true, which is what the code computes). Vocabulary: the
SentencePiece tokenizer.model TeleChat3 ships (a BPE model of 131072 pieces, identity normalizer, dummy prefix, extra
whitespace kept, byte fallback, control tokens <_start> <_end> <_pad> <_user> <_bot> ... </tool_response> at ids
1-23; TelechatTokenizer adds no BOS or EOS) written as the converter's _set_vocab_sentencepiece writes one, which
llama.cpp's SentencePiece tokenizer reads. Checked by hand on the copy of that file in github.com/Tele-AI/TeleChat3
(mindformers_telechat3/research/telechat3/tokenizer.model at 242aeb5b): llama.cpp over the view's vocabulary gave
sentencepiece's ids on ten texts (Chinese, byte-fallback emoji, runs of spaces, code) and, with special tokens
parsed, on a chat turn with <_system> <_user> <_bot> <think>.
"""
from __future__ import annotations

import math
from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor, rope_pairs
from ..names import GGUF, Keys
from ..params import f32, string, u32
from ._parts.checks import silu_only
from ._parts.sentencepiece_only import sentencepiece_only

# The release's Telechat3Config (configuration_telechat3.py) defaults, as data, for the keys the 36B's decoder reads;
# tie_word_embeddings False is its own default, bos/eos its own.
DEFAULTS = {"telechat3": dict(
    vocab_size=131072, hidden_size=6144, intermediate_size=24576, num_hidden_layers=64, num_attention_heads=48,
    num_key_value_heads=None, head_dim=128, hidden_act="silu", max_position_embeddings=2048, rms_norm_eps=1e-5,
    attention_bias=False, mlp_bias=False, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
    initializer_range=0.0048, pretraining_tp=1, use_cache=True, attention_dropout=0.0,
    rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"},
)}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_scaling", "rope_theta",
    "rope_parameters", "hidden_act", "tie_word_embeddings",
})
HARMLESS: Harmless = {
    # the projections' biases: none in any released TeleChat3; set, the code adds biases this mapping does not take
    "attention_bias": (False,), "mlp_bias": (False,),
}

_tied = lambda h: h["tie_word_embeddings"]  # noqa: E731

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Skip("lm_head.weight", when=_tied),  # tied: the code's lm_head is the embedding
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=lambda h: not h["tie_word_embeddings"]),
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight, rope_pairs("num_attention_heads")),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight, rope_pairs("num_key_value_heads")),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)

YARN = "telechat3-yarn"
# what the release's rotary code reads from rope_scaling (rope_theta is folded in from the top level), and vLLM's
# truncate, which the release's code never reads (it always truncates)
_YARN_KEYS = {"rope_type", "type", "rope_theta", "factor", "original_max_position_embeddings", "attention_factor",
              "mscale", "mscale_all_dim", "beta_fast", "beta_slow", "truncate"}


def head_dim(h: dict) -> int:
    return h["head_dim"]


def _mscale(scale: float, mscale: float = 1.0) -> float:
    """The release's get_mscale: 0.07 where YaRN has 0.1."""
    return 1.0 if scale <= 1 else 0.07 * mscale * math.log(scale) + 1.0


def yarn(h: dict) -> dict:
    """What the release's _compute_telechat_yarn_parameters computes from the config: the interpolation factor,
    the original context the corrections are taken over, and the cos/sin scale (attention_factor)."""
    rope = h["rope_parameters"]
    if "original_max_position_embeddings" in rope:
        original = rope["original_max_position_embeddings"]
        factor = h["max_position_embeddings"] / original
    else:
        original, factor = h["max_position_embeddings"], rope["factor"]
    attention = rope.get("attention_factor")
    if attention is None:
        mscale, mscale_all_dim = rope.get("mscale"), rope.get("mscale_all_dim")
        attention = _mscale(factor, mscale) / _mscale(factor, mscale_all_dim) if mscale and mscale_all_dim \
            else _mscale(factor)
    return {"factor": factor, "original": original, "attention_factor": attention}


def normalise(h: dict) -> dict:
    """What Telechat3Config computes: no num_key_value_heads means one KV head per query head; head_dim stated
    null means hidden_size / num_attention_heads."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    return h


REFUSE = (
    silu_only("llama"),
    Refuse("rope_parameters.rope_type", ("default", YARN), f"hfview presents TeleChat3 with plain rope or its own "
           f"{YARN!r} only", default="default"),
)


def check(h: dict, path: Path) -> None:
    n_head, n_kv = h["num_attention_heads"], h["num_key_value_heads"]
    if h["head_dim"] != h["hidden_size"] // n_head:
        raise ConfigError(f"{path}: head_dim {h['head_dim']} is not hidden_size / num_attention_heads = "
                          f"{h['hidden_size']} // {n_head}; the release's Telechat3Config refuses this too")
    if h["hidden_size"] % n_head or n_head % n_kv or h["head_dim"] % 2:
        raise ConfigError(f"{path}: hidden_size {h['hidden_size']}, num_attention_heads {n_head} and "
                          f"num_key_value_heads {n_kv} do not split into whole heads (of even width) and KV groups")
    rope = h["rope_parameters"]
    if rope.get("rope_type", "default") == "default":
        return
    if rope.get("type", YARN) != YARN:
        raise ConfigError(f"{path}: rope_scaling states type {rope['type']!r} and rope_type {YARN!r}; the release's "
                          f"code reads rope_type: make them agree")
    unknown = sorted(set(rope) - _YARN_KEYS)
    if unknown:
        raise ConfigError(f"{path}: rope_scaling key {unknown[0]!r} (= {rope[unknown[0]]!r}) is not one the release's "
                          f"{YARN} code reads; hfview will not guess what it means")
    if rope.get("truncate", True) is not True:
        raise ConfigError(f"{path}: rope_scaling truncate {rope['truncate']!r}: the release's code always floors and "
                          f"ceils YaRN's correction range (truncate true), and so does llama.cpp; vLLM would honour "
                          f"false, so this config names a model the release's code does not compute")
    if "original_max_position_embeddings" not in rope and rope.get("factor") is None:
        raise ConfigError(f"{path}: rope_scaling {YARN} states neither original_max_position_embeddings nor factor; "
                          f"the release's code needs one of them")
    for key, fixed in (("beta_fast", 32), ("beta_slow", 1)):
        if (rope.get(key) or fixed) != fixed:
            raise ConfigError(f"{path}: rope_scaling {key} {rope[key]}: llama.cpp's llama architecture computes YaRN "
                              f"with {key} {fixed} only; this checkpoint would run wrong")
    y = yarn(h)
    if y["factor"] <= 1:
        raise ConfigError(f"{path}: {YARN} factor {y['factor']:g} (max_position_embeddings / "
                          f"original_max_position_embeddings): llama.cpp's YaRN scales only a factor above 1")
    if "factor" in rope and "original_max_position_embeddings" in rope and \
            not math.isclose(rope["factor"], y["factor"], rel_tol=1e-6):
        raise ConfigError(f"{path}: rope_scaling factor {rope['factor']:g} differs from max_position_embeddings / "
                          f"original_max_position_embeddings = {y['factor']:g}: the release's code uses the ratio, "
                          f"vLLM the stated factor; make them agree")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    kv = [
        u32(Keys.LLM.BLOCK_COUNT.format(arch="llama"), block_count),
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch="llama"), h["max_position_embeddings"]),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="llama"), h["hidden_size"]),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="llama"), h["intermediate_size"]),
        u32(Keys.Attention.HEAD_COUNT.format(arch="llama"), h["num_attention_heads"]),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch="llama"), h["num_key_value_heads"]),
    ]
    if h["rope_parameters"].get("rope_type", "default") == YARN:
        y = yarn(h)
        kv += [
            string(Keys.Rope.SCALING_TYPE.format(arch="llama"), "yarn"),
            f32(Keys.Rope.SCALING_FACTOR.format(arch="llama"), y["factor"]),
            u32(Keys.Rope.SCALING_ORIG_CTX_LEN.format(arch="llama"), y["original"]),
            # llama.cpp multiplies its own 0.1 * ln(factor) + 1 by this: the product is the release's scale
            f32(Keys.Rope.SCALING_ATTN_FACTOR.format(arch="llama"),
                y["attention_factor"] / (0.1 * math.log(y["factor"]) + 1.0)),
        ]
    return kv + [
        f32(Keys.Rope.FREQ_BASE.format(arch="llama"), h["rope_parameters"]["rope_theta"]),
        f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="llama"), h["rms_norm_eps"]),
        u32(Keys.Attention.KEY_LENGTH.format(arch="llama"), h["head_dim"]),
        u32(Keys.Attention.VALUE_LENGTH.format(arch="llama"), h["head_dim"]),
        u32(Keys.General.FILE_TYPE, file_type),
        u32(Keys.LLM.VOCAB_SIZE.format(arch="llama"), h["vocab_size"]),
        u32(Keys.Rope.DIMENSION_COUNT.format(arch="llama"), h["head_dim"]),
    ]


vocab = sentencepiece_only("TeleChat3")


FAMILY = Family(
    name="telechat3",
    gguf_arch="llama",
    architectures=("Telechat3ForCausalLM", "TeleChat3ForCausalLM"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    no_converter="the pinned converter has no class for Telechat3ForCausalLM; hfview's own mapping presents it as "
                 "llama.cpp's llama (Llama's block, its telechat3-yarn rotary as YaRN with a stated attn_factor)",
    notes={"rope_scaling": "telechat3-yarn: YaRN with cos/sin scale 0.07 ln(factor) + 1, written as llama.cpp's "
                           "rope.scaling.attn_factor over its own 0.1 ln(factor) + 1"},
)
