"""HyperCLOVA X SEED (HyperCLOVAXForCausalLM, model_type hyperclovax) -> llama.cpp `glm4`, under hfview's own
mapping: the pinned converter has no class for it, so there is no converter file to be byte-identical to.

transformers 5.24's modeling_hyperclovax.py computes Llama's block with muP multipliers and peri-layer norms:
embeddings times embedding_multiplier; per layer h = x + r * post_norm1(o_proj(attn(input_layernorm(x)))) and
h + r * post_norm2(mlp(post_attention_layernorm(h))) (r = residual_multiplier, every norm Llama's RMSNorm, the MLP
down(silu(gate(x)) * up(x))); rotate-half rotary over the whole head; scores times attention_multiplier; a final
RMSNorm, lm_head, and the logits times logits_scaling.

llama.cpp's glm4 graph is that block up to four constants: pre- and post-norms around attention and around its
SwiGLU MLP (ffn_up holding [gate; up]), scores times 1/sqrt(head width), no embedding, residual or logit scale.
Each constant is a linear factor the view folds into the weight it multiplies, in float32:
- residual_multiplier into post_norm1 and post_norm2 (r * (w * n) = (r * w) * n);
- attention_multiplier * sqrt(head width) into q_proj's rows (and bias): rotary is linear in q;
- embedding_multiplier into the embeddings;
- logits_scaling into the final norm's weight (lm_head is linear), over embedding_multiplier as well when the head
  is tied to the (scaled) embeddings.
glm4 rotates interleaved pairs (ggml's NORM rope): q and k rows are regrouped from rotate-half halves into rotation
pairs per head, as for Llama.

HyperCLOVAX Vision V2 (HyperCLOVAXVisionV2ForConditionalGeneration, model_type hyperclovax_vision_v2): its text
decoder is this model below model.language_model (its text_config a hyperclovax config); the Qwen2.5-VL vision tower
and its projector are left out, and the head is tied by the wrapper's own tie_word_embeddings, as transformers ties
it (wrapper_tie).

Refused by name: use_post_norm false (Granite's block: glm4's post norms are not optional, and an RMSNorm is not
the identity), biases on o_proj or the MLP (glm4 adds none there; attention_bias puts one on o_proj), activations
other than SiLU, and rope types llama.cpp's glm4 does not compute from these keys.
"""
from __future__ import annotations

import math
from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Stacked, Tensor, rope_pairs, unset
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from ..shards import StoredTensor
from ..views import RowsJoined, scaled

# transformers 5.24's HyperCLOVAXConfig defaults, as data; head_dim, num_key_value_heads and attention_multiplier
# are None there and computed by its __post_init__ (normalise below does the same).
DEFAULTS = {
    "hyperclovax": dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=None, hidden_act="silu", max_position_embeddings=2048, initializer_range=0.02,
        rms_norm_eps=1e-6, use_cache=True, pad_token_id=None, bos_token_id=1, eos_token_id=2,
        tie_word_embeddings=False, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
        attention_bias=False, attention_dropout=0.0, mlp_bias=False, embedding_multiplier=1.0, logits_scaling=1.0,
        residual_multiplier=1.0, attention_multiplier=None, head_dim=None, use_post_norm=True),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "rms_norm_eps",
    "tie_word_embeddings", "rope_parameters", "rope_scaling", "rope_theta", "attention_bias", "mlp_bias",
    "embedding_multiplier", "logits_scaling", "residual_multiplier", "attention_multiplier", "use_post_norm",
})
# HyperCLOVAX Vision V2's wrapper keys: its image and video path (the vision tower, its projector, the placeholder
# ids), which a text-only prompt never reaches
HARMLESS: Harmless = {"vision_config": ANY, "image_token_id": ANY, "video_token_id": ANY}


def normalise(h: dict) -> dict:
    """HyperCLOVAXConfig.__post_init__: head_dim, KV heads and the attention multiplier from the other keys."""
    if h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("attention_multiplier") is None:
        h["attention_multiplier"] = h["head_dim"] ** -0.5
    h["_gate_up_parts"] = 2  # the MLP's gate and up projections, joined into glm4's ffn_up
    return h


def _steps(factor, label: str):
    return (scaled(factor, label),) if factor != 1 else ()


def _q_steps(h: dict):
    return _steps(h["attention_multiplier"] * math.sqrt(h["head_dim"]),
                  "times attention_multiplier * sqrt(head_dim) (glm4 scales the scores by 1/sqrt(head_dim))")


def _embedding_steps(h: dict):
    return _steps(h["embedding_multiplier"], "times embedding_multiplier")


def _output_norm_steps(h: dict):
    factor = h["logits_scaling"] / (h["embedding_multiplier"] if h["tie_word_embeddings"] else 1)
    return _steps(factor, "times logits_scaling" + (" / embedding_multiplier (tied head)"
                                                    if h["tie_word_embeddings"] else ""))


def _residual_steps(h: dict):
    return _steps(h["residual_multiplier"], "times residual_multiplier")


def _gate_up(sources: list[StoredTensor], h: dict) -> RowsJoined:
    return RowsJoined(tuple(sources))


# after the converter's own rename (language_model. dropped): model.language_model.model.* and
# model.language_model.lm_head (the released layout transformers' conversion mapping reads) as the text model's
_WRAPPER = (("model.model.", "model."), ("model.lm_head.", "lm_head."))


