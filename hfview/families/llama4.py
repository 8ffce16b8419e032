"""Llama 4 (Llama-4-Scout, Llama-4-Maverick: Llama4ForCausalLM, and Llama4ForConditionalGeneration read as its text
model) -> llama.cpp `llama4` (the converter's Llama4Model, derived from its LlamaModel).

Llama's attention with Q/K as stored (transformers rotates interleaved pairs, as llama.cpp's llama4 does), every
fourth layer without rope (NoPE) and with query temperature tuning, the others chunked (8192) with rope and an
L2 norm of q and k (no weights). Layers with a mixture (every `interleave_moe_layer_step`-th) have a sigmoid
router over the top-k logits, one always-on shared expert, and experts stored fused and inputs-first:
gate_up_proj [experts, hidden, 2 x ff] presented as the gate and up stacks, down_proj [experts, ff, hidden] as
the down stack (views.ExpertColumns); the other layers a dense SwiGLU of intermediate_size_mlp. The image-text
wrapper's vision tower and projector are skipped, as the converter's text model skips them.

llama.cpp's llama4 fixes what the config states (chunk 8192, NoPE every 4th layer, temperature floor 8192 and
scale 0.1, the q/k norm on unless there are 128 experts, a mixture every step-th layer): every such key is
read and refused by name where it says otherwise.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Split, Tensor, unset
from ..names import GGUF, Keys
from ..params import u32
from ..views import ExpertColumns
from ._parts.decoder import llama_parameters
from ._parts.rope import llama3_rope_freqs

# transformers 5.24's Llama4TextConfig defaults, as data (moe_layers, no_rope_layers, layer_types derived)
DEFAULTS = {
    "llama4_text": dict(vocab_size=202048, hidden_size=5120, intermediate_size=8192, intermediate_size_mlp=16384,
                        num_hidden_layers=48, num_attention_heads=40, num_key_value_heads=8, head_dim=128,
                        hidden_act="silu", max_position_embeddings=131072, initializer_range=0.02, rms_norm_eps=1e-05,
                        use_cache=True, pad_token_id=None, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                        attention_dropout=0.0, num_experts_per_tok=1, num_local_experts=16,
                        interleave_moe_layer_step=1, use_qk_norm=True, output_router_logits=False,
                        router_aux_loss_coef=0.001, router_jitter_noise=0.0,
                        rope_parameters={"rope_theta": 500000.0, "rope_type": "default"}, no_rope_layer_interval=4,
                        attention_chunk_size=8192, attn_temperature_tuning=True, floor_scale=8192, attn_scale=0.1,
                        attention_bias=False),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "intermediate_size_mlp", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps",
    "rope_parameters", "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias",
    "num_local_experts", "num_experts_per_tok",
    # checked against what llama.cpp's llama4 fixes
    "interleave_moe_layer_step", "moe_layers", "no_rope_layers", "no_rope_layer_interval", "layer_types",
    "attention_chunk_size", "attn_temperature_tuning", "floor_scale", "attn_scale", "use_qk_norm",
})
# The image-text wrapper's top level (its vision tower is not presented; the image token ids only matter to the
# projector), and switches no text forward pass reads: a quantization tool's (for_llm_compressor) and the
# generation cache's kind.
HARMLESS: Harmless = {"vision_config": ANY, "boi_token_index": ANY, "eoi_token_index": ANY, "image_token_index": ANY,
                      "for_llm_compressor": ANY, "cache_implementation": ANY}

_LAYER = "model.layers.{bid}."
_FF = _LAYER + "feed_forward."


def _fused_half(part: int):
    """The gate (0) or up (1) half of each expert's gate_up_proj columns, outputs-first."""
    def make(sources, h):
        src = sources[0]
        half = src.shape[-1] // 2
        return ExpertColumns(src, part * half, (part + 1) * half,
                             ("gate", "up")[part] + " half of each expert's gate_up_proj, transposed (stored inputs-first)")
    return make


def _down(sources, h):
    src = sources[0]
    return ExpertColumns(src, 0, src.shape[-1], "each expert transposed (stored inputs-first)")


TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied (llama.cpp reuses token_embd)
    Tensor(_LAYER + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_LAYER + "self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor(_LAYER + "self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor(_LAYER + "self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor(_LAYER + "self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(_LAYER + "post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    # a mixture layer (which layers: checked against llama.cpp's rule in check)
    Tensor(_FF + "router.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Split(_FF + "experts.gate_up_proj", ((GGUF.FFN_GATE_EXP.weight, _fused_half(0)),
                                          (GGUF.FFN_UP_EXP.weight, _fused_half(1))), required=False),
    Tensor(_FF + "experts.down_proj", GGUF.FFN_DOWN_EXP.weight, _down, required=False),
    Tensor(_FF + "shared_expert.gate_proj.weight", GGUF.FFN_GATE_SHEXP.weight, required=False),
    Tensor(_FF + "shared_expert.up_proj.weight", GGUF.FFN_UP_SHEXP.weight, required=False),
    Tensor(_FF + "shared_expert.down_proj.weight", GGUF.FFN_DOWN_SHEXP.weight, required=False),
    # a dense layer
    Tensor(_FF + "gate_proj.weight", GGUF.FFN_GATE.weight, required=False),
    Tensor(_FF + "up_proj.weight", GGUF.FFN_UP.weight, required=False),
    Tensor(_FF + "down_proj.weight", GGUF.FFN_DOWN.weight, required=False),
    # the image-text wrapper's vision tower and projector: not the text model's
    Skip("vision_model.{rest}"),
    Skip("model.vision_model.{rest}"),
    Skip("multi_modal_projector.{rest}"),
    Skip("model.multi_modal_projector.{rest}"),
)

_ARCH = "llama4"
# what llama.cpp's llama4 computes whatever the file says (src/models/llama4.cpp)
_CHUNK, _NOPE_EVERY, _TEMP_FLOOR, _TEMP_SCALE = 8192, 4, 8192, 0.1


def normalise(h: dict) -> dict:
    """Llama4TextConfig's constructor: KV heads, head width, and the per-layer lists it derives."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    n = h["num_hidden_layers"]
    if not h.get("no_rope_layers"):
        h["no_rope_layers"] = [int((i + 1) % h["no_rope_layer_interval"] != 0) for i in range(n)]
    if h.get("moe_layers") is None:
        step = h["interleave_moe_layer_step"]
        h["moe_layers"] = list(range(step - 1, n, step))
    if h.get("layer_types") is None:
        h["layer_types"] = ["chunked_attention" if r and h.get("attention_chunk_size") is not None else "full_attention"
                            for r in h["no_rope_layers"]]
    return h


REFUSE = (
    Refuse("hidden_act", ("silu",), f"llama.cpp's {_ARCH} computes SiLU only", default="silu"),
    Refuse("attention_bias", unset, f"llama.cpp's {_ARCH} has no attention biases"),
    Refuse("rope_parameters.rope_type", ("default", "llama3"), "hfview presents Llama 4 with the default or llama3 "
           "rope only", default="default"),
    Refuse("num_local_experts", bool, f"llama.cpp's {_ARCH} cannot run a model without experts"),
    Refuse("attention_chunk_size", (_CHUNK,), f"llama.cpp's {_ARCH} chunks attention by {_CHUNK} whatever the file "
           f"says"),
)


def check(h: dict, path: Path) -> None:
    n, experts = h["num_hidden_layers"], h["num_local_experts"]
    for key in ("no_rope_layers", "layer_types"):
        if len(h[key]) != n:
            raise ConfigError(f"{path}: {key} lists {len(h[key])} layers, num_hidden_layers is {n}")
    step = h["interleave_moe_layer_step"]
    llama_cpp_moe = [i for i in range(n) if (i + 1) % step == 0]
    if sorted(h["moe_layers"]) != llama_cpp_moe:
        raise ConfigError(f"{path}: moe_layers {h['moe_layers']}: llama.cpp's llama4 makes layer i a mixture exactly "
                          f"when (i + 1) % interleave_moe_layer_step ({step}) == 0, i.e. {llama_cpp_moe}")
    llama_cpp_rope = [int((i + 1) % _NOPE_EVERY != 0) for i in range(n)]
    if [int(bool(r)) for r in h["no_rope_layers"]] != llama_cpp_rope:
        raise ConfigError(f"{path}: no_rope_layers {h['no_rope_layers']}: llama.cpp's llama4 leaves out rope on "
                          f"every {_NOPE_EVERY}th layer exactly, i.e. {llama_cpp_rope}")
    kinds = ["chunked_attention" if r else "full_attention" for r in llama_cpp_rope]
    if list(h["layer_types"]) != kinds:
        raise ConfigError(f"{path}: layer_types {h['layer_types']}: llama.cpp's llama4 chunks the attention of the "
                          f"rope layers and attends fully on the NoPE ones, i.e. {kinds}")
    if not h.get("attn_temperature_tuning") or h.get("floor_scale") != _TEMP_FLOOR or h.get("attn_scale") != _TEMP_SCALE:
        raise ConfigError(f"{path}: attn_temperature_tuning {h.get('attn_temperature_tuning')!r}, floor_scale "
                          f"{h.get('floor_scale')!r}, attn_scale {h.get('attn_scale')!r}: llama.cpp's llama4 tunes "
                          f"the NoPE layers' query temperature with floor {_TEMP_FLOOR} and scale {_TEMP_SCALE} always")
    if bool(h.get("use_qk_norm")) != (experts != 128):
        raise ConfigError(f"{path}: use_qk_norm {h.get('use_qk_norm')!r} with {experts} experts: llama.cpp's llama4 "
                          f"normalises q and k exactly when there are not 128 experts (Scout yes, Maverick no)")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """Llama4Model: intermediate_size_mlp as the feed-forward length (the converter swaps the two widths), LlamaModel's
    entries, then the mixture step and the experts' width."""
    swapped = {**h, "intermediate_size": h["intermediate_size_mlp"]}
    return [*llama_parameters(_ARCH)(swapped, block_count, file_type),
            u32(Keys.LLM.INTERLEAVE_MOE_LAYER_STEP.format(arch=_ARCH), h["interleave_moe_layer_step"]),
            u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch=_ARCH), h["intermediate_size"])]


def vocab(model_dir: Path, h: dict) -> list:
    """LlamaModel's set_vocab is overridden by Llama4Model's: byte-level BPE."""
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="llama4",
    gguf_arch=_ARCH,
    architectures=("Llama4ForCausalLM", "Llama4ForConditionalGeneration"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    generated=llama3_rope_freqs,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
)
