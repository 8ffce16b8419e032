"""MiniMax-Text-01 and MiniMax-M1 (MiniMaxText01ForCausalLM, MiniMaxM1ForCausalLM) -> llama.cpp `minimax-01` (the
converter's MiniMaxText01Model).

A hybrid: lightning (linear) attention layers (one fused qkv_proj, SiLU over it, a decayed running key-value
state with per-head slopes llama.cpp computes itself, an RMSNorm over all heads, a sigmoid output_gate, out_proj)
and, every 8th layer, grouped-query softmax attention with rotate-half rope over the first rotary_dim of each
head. Over each layer a softmax router and experts w1/w2/w3 (gate, down, up) stacked in that order. The residual
of each sub-block is its normalised input times layernorm_*_alpha (all equal, written once as residual_scale)
plus the sub-block's output times layernorm_*_beta (1.0: the converter asserts it).

Read as released: model_type minimax_text_01 / minimax_m1 are remote-code classes, so transformers' AutoConfig
refuses them and the converter reads config.json as written (no defaults here either). The converter writes no
layer list: llama.cpp places softmax attention at every 8th layer (its default full_attention_interval), so a
config whose attn_type_list says otherwise is refused by name. transformers' own port (model_type minimax,
MiniMaxForCausalLM) is a class the pinned converter does not register, and is refused by name.

Vocabulary: _set_vocab_gpt2, then the converter's own MiniMax-M1 chat template (llama.cpp's
models/templates/MiniMax-M1.jinja, kept as data in minimax_01_template.py) replaces the template, unless a
chat_template.jinja beside the weights does. The converter also writes suppress_tokens from embedding rows past
the tokenizer's vocabulary that are all zero; the view does not read weight values for metadata, so a
checkpoint with embedding rows past its tokenizer's vocabulary is refused by name.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, Tensor, stated, unset
from ..names import GGUF, Keys
from ..params import f32, text_model_parameters, u32
from ._parts.checks import check_no_pooling, rope_types, silu_only
from ._parts.minimax_01_template import TEMPLATE

ARCH = "minimax-01"
ARCHITECTURES = ("MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM")
FULL_ATTENTION_INTERVAL = 8  # llama.cpp's default where the file states no layer list (the converter writes none)

# remote-code config classes: the converter reads config.json as written, nothing filled in
DEFAULTS = {"minimax_text_01": {}, "minimax_m1": {}}

_ALPHAS = ("layernorm_full_attention_alpha", "layernorm_linear_attention_alpha", "layernorm_mlp_alpha")
_BETAS = ("layernorm_full_attention_beta", "layernorm_linear_attention_beta", "layernorm_mlp_beta")
READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "num_local_experts", "num_experts_per_tok",
    "rotary_dim",      # the converter writes it as rope.dimension_count
    "attn_type_list",  # checked: softmax attention exactly at every 8th layer, where llama.cpp places it
    "postnorm",        # checked: true (the residual is the normalised input), what llama.cpp computes
    *_ALPHAS, *_BETAS,  # checked: alphas equal (residual_scale), betas 1.0 (the converter asserts both)
})
# no shared expert (shared_intermediate_size 0; its mode then changes nothing), the lightning kernel's block size
# (a computation chunk, not a value), no window
HARMLESS: Harmless = {"shared_intermediate_size": (0,), "shared_moe_mode": ANY, "block_size": ANY,
                      "sliding_window": (None,)}

_L = "model.layers.{bid}."
_A = _L + "self_attn."
some = False  # each exists on the layers of one kind only (llama.cpp checks each layer against its kind)
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    # softmax attention
    *(Tensor(_A + f"{p}_proj.weight", f"blk.{{bid}}.attn_{p}.weight", required=some) for p in ("q", "k", "v")),
    Tensor(_A + "o_proj.weight", GGUF.ATTN_OUT.weight, required=some),
    # lightning attention
    Tensor(_A + "qkv_proj.weight", GGUF.ATTN_QKV.weight, required=some),
    Tensor(_A + "output_gate.weight", GGUF.ATTN_GATE.weight, required=some),
    Tensor(_A + "norm.weight", GGUF.ATTN_NORM_2.weight, required=some),
    Tensor(_A + "out_proj.weight", GGUF.ATTN_OUT.weight, required=some),
    # the mixture: stacked in the converter's order w1 (gate), w2 (down), w3 (up)
    Tensor(_L + "block_sparse_moe.gate.weight", GGUF.FFN_GATE_INP.weight),
    *(Experts(_L + f"block_sparse_moe.experts.{{x}}.{w}.weight", f"blk.{{bid}}.ffn_{p}_exps.weight",
              "num_local_experts") for w, p in (("w1", "gate"), ("w2", "down"), ("w3", "up"))),
)


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def llama_cpp_kinds(n: int) -> list[int]:
    """1 where llama.cpp's minimax-01 runs softmax attention (a file without a layer list), else 0."""
    return [int((i + 1) % FULL_ATTENTION_INTERVAL == 0) for i in range(n)]