def rename(name: str, h: dict) -> str:
    """gate_proj and up_proj as the two parts of one stack: glm4's ffn_up is [gate; up]. HyperCLOVAX Vision V2's text
    decoder under its wrapper's names (model.language_model.* as transformers 5 saves it, model.language_model.model.*
    and model.language_model.lm_head as released; the converter's rename drops language_model.) as the text
    model's."""
    for old, new in _WRAPPER:
        if name.startswith(old):
            name = new + name[len(old):]
            break
    for i, proj in enumerate(("gate_proj", "up_proj")):
        name = name.replace(f".mlp.{proj}.", f".mlp.gate_up.{i}.")
    return name


_tied = lambda h: h["tie_word_embeddings"]  # noqa: E731

TENSORS = (
    Skip("model.vision_model.{rest}"),  # HyperCLOVAX Vision V2's Qwen2.5-VL vision tower and its projector
    Skip("model.vision_projector.{rest}"),
    Skip("model.projector.{rest}"),
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight, steps=_embedding_steps),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=_output_norm_steps),
    Skip("lm_head.weight", when=_tied),  # tied: glm4 reads the output through the embeddings
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=lambda h: not h["tie_word_embeddings"]),
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb, rope_pairs("num_attention_heads"),
           steps=_q_steps),
    Tensor("model.layers.{bid}.self_attn.k_proj.{wb}", GGUF.ATTN_K.wb, rope_pairs("num_key_value_heads")),
    Tensor("model.layers.{bid}.self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.post_norm1.weight", GGUF.ATTN_POST_NORM.weight, steps=_residual_steps),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Stacked("model.layers.{bid}.mlp.gate_up.{x}.weight", GGUF.FFN_UP.weight, "_gate_up_parts",
            view=_gate_up),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Tensor("model.layers.{bid}.post_norm2.weight", GGUF.FFN_POST_NORM.weight, steps=_residual_steps),
)


def wrapper_tie(h: dict, stored: dict[str, StoredTensor]) -> dict:
    """HyperCLOVAX Vision V2: transformers ties the head by the wrapper's own tie_word_embeddings (the top-level
    config's, default true), not text_config's, which the merged config shows; read it from config.json."""
    if "vision_config" not in h or not stored:
        return h
    import json
    path = next(iter(stored.values())).path.parent / "config.json"
    top = json.loads(path.read_text(encoding="utf-8"))
    tie = top.get("tie_word_embeddings", True)
    if not isinstance(tie, bool):
        raise ConfigError(f"{path}: tie_word_embeddings {tie!r}: expected true or false")
    if tie and h["embedding_multiplier"] == 0:
        raise ConfigError(f"{path}: embedding_multiplier 0 with a tied head: the logits' factor cannot be folded")
    return {**h, "tie_word_embeddings": tie}


REFUSE = (
    Refuse("use_post_norm", bool, "without its post norms HyperCLOVA X is Granite's block, which hfview does not "
           "present for it yet; llama.cpp's glm4 (this mapping) requires the post norms, and an RMSNorm is not the "
           "identity"),
    Refuse("hidden_act", ("silu",), "llama.cpp's glm4 computes SiLU only"),
    Refuse("attention_bias", unset, "it puts a bias on o_proj too, and llama.cpp's glm4 adds no attention output "
           "bias"),
    Refuse("mlp_bias", unset, "llama.cpp's glm4 adds no MLP biases"),
    Refuse("rope_parameters.rope_type", ("default", "linear"), "hfview presents HyperCLOVA X's rotary to llama.cpp's "
           "glm4 as default or linear scaling only", default="default"),
    Refuse("rope_parameters.partial_rotary_factor", (1.0,), "HyperCLOVA X's rotary covers the whole head",
           default=1.0),
)


def check(h: dict, path: Path) -> None:
    n_head, n_kv, d = h["num_attention_heads"], h["num_key_value_heads"], h["head_dim"]
    if n_head % n_kv or d % 2:
        raise ConfigError(f"{path}: {n_head} heads over {n_kv} KV heads of width {d}: the heads must split into "
                          f"whole KV groups, and rotation pairs need an even width")
    if h["tie_word_embeddings"] and h["embedding_multiplier"] == 0:
        raise ConfigError(f"{path}: embedding_multiplier 0 with a tied head: the logits' factor cannot be folded")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return [*text_model_parameters(h, "glm4", block_count, file_type),
            u32(Keys.Attention.KEY_LENGTH.format(arch="glm4"), h["head_dim"]),
            u32(Keys.Attention.VALUE_LENGTH.format(arch="glm4"), h["head_dim"]),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch="glm4"), h["head_dim"])]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import llama_vocab
    return llama_vocab(model_dir, h)


FAMILY = Family(
    name="hyperclovax",
    gguf_arch="glm4",
    architectures=("HyperCLOVAXForCausalLM", "HyperCLOVAXVisionV2ForConditionalGeneration"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    rename=rename,
    stored_hparams=wrapper_tie,
    no_converter="the pinned converter has no class for HyperCLOVAXForCausalLM; hfview's own mapping presents it as "
                 "llama.cpp's glm4 (pre- and post-norms around attention and MLP, the muP multipliers folded into "
                 "the weights they multiply)",
    notes={"multipliers": "residual into the post norms, attention into q, embedding into the embeddings, logits "
                          "into the final norm (over embedding_multiplier when tied)"},
)
