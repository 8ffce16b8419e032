"""BitNet b1.58 (BitnetForCausalLM / BitNetForCausalLM) -> llama.cpp `bitnet` (the converter's BitnetModel, a
TextModel: Q/K as stored, llama.cpp's rotate-half rope). model_type bitnet (transformers' BitNetConfig, 2B-4T) or
llama (1bitLLM's releases: BitnetForCausalLM under LlamaConfig, chosen by architecture).

Llama's decoder with an RMSNorm before each output projection (the attention's before o_proj, the FFN's before
down_proj). The converter writes every projection ternary (its weight_quant, computed on read here: views.Ternarized).
Checkpoints of quant_method "bitnet" with packed weights are refused (hfview.quantized: the converter fails on them,
or with --no-lazy writes another model); "online" ones store their weights unpacked and read as any other.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Tensor
from ..names import GGUF, Keys
from ..params import f32, string, text_model_parameters
from ..views import Ternarized
from ._parts.checks import check_no_pooling, rope_types, silu_only

DEFAULTS = {
    "bitnet": dict(vocab_size=128256, hidden_size=2560, intermediate_size=6912, num_hidden_layers=30,
                   num_attention_heads=20, num_key_value_heads=5, hidden_act="relu2", max_position_embeddings=2048,
                   initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True, pad_token_id=None,
                   bos_token_id=128000, eos_token_id=128001, tie_word_embeddings=False, attention_bias=False,
                   attention_dropout=0.0, rope_parameters={"rope_theta": 500000.0, "rope_type": "default"}),
    # 1bitLLM's releases (bitnet_b1_58-large, -3B): BitnetForCausalLM under model_type llama (LlamaConfig's defaults)
    "llama": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=None, hidden_act="silu", max_position_embeddings=2048,
                  initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, pad_token_id=None, bos_token_id=1,
                  eos_token_id=2, pretraining_tp=1, tie_word_embeddings=False, attention_bias=False,
                  attention_dropout=0.0, mlp_bias=False, head_dim=None,
                  rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias", "quantization_config",
    "weight_bits", "input_bits",  # 1bitLLM's, read by its remote code only
})

HARMLESS: Harmless = {}
ARCHITECTURES = ("BitnetForCausalLM", "BitNetForCausalLM")


def ternary(sources, h):
    return Ternarized(sources[0])


_LAYER = "model.layers.{bid}."
# the sub-norms under the names the converter's tensor map knows (1bitLLM's); transformers' own BitNet names them
# attn_sub_norm / ffn_sub_norm, which the pinned converter cannot map ("Can not map tensor"): refused as it fails
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor(_LAYER + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_LAYER + "self_attn.q_proj.weight", GGUF.ATTN_Q.weight, ternary),
    Tensor(_LAYER + "self_attn.k_proj.weight", GGUF.ATTN_K.weight, ternary),
    Tensor(_LAYER + "self_attn.v_proj.weight", GGUF.ATTN_V.weight, ternary),
    Tensor(_LAYER + "self_attn.o_proj.weight", GGUF.ATTN_OUT.weight, ternary),
    Tensor(_LAYER + "self_attn.inner_attn_ln.weight", GGUF.ATTN_SUB_NORM.weight),
    Tensor(_LAYER + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor(_LAYER + "mlp.gate_proj.weight", GGUF.FFN_GATE.weight, ternary),
    Tensor(_LAYER + "mlp.up_proj.weight", GGUF.FFN_UP.weight, ternary),
    Tensor(_LAYER + "mlp.down_proj.weight", GGUF.FFN_DOWN.weight, ternary),
    Tensor(_LAYER + "mlp.ffn_layernorm.weight", GGUF.FFN_SUB_NORM.weight),
)


def normalise(h: dict) -> dict:
    """BitNetConfig and LlamaConfig: KV heads default to the head count; LlamaConfig also states head_dim."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("model_type") == "llama" and h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    return h


REFUSE = (
    silu_only("bitnet"),  # BitNetConfig's default and every 2B-4T release state relu2
    Refuse("tie_word_embeddings", (True,), "llama.cpp's bitnet takes its output from the token embeddings and has "
           "no output matrix; the pinned converter cannot map lm_head.weight (\"Can not map tensor\")"),
    Refuse("attention_bias", (False, None), "llama.cpp's bitnet has no attention biases"),
    Refuse("mlp_bias", (False, None), "llama.cpp's bitnet has no FFN biases"),
    # the converter writes rope scaling linear x 1.0 after the config's own: a stated one would be written twice
    rope_types("bitnet", ("default",)),
    Refuse("weight_bits", (1, None), "1bitLLM's weights are ternary (b1.58, weight_bits 1); the converter's weight_quant "
           "writes them ternary whatever this says"),
    Refuse("input_bits", (8, None), "1bitLLM's code rounds each projection's input to input_bits; of these the view "
           "presents 8, whose rounding llama.cpp leaves out (measured: NMSE ~2.5e-4, tests/test_family_bitnet.py)"),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    if h.get("head_dim") not in (None, h["hidden_size"] // h["num_attention_heads"]):
        raise ConfigError(f"{path}: head_dim {h['head_dim']} x {h['num_attention_heads']} heads is not hidden_size "
                          f"{h['hidden_size']}; llama.cpp's bitnet makes its query and output projections square")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's entries, then BitnetModel's rope scaling: linear, factor 1."""
    return [*text_model_parameters(h, "bitnet", block_count, file_type),
            string(Keys.Rope.SCALING_TYPE.format(arch="bitnet"), "linear"),
            f32(Keys.Rope.SCALING_FACTOR.format(arch="bitnet"), 1.0)]


def vocab(model_dir: Path, h: dict) -> list:
    """BitnetModel.set_vocab: the SentencePiece vocabulary (tokenizer.model) only."""
    from hfview.tokenizer.vocab import sentencepiece_vocab
    return sentencepiece_vocab(model_dir, h)


NOTES = {
    "input_bits": "8 (1bitLLM) and transformers' BitNet quantization round each projection's input to 8 bits a token; "
                  "llama.cpp's bitnet computes in full precision, and the view is held to transformers' modules "
                  "without that rounding (transformers' own forward with it differs from them by NMSE ~2.5e-4)",
}

FAMILY = Family(
    name="bitnet",
    gguf_arch="bitnet",
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
    notes=NOTES,
)
