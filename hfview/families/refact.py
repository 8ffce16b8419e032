"""Refact-1.6B (GPTRefactForCausalLM, model_type gpt_refact, remote code) -> llama.cpp `refact` (the converter's
RefactModel).

GPT-BigCode's names with Llama's parts: multi-query attention (q: n_embd rows; kv: one head's key rows, then its
value rows), no positions but ALiBi (llama.cpp computes the slopes with its fixed maximum bias 8, the release's
schedule; nothing is written), a SwiGLU MLP whose gate_up_proj holds the gate rows, then the up rows, and
bias-free norms. The converter writes its own short list: the feed-forward width from n_embd alone (4 x n_embd,
times 2/3, rounded up to a multiple of 256, as the release's MLP sizes it), one KV head, and the norms' epsilon as
an RMS-norm epsilon: llama.cpp's refact normalises by the root mean square, where the release's modeling code
(modeling_gpt_refact.py, LayerNormNoBias) subtracts the mean first. That is the converter's file too; the logits
test measures it (tests/test_family_refact.py). transformers has no GPTRefact config class: config.json is read as
written (no defaults), except for Refact-1.6-base's first upload, which states model_type gpt_bigcode and so is
read, by the converter too, through transformers' GPTBigCodeConfig.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, Split, Tensor, stated
from ..names import GGUF, Keys
from ..params import f32, u32
from ..views import RowSelection
from .gpt_bigcode import DEFAULTS as _BIGCODE

# gpt_refact: no transformers config class, config.json as written. gpt_bigcode (with GPTRefactForCausalLM):
# AutoConfig reads it as transformers 5.24's GPTBigCodeConfig, whose defaults then fill the rest
DEFAULTS = {"gpt_refact": {}, "gpt_bigcode": _BIGCODE["gpt_bigcode"]}

READS = frozenset({"vocab_size", "n_embd", "n_layer", "n_head", "n_positions", "layer_norm_epsilon", "n_inner",
                   "multi_query"})
HARMLESS: Harmless = {
    # precision switches: the softmax, its scale and the ALiBi bias computed in float32 under 16-bit weights
    # (llama.cpp's softmax is float32 anyway)
    "attention_softmax_in_fp32": ANY, "scale_attention_softmax_in_fp32": ANY, "attention_bias_in_fp32": ANY,
    # dropout (the first uploads carry GPT-BigCode's); the modeling code hard-codes SiLU, so the first uploads'
    # activation_function is read by nothing, nor is scale_attn_weights (it always scales by 1/sqrt(head width))
    "embd_pdrop": ANY, "resid_pdrop": ANY, "attn_pdrop": ANY, "activation_function": ANY, "scale_attn_weights": ANY,
    # GPTBigCodeConfig's own fields (the gpt_bigcode-typed upload): the modeling code keeps one KV head and a
    # separate lm_head whatever they say
    "num_key_value_heads": ANY, "tie_word_embeddings": ANY,
}

_REQUIRED = ("n_embd", "n_layer", "n_head", "n_positions", "layer_norm_epsilon")


def ff_width(n_embd: int) -> int:
    """The release's MLP width, as the converter writes it: int(2 x 4 n_embd / 3) rounded up to a multiple of 256."""
    hidden = int(2 * (4 * n_embd) / 3)
    return 256 * ((hidden + 255) // 256)


def head_width(h: dict) -> int:
    return h["n_embd"] // h["n_head"]


def _rows(part: int, what: str, first: Callable[[dict], int]):
    """Rows [0, first(h)) (part 0) or [first(h), end) (part 1) of a fused matrix that must hold 2 x first(h) rows:
    the converter's data[:n] / data[n:] split, where llama.cpp then needs both parts n rows wide."""
    def make(sources, h):
        src = sources[0]
        n = first(h)
        if len(src.shape) != 2 or src.shape[0] != 2 * n or src.shape[1] != h["n_embd"]:
            raise CheckpointError(f"tensor {src.name!r} has shape {list(src.shape)}; Refact's {what} is "
                                  f"[{2 * n}, {h['n_embd']}] for n_embd {h['n_embd']} and n_head {h['n_head']}, so "
                                  f"llama.cpp's refact could not load its halves")
        return RowSelection(src, part * n + np.arange(n), f"{('first', 'second')[part]} {n} rows of {what}")
    return make


_L = "transformer.h.{bid}."
TENSORS = (
    Tensor("transformer.wte.weight", GGUF.TOKEN_EMBD.weight),
    Tensor(_L + "ln_1.weight", GGUF.ATTN_NORM.weight),
    Tensor(_L + "attn.q.weight", GGUF.ATTN_Q.weight),
    Split(_L + "attn.kv.weight", ((GGUF.ATTN_K.weight, _rows(0, "attn.kv (key, then value)", head_width)),
                                  (GGUF.ATTN_V.weight, _rows(1, "attn.kv (key, then value)", head_width)))),
    Tensor(_L + "attn.c_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(_L + "ln_2.weight", GGUF.FFN_NORM.weight),
    Split(_L + "mlp.gate_up_proj.weight",
          ((GGUF.FFN_GATE.weight, _rows(0, "mlp.gate_up_proj (gate, then up)", lambda h: ff_width(h["n_embd"]))),
           (GGUF.FFN_UP.weight, _rows(1, "mlp.gate_up_proj (gate, then up)", lambda h: ff_width(h["n_embd"]))))),
    Tensor(_L + "mlp.c_proj.weight", GGUF.FFN_DOWN.weight),
    Tensor("ln_f.weight", GGUF.OUTPUT_NORM.weight),
    # stored as released; llama.cpp would use the embedding if it were absent, the modeling code would not
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
)


REFUSE = (
    *(Refuse(key, stated, "missing; Refact's config.json states it (the converter reads it, no "
             "defaults apply)") for key in _REQUIRED),
    # `is True`: a tuple (True,) would also let 1 pass
    Refuse("multi_query", lambda v: v is True, "Refact's modeling code and llama.cpp's refact (the converter writes "
           "one KV head) compute multi-query attention only", default=True),
)


def check(h: dict, path: Path) -> None:
    n_embd, n_head = h["n_embd"], h["n_head"]
    if n_embd % n_head:
        raise ConfigError(f"{path}: n_embd {n_embd} does not split into n_head {n_head} heads")
    if h.get("n_inner") not in (None, 4 * n_embd):
        raise ConfigError(f"{path}: n_inner {h['n_inner']}: the converter sizes Refact's MLP from 4 x n_embd = "
                          f"{4 * n_embd} (ffn {ff_width(n_embd)}), so llama.cpp could not load these MLP weights")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [
        u32(Keys.LLM.CONTEXT_LENGTH.format(arch="refact"), h["n_positions"]),
        u32(Keys.LLM.EMBEDDING_LENGTH.format(arch="refact"), h["n_embd"]),
        u32(Keys.LLM.FEED_FORWARD_LENGTH.format(arch="refact"), ff_width(h["n_embd"])),
        u32(Keys.LLM.BLOCK_COUNT.format(arch="refact"), block_count),
        u32(Keys.Attention.HEAD_COUNT.format(arch="refact"), h["n_head"]),
        u32(Keys.Attention.HEAD_COUNT_KV.format(arch="refact"), 1),
        f32(Keys.Attention.LAYERNORM_RMS_EPS.format(arch="refact"), h["layer_norm_epsilon"]),
        u32(Keys.General.FILE_TYPE, file_type),
    ]


# The converter's fill-in-the-middle ids for Refact (prefix 1, middle 2, suffix 3: the release's <fim_prefix>,
# <fim_middle>, <fim_suffix>), set on a second SpecialVocab; these types have no GGUF key under these names, so
# what that second pass writes is its add_* flags again (and an eot id where the tokenizer files state one)
_FIM_IDS = {"prefix": 1, "suffix": 3, "middle": 2}


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.special import SpecialVocab
    from hfview.tokenizer.vocab import gpt2_vocab
    from hfview.tokenizer.writer import KVWriter

    w = KVWriter()
    w.extend(gpt2_vocab(model_dir, h))
    special = SpecialVocab(model_dir, load_merges=False, special_token_types=[*_FIM_IDS, "eot"])
    for typ, tid in _FIM_IDS.items():
        special.set_special_token(typ, tid)
    special.chat_template = None  # the first SpecialVocab already wrote it
    special.write(w)
    return w.kvs()


FAMILY = Family(
    name="refact",
    gguf_arch="refact",
    architectures=("GPTRefactForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    notes={"norm": "llama.cpp's refact normalises by RMS; the release's norms are bias-free LayerNorms (mean "
                   "subtracted): the converter's file computes so too"},
)
