"""EXAONE 3 / 3.5 (ExaoneForCausalLM) -> llama.cpp `exaone` (the converter's ExaoneModel).

transformers 5.24 reads EXAONE 3's config.json through its ExaoneConfig, whose attribute map renames
`activation_function` to `hidden_act` (also num_layers -> num_hidden_layers, layer_norm_epsilon ->
rms_norm_eps). The pinned converter then fails on `hparams["activation_function"]` (KeyError) before
writing anything. The view writes what the converter writes past that check, reading the config as
ExaoneConfig presents it: TextModel's parameters, the rope width, Llama 3 rope factors where the rope
type is llama3. Tensors keep EXAONE's own names (transformer.h.N...); Q/K as stored (llama.cpp's exaone
rotates halves, as EXAONE does).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from ._parts.rope import llama3_rope_factors

# transformers 5.24's ExaoneConfig defaults, as data.
DEFAULTS = {
    "exaone": dict(vocab_size=102400, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                   num_attention_heads=32, num_key_value_heads=8, hidden_act="silu", max_position_embeddings=4096,
                   initializer_range=0.02, rms_norm_eps=1e-05, use_cache=True, pad_token_id=0, bos_token_id=1,
                   eos_token_id=361, tie_word_embeddings=False, attention_bias=False, attention_dropout=0.0,
                   mlp_bias=False, head_dim=None, rope_parameters={"rope_theta": 500000.0, "rope_type": "default"}),
}
# ExaoneConfig.attribute_map: the released key -> the name the config class (and so the converter) uses
ALIASES = {"num_layers": "num_hidden_layers", "layer_norm_epsilon": "rms_norm_eps",
           "activation_function": "hidden_act"}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias", *ALIASES,
})
HARMLESS: Harmless = {"embed_dropout": ANY}

TENSORS = (
    Tensor("transformer.wte.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("transformer.ln_f.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("transformer.h.{bid}.ln_1.weight", GGUF.ATTN_NORM.weight),
    Tensor("transformer.h.{bid}.attn.attention.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor("transformer.h.{bid}.attn.attention.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor("transformer.h.{bid}.attn.attention.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("transformer.h.{bid}.attn.attention.out_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("transformer.h.{bid}.ln_2.weight", GGUF.FFN_NORM.weight),
    Tensor("transformer.h.{bid}.mlp.c_fc_0.weight", GGUF.FFN_GATE.weight),
    Tensor("transformer.h.{bid}.mlp.c_fc_1.weight", GGUF.FFN_UP.weight),
    Tensor("transformer.h.{bid}.mlp.c_proj.weight", GGUF.FFN_DOWN.weight),
    Skip("transformer.h.{bid}.attn.attention.rotary_emb.inv_freq"),
)


def normalise(h: dict) -> dict:
    """What ExaoneConfig does: released key names read under its own names, head_dim and KV heads filled."""
    for alias, name in ALIASES.items():
        if alias in h:
            h[name] = h.pop(alias)
    if h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def _rope_width(h: dict) -> int:
    # the converter's: partial_rotary_factor (1 when unstated) of hidden/heads
    factor = h["rope_parameters"].get("partial_rotary_factor")
    return int((1.0 if factor is None else factor) * (h["hidden_size"] // h["num_attention_heads"]))


REFUSE = (
    Refuse("rope_parameters.rope_type", ("default", "linear", "yarn", "llama3"), "not one llama.cpp's exaone "
           "architecture computes (default, linear, yarn, llama3)", default="default"),
)


def check(h: dict, path: Path) -> None:
    # code, not a Refuse: the message names the key as EXAONE's config.json states it (activation_function)
    if h["hidden_act"] != "silu":
        raise ConfigError(f"{path}: activation_function {h['hidden_act']!r}: EXAONE's converter accepts SiLU only")
    if h["head_dim"] != h["hidden_size"] // h["num_attention_heads"]:
        raise ConfigError(f"{path}: head_dim {h['head_dim']} != hidden_size / num_attention_heads: the converter "
                          f"sizes EXAONE's rope from the latter, so this checkpoint would run wrong")
    if h.get("attention_bias") or h.get("mlp_bias"):
        raise ConfigError(f"{path}: attention_bias / mlp_bias: EXAONE's converter maps no bias tensors")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [*text_model_parameters(h, "exaone", block_count, file_type),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch="exaone"), _rope_width(h))]


def generated(h: dict) -> list:
    rope = h["rope_parameters"]
    if rope.get("rope_type", "").lower() == "llama3":
        return [(GGUF.ROPE_FREQS.weight, llama3_rope_factors(rope, h["head_dim"]))]
    return []


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="exaone",
    gguf_arch="exaone",
    architectures=("ExaoneForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    generated=generated,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    notes={"converter": "the pinned converter fails on EXAONE 3 under transformers 5 (KeyError "
                        "'activation_function': ExaoneConfig renames it to hidden_act); the view writes what "
                        "it writes past that check"},
)
