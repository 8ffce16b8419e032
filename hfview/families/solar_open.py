"""Solar Open (SolarOpenForCausalLM, model_type solar_open: Solar-Open-100B) -> llama.cpp `glm4moe` (the
converter's SolarOpenModel, a Glm4MoeModel with its own vocabulary).

transformers' SolarOpen is Llama's attention (no q/k norms; full rotary in the rotate-half layout, which
llama.cpp's glm4moe rotates as neox) over GLM-4.5's mixture in every layer: the tensors, KV entries and checks
are hfview/families/glm4_moe.py's. What differs:

* rotary width: the converter writes head_dim x partial_rotary_factor with 0.5 where the config states none, but
  transformers' SolarOpen rotates the whole head (its default 1.0, and its rotation has no pass-through part), so
  a config must state 1.0 (Solar-Open-100B does, at top level) and any other value or none is refused by name;
* no dense layers: SolarOpenConfig has no first_k_dense_replace (the release states 0, which the converter writes);
  a stated count above 0 would make llama.cpp expect dense layers transformers does not build, so it is refused;
* the vocabulary: eos and eot from <|endoftext|>, unk from <unk>, bos from <|startoftext|>, looked up by content
  among the tokenizer's added tokens where the tokenizer files set none (SolarOpenModel.set_vocab);
* the converter's SolarOpenModel does not offer --no-mtp, and SolarOpenConfig has no MTP layers: a stated
  num_nextn_predict_layers is written as glm4_moe writes it (extra blocks), as the converter would.

The design's model_type `solar` is another, older model (Solar Pro: SolarForCausalLM, remote code only); it is not
read here (hfview/coverage.py).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..family import Family, Refuse, unset
from . import glm4_moe
from ._parts.checks import rope_types, silu_only
from ._parts.glm_common import glm_special_vocab

ARCH = glm4_moe.ARCH

# transformers 5.24's SolarOpenConfig defaults (it defines no intermediate_size, first_k_dense_replace,
# partial_rotary_factor, use_qk_norm or MTP layer count)
DEFAULTS = {
    "solar_open": dict(vocab_size=196608, hidden_size=4096, num_hidden_layers=48, num_attention_heads=64,
                       num_key_value_heads=8, head_dim=128, hidden_act="silu", max_position_embeddings=131072,
                       initializer_range=0.02, rms_norm_eps=1e-5, use_cache=True, tie_word_embeddings=False,
                       rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}, attention_bias=False,
                       attention_dropout=0.0, moe_intermediate_size=1280, num_experts_per_tok=8,
                       n_shared_experts=1, n_routed_experts=128, routed_scaling_factor=1.0, n_group=1,
                       topk_group=1, norm_topk_prob=True, bos_token_id=None, eos_token_id=None,
                       pad_token_id=None),
}

READS = glm4_moe.READS - {"use_qk_norm"}
HARMLESS: Harmless = {"use_qk_norm": (False,)}  # SolarOpen builds no q/k norms; the converter never reads it


REFUSE = (
    silu_only(ARCH),
    rope_types(ARCH, ("default", "yarn")),  # Solar-Open-100B states yarn
    Refuse("rope_parameters.partial_rotary_factor", (1.0,), "transformers' SolarOpen rotates the whole head (its "
           "rotation has no pass-through part, so no other width runs), but the converter writes head_dim x "
           "partial_rotary_factor (0.5 when none is stated) rotary dims, so llama.cpp would run another function; "
           "Solar-Open-100B states 1.0"),
    Refuse("first_k_dense_replace", unset, f"transformers' SolarOpen builds a mixture in every layer, but llama.cpp's "
           f"{ARCH} would run that many leading layers as dense ones; Solar-Open-100B states 0"),
)


def normalise(h: dict) -> dict:
    """SolarOpenConfig (PreTrainedConfig's rope standardisation): a top-level partial_rotary_factor (the released
    layout) moves into rope_parameters unless that states its own; absent KV heads are the query heads."""
    top = h.pop("partial_rotary_factor", None)
    rope = dict(h["rope_parameters"])
    if top is not None:
        rope.setdefault("partial_rotary_factor", top)
    h["rope_parameters"] = rope
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


def vocab(model_dir: Path, h: dict) -> list:
    # SolarOpenModel.set_vocab: the BPE vocab, then eos/eot/unk/bos found by content among the added tokens
    return glm_special_vocab(model_dir, h, (("eos", "<|endoftext|>"), ("eot", "<|endoftext|>"), ("unk", "<unk>"),
                                            ("bos", "<|startoftext|>")),
                             tokenizer="Solar Open's tokenizer")


FAMILY = Family(
    name="solar_open",
    gguf_arch=ARCH,
    architectures=("SolarOpenForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=glm4_moe.TENSORS,
    parameters=glm4_moe.parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=glm4_moe.check_mixture,
    normalise=normalise,
    extra_blocks=glm4_moe.mtp_layers,
)