REFUSE = (
    silu_only(ARCH),
    rope_types(ARCH, allowed=("default",)),
    Refuse("attn_type_list", stated, "missing: MiniMax-01 releases state which layers run softmax "
           "attention (1) and which lightning attention (0)"),
    Refuse("attn_type_list", lambda v: 1 in v, f"none of them softmax attention: llama.cpp's {ARCH} then has an empty "
           f"attention cache and aborts (GGML_ASSERT(buffer) in ggml-backend.cpp, measured on a 3-layer MiniMax-01); "
           f"every release has softmax attention at every {FULL_ATTENTION_INTERVAL}th layer"),
    Refuse("tie_word_embeddings", unset, "MiniMax-01 releases store their own lm_head, and the view presents that "
           "layout only"),
    Refuse("num_local_experts", bool, "MiniMax-01 has a mixture of experts in every layer"),
    # `is True`: 1 is not the postnorm flag as released
    Refuse("postnorm", lambda v: v is True, f"llama.cpp's {ARCH} scales the normalised input as each residual "
           f"(postnorm true, as released); otherwise this checkpoint would run wrong"),
    Refuse("head_dim", stated, "missing: MiniMax-01 releases state it"),
    Refuse("rotary_dim", stated, "missing: the converter writes MiniMax-01's rotary width from it "
           "(and fails without it)"),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    n = h["num_hidden_layers"]
    kinds = h["attn_type_list"]
    if len(kinds) != n:
        raise ConfigError(f"{path}: attn_type_list lists {len(kinds)} layers, num_hidden_layers is {n}")
    if list(kinds) != llama_cpp_kinds(n):
        raise ConfigError(f"{path}: attn_type_list {list(kinds)}: the converter writes no layer list and llama.cpp's "
                          f"{ARCH} then runs softmax attention at every {FULL_ATTENTION_INTERVAL}th layer "
                          f"({llama_cpp_kinds(n)}): these layers would run the wrong mixer")
    missing = [k for k in (*_ALPHAS, *_BETAS) if h.get(k) is None]
    if missing:
        raise ConfigError(f"{path}: {', '.join(missing)} missing: the converter writes the residual scale from the "
                          f"layernorm alphas and betas (and fails without them)")
    if len({float(h[k]) for k in _ALPHAS}) != 1:
        raise ConfigError(f"{path}: {', '.join(f'{k} {h[k]}' for k in _ALPHAS)}: llama.cpp's {ARCH} has one "
                          f"residual_scale, so the alphas must be equal")
    if any(float(h[k]) != 1.0 for k in _BETAS):
        raise ConfigError(f"{path}: {', '.join(f'{k} {h[k]}' for k in _BETAS)}: llama.cpp's {ARCH} adds each "
                          f"sub-block's output unscaled (betas 1.0; the converter asserts it)")
    head_dim, rot = h["head_dim"], h["rotary_dim"]
    if not 0 < rot <= head_dim or rot % 2:
        raise ConfigError(f"{path}: rotary_dim {rot} is not an even width within head_dim {head_dim}")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """MiniMaxText01Model.set_gguf_parameters: TextModel's entries, the residual scale (the layernorm alphas) and
    the rotary width."""
    return [*text_model_parameters(h, ARCH, block_count, file_type),
            f32(Keys.LLM.RESIDUAL_SCALE.format(arch=ARCH), float(h["layernorm_full_attention_alpha"])),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), h["rotary_dim"])]


def _base_vocab_size(model_dir: Path) -> int:
    """The tokenizer's vocabulary without its added tokens (what the converter's tokenizer.vocab_size says)."""
    tok = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    return len(tok["model"]["vocab"])


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.special import write_chat_template
    from hfview.tokenizer.vocab import MODEL, PRE, TOKEN_TYPE, TOKENS, SpecialVocab, bpe_tokens
    from hfview.tokenizer.writer import KVWriter
    model_dir = Path(model_dir)
    if (base := _base_vocab_size(model_dir)) < h["vocab_size"]:
        raise ConfigError(f"{model_dir / 'tokenizer.json'}: {base} tokens before the added ones, vocab_size "
                          f"{h['vocab_size']}: the converter writes suppress_tokens from the values of the embedding "
                          f"rows past the tokenizer's, which the view does not present")
    tokens, types, pre = bpe_tokens(model_dir, h)
    w = KVWriter()
    w.add_string(MODEL, "gpt2")
    w.add_string(PRE, pre)
    w.add_array(TOKENS, tokens)
    w.add_array(TOKEN_TYPE, types)
    SpecialVocab(model_dir, load_merges=True).write(w)
    jinja = model_dir / "chat_template.jinja"
    write_chat_template(w, jinja.read_text(encoding="utf-8") if jinja.is_file() else TEMPLATE)
    return w.kvs()


FAMILY = Family(
    name="minimax_01",
    gguf_arch=ARCH,
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)
