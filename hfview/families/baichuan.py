"""Baichuan 1 and 2 (BaichuanForCausalLM / BaiChuanForCausalLM, remote code) -> llama.cpp `baichuan` (the
converter's BaichuanModel).

transformers has no Baichuan config class, so the converter reads config.json as it is (nothing is filled in).
The block is Llama's (RMSNorm, SwiGLU, no biases) with q, k and v fused in one `W_pack` (all q rows, then all k
rows, then all v rows); the converter splits it in three and regroups q and k into rotation pairs (the Meta
permutation), whatever the positional scheme (views.fused_part).

Positions: llama.cpp's baichuan chooses by the layer count alone (src/models/baichuan.cpp): 32 layers are its
"7B" and rotate q and k (RoPE, theta 10000: Baichuan-7B, Baichuan2-7B); 40 layers are its "13B" and add an ALiBi
bias with max_bias 8 (Baichuan-13B, Baichuan2-13B); any other count is "unknown" and gets neither, a model with no
positional information at all, which no release is. The releases agree with that rule (their 7B remote code
rotates, their 13B code biases), so a count other than 32 or 40 is refused, and so is Baichuan-7B's own class
(BaiChuanForCausalLM, always RoPE) at 40 layers.

Baichuan 2 (told apart from Baichuan 1 by vocab_size 125696, the size of its tokenizer, as vLLM decides it)
computes its logits with a NormHead: each lm_head row divided by its L2 norm at forward time. The converter writes
lm_head's rows as stored, and so does the view (its bytes are the converter's); llama.cpp then scales each token's
logit by that row's stored norm. tests/test_family_baichuan.py measures what that costs against the release's
forward.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, Skip, Split, Tensor, stated
from ..names import GGUF, Keys
from ..params import string, text_model_parameters, u32
from ..views import RowSelection, fused_part
from ._parts.sentencepiece_only import sentencepiece_only

ARCH = "baichuan"
DEFAULTS = {"baichuan": {}}  # no transformers class: nothing is filled in

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "model_max_length", "rms_norm_eps", "hidden_act",
})
HARMLESS: Harmless = {
    "z_loss_weight": ANY,        # Baichuan 2's auxiliary training loss on the logits: no forward pass reads it
    "_from_model_config": ANY,   # transformers' stamp on a config saved from a model
    "tie_word_embeddings": (False,),  # the releases store lm_head (Baichuan 2's NormHead is never tied)
}

# llama.cpp's baichuan: the layer count that picks each positional scheme (src/models/baichuan.cpp)
ROPE_LAYERS, ALIBI_LAYERS = 32, 40
BAICHUAN2_VOCAB = 125696


def positions(h: dict) -> str:
    """"rope" or "alibi": what llama.cpp's baichuan computes for this config (check refuses the rest)."""
    return {ROPE_LAYERS: "rope", ALIBI_LAYERS: "alibi"}[h["num_hidden_layers"]]


def is_baichuan2(h: dict) -> bool:
    """Baichuan 2 (its logits through a NormHead) rather than Baichuan 1: vocab_size 125696, Baichuan 2's
    tokenizer size (Baichuan 1's is 64000); vLLM tells them apart the same way."""
    return h.get("vocab_size") == BAICHUAN2_VOCAB


def _w_pack(part: int):
    """Part `part` (q, k, v) of W_pack; q and k regrouped into rotation pairs over the heads."""
    def make(sources, h):
        src = sources[0]
        hidden = h["hidden_size"]
        if len(src.shape) != 2 or src.shape[0] != 3 * hidden:
            raise CheckpointError(f"tensor {src.name!r} has shape {list(src.shape)}; W_pack holds q, k and v of "
                                  f"hidden_size {hidden} each: {[3 * hidden, hidden]}")
        heads = None if part == 2 else h["num_attention_heads"]
        label = ("query", "key", "value")[part] + " rows of W_pack" + (f", rotation pairs over {heads} heads"
                                                                      if heads else "")
        return RowSelection(src, fused_part(src.shape[0], part, 3, heads), label)
    return make


_L = "model.layers.{bid}."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_L + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Split(_L + "self_attn.W_pack.weight", ((GGUF.ATTN_Q.weight, _w_pack(0)),
                                           (GGUF.ATTN_K.weight, _w_pack(1)),
                                           (GGUF.ATTN_V.weight, _w_pack(2)))),
    Tensor(_L + "self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(_L + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor(_L + "mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor(_L + "mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor(_L + "mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip(_L + "self_attn.rotary_emb.inv_freq"),
)

_NEEDED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
           "rms_norm_eps")


REFUSE = (
    *(Refuse(key, stated, f"Baichuan needs {key!r} (read as stated: transformers has no Baichuan "
             f"class to fill it in); add it as the released config.json has it") for key in _NEEDED),
    Refuse("hidden_act", ("silu",), "llama.cpp's baichuan computes SiLU only; this checkpoint would run wrong",
           default="silu"),
    Refuse("num_hidden_layers", (ROPE_LAYERS, ALIBI_LAYERS), "llama.cpp's baichuan picks its positions by the layer "
           "count alone (32: RoPE as the 7B models, 40: ALiBi as the 13B models) and gives any other count neither, "
           "so this checkpoint would run without positions"),
)


def check(h: dict, path: Path) -> None:
    if h.get("max_position_embeddings") is None and h.get("model_max_length") is None:
        raise ConfigError(f"{path}: no context length (max_position_embeddings, as Baichuan-7B states it, or "
                          f"model_max_length, as the 13B releases do)")
    n_head = h["num_attention_heads"]
    if h.get("num_key_value_heads") not in (None, n_head):
        raise ConfigError(f"{path}: num_key_value_heads {h['num_key_value_heads']} with {n_head} attention heads: "
                          f"the converter splits W_pack into three equal parts, so Baichuan has no grouped KV heads")
    if h["hidden_size"] % n_head or (h["hidden_size"] // n_head) % 2:
        raise ConfigError(f"{path}: hidden_size {h['hidden_size']} does not split into {n_head} heads of an even "
                          f"width (num_attention_heads); the rotation pairs need one")
    archs = h.get("architectures") or ()
    if "BaiChuanForCausalLM" in archs and h["num_hidden_layers"] == ALIBI_LAYERS:
        raise ConfigError(f"{path}: architectures BaiChuanForCausalLM (Baichuan-7B's class, which rotates) with "
                          f"num_hidden_layers 40: llama.cpp's baichuan would add ALiBi instead of RoPE")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [*text_model_parameters(h, ARCH, block_count, file_type),
            string(Keys.LLM.TENSOR_DATA_LAYOUT.format(arch=ARCH), "Meta AI original pth"),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch=ARCH), h["hidden_size"] // h["num_attention_heads"])]


vocab = sentencepiece_only("Baichuan")


FAMILY = Family(
    name="baichuan",
    gguf_arch=ARCH,
    architectures=("BaichuanForCausalLM", "BaiChuanForCausalLM"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    notes={"vocab_size": "125696 marks Baichuan 2, whose NormHead normalises lm_head's rows at forward time; the "
                         "converter writes them as stored, and so does the view"},
)
