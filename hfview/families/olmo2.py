"""OLMo 2 and OLMo 3 (Olmo2ForCausalLM, Olmo3ForCausalLM) -> llama.cpp `olmo2` (the converter's Olmo2Model).

Tensors as stored (NeoX rope): post-attention and post-feedforward RMSNorms, q/k RMSNorm over the whole
projection width. TextModel's hyperparameters; where the config has sliding_window (OLMo 3), the window
and the per-layer pattern from layer_types.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, RunnerFacts, Skip, Tensor
from ..gguf_layout import KV, ValueType
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from ._parts.checks import silu_only

_COMMON = dict(vocab_size=50304, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=None, hidden_act="silu", max_position_embeddings=2048,
               initializer_range=0.02, use_cache=True, pad_token_id=1, bos_token_id=None, eos_token_id=50279,
               tie_word_embeddings=False, attention_bias=False, attention_dropout=0.0, rms_norm_eps=1e-05)
_OLMO3_THETA = 500000.0  # Olmo3Config.default_theta
# transformers 5.24's Olmo2Config / Olmo3Config defaults (Olmo3's layer_types are computed in normalise)
DEFAULTS = {
    "olmo2": dict(_COMMON, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
    "olmo3": dict(_COMMON, sliding_window=4096, layer_types=None,
                  rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": _OLMO3_THETA},
                                   "full_attention": {"rope_type": "default", "rope_theta": _OLMO3_THETA}}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_parameters", "rope_scaling",
    "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "sliding_window", "layer_types",
})
HARMLESS: Harmless = {}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb),
    Tensor("model.layers.{bid}.self_attn.k_proj.{wb}", GGUF.ATTN_K.wb),
    Tensor("model.layers.{bid}.self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor("model.layers.{bid}.self_attn.o_proj.{wb}", GGUF.ATTN_OUT.wb),
    Tensor("model.layers.{bid}.self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight),
    Tensor("model.layers.{bid}.post_feedforward_layernorm.weight", GGUF.FFN_POST_NORM.weight),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h["model_type"] == "olmo3":
        if h.get("layer_types") is None:  # Olmo3Config: every 4th layer full attention
            h["layer_types"] = ["sliding_attention" if (i + 1) % 4 else "full_attention"
                                for i in range(h["num_hidden_layers"])]
        rope = h["rope_parameters"]
        if "full_attention" not in rope:
            # a released (legacy) config: Olmo3Config puts rope_scaling and rope_theta into the full-attention
            # entry; the sliding entry gets the class's default theta (rope_theta is consumed by the first)
            full = {"rope_type": "default", **rope}
            full.setdefault("rope_theta", _OLMO3_THETA)
            h["rope_parameters"] = {"sliding_attention": {"rope_type": "default", "rope_theta": _OLMO3_THETA},
                                    "full_attention": full}
    return h


# The rope each model type's full-attention layers may have: what llama.cpp was checked against transformers
# on (tests/test_family_olmo2.py). YaRN is OLMo 3.1's: Olmo3Config applies it to full-attention layers only,
# and llama.cpp's olmo2 graph does the same.
_FULL_ATTENTION_ROPE = {"olmo2": ("default",), "olmo3": ("default", "yarn")}


REFUSE = (silu_only("olmo2"),)


def check(h: dict, path: Path) -> None:
    rope = h["rope_parameters"]
    full, sliding = rope.get("full_attention", rope), rope.get("sliding_attention")
    allowed = _FULL_ATTENTION_ROPE[h["model_type"]]
    if full.get("rope_type", "default") not in allowed:
        raise ConfigError(f"{path}: rope type {full['rope_type']!r}: hfview presents {h['model_type']} with "
                          f"{' or '.join(allowed)} rope only, the kinds checked against transformers")
    if sliding is None:
        return
    # llama.cpp's olmo2 graph rotates sliding-window layers with plain rope at the full-attention theta
    if sliding.get("rope_type", "default") != "default" or sliding.get("rope_theta") != full.get("rope_theta"):
        raise ConfigError(f"{path}: sliding-window layers' rope {sliding}: llama.cpp's olmo2 architecture rotates "
                          f"them with plain rope at the full-attention theta ({full.get('rope_theta')}), so these "
                          f"layers would run wrong")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    kv = text_model_parameters(h, "olmo2", block_count, file_type)
    if "sliding_window" in h:
        kv.append(u32(Keys.Attention.SLIDING_WINDOW.format(arch="olmo2"), h["sliding_window"]))
        if h.get("layer_types"):
            pattern = [t == "sliding_attention" for t in h["layer_types"]]
        else:  # the converter's fallback: every 4th layer full attention
            pattern = [(i + 1) % 4 != 0 for i in range(h["num_hidden_layers"])]
        kv.append(KV(Keys.Attention.SLIDING_WINDOW_PATTERN.format(arch="olmo2"), ValueType.ARRAY, pattern,
                     ValueType.BOOL))
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="olmo2",
    gguf_arch="olmo2",
    architectures=("Olmo2ForCausalLM", "Olmo3ForCausalLM"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    # llama.cpp's olmo2 slides whenever the converter writes a window (OLMo 3)
    runner=RunnerFacts(llama_cpp_applies_window=True),
)
