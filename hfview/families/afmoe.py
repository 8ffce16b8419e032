"""AFMoE (Arcee Trinity Nano / Mini / Large: AfmoeForCausalLM) -> llama.cpp `afmoe` (the converter's AfmoeModel,
a LlamaModel that skips Llama's Q/K regrouping).

Per-head q/k RMS norms, a sigmoid gate on the attention output (`self_attn.gate_proj`, before o_proj), norms
before and after both attention and the FFN, embeddings scaled by sqrt(hidden) (muP). The first
num_dense_layers layers have a dense SwiGLU FFN, the rest a mixture: sigmoid router scores, a per-expert
selection bias (`mlp.expert_bias`, for choosing only), the chosen weights renormalised and times route_scale,
plus num_shared_experts always-on experts. llama.cpp's afmoe fixes the layer pattern: every 4th layer global
without rope, the others sliding with rope, which is transformers' pattern when global_attn_every_n_layers is 4.
The expert stacks are written gate, up, down (the converter's merge order for this class).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Experts, Family, Refuse, RunnerFacts, Skip, Tensor, unset
from ..names import GGUF, Keys
from ..params import boolean, f32, u32
from ._parts.checks import check_no_pooling
from ._parts.decoder import llama_parameters
from ._parts.vocab import llama_vocab

# transformers 5.24's AfmoeConfig defaults (layer_types and num_key_value_heads are derived: normalise)
DEFAULTS = {
    "afmoe": dict(vocab_size=200192, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=1408,
                  num_hidden_layers=32, num_dense_layers=1, num_attention_heads=16, num_key_value_heads=None,
                  head_dim=128, hidden_act="silu", max_position_embeddings=16384, initializer_range=0.02,
                  rms_norm_eps=1e-05, use_cache=True, tie_word_embeddings=False,
                  rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}, num_experts=64,
                  num_experts_per_tok=6, num_shared_experts=2, route_scale=1.0, output_router_logits=False,
                  global_attn_every_n_layers=4, sliding_window=1024, layer_types=None, attention_dropout=0.0,
                  mup_enabled=False, eos_token_id=None, pad_token_id=None, bos_token_id=None,
                  attention_bias=False),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias",
    "num_experts", "num_experts_per_tok", "moe_intermediate_size", "num_shared_experts", "num_dense_layers",
    "route_scale", "route_norm", "mup_enabled", "sliding_window", "global_attn_every_n_layers", "layer_types",
    # keys of Trinity's config.json the converter writes (TextModel: group counts, scoring function); the
    # family checks each says what transformers' AFMoE computes
    "score_func", "n_group", "topk_group",
})
# Trinity's config.json also states these, which AfmoeConfig does not define and transformers' AFMoE never
# reads (its router has no groups; use_grouped_mm picks a kernel of Arcee's own code)
HARMLESS: Harmless = {"num_expert_groups": (1,), "num_limited_groups": (1,), "use_grouped_mm": ANY}

_LAYER = "model.layers.{bid}."
_MIXTURE = "model.layers.{bid}.mlp."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=lambda h: not h.get("tie_word_embeddings")),
    Tensor(f"{_LAYER}input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(f"{_LAYER}post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight),
    Tensor(f"{_LAYER}pre_mlp_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor(f"{_LAYER}post_mlp_layernorm.weight", GGUF.FFN_POST_NORM.weight),
    *(Tensor(f"{_LAYER}self_attn.{p}_proj.weight", f"blk.{{bid}}.attn_{p}.weight") for p in ("q", "k", "v")),
    Tensor(f"{_LAYER}self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor(f"{_LAYER}self_attn.gate_proj.weight", GGUF.ATTN_GATE.weight),
    Tensor(f"{_LAYER}self_attn.q_norm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor(f"{_LAYER}self_attn.k_norm.weight", GGUF.ATTN_K_NORM.weight),
    # each of these exists in some layers only: dense FFNs before num_dense_layers, mixtures from there on
    *(Tensor(f"{_MIXTURE}{p}_proj.weight", f"blk.{{bid}}.ffn_{p}.weight", required=False)
      for p in ("gate", "up", "down")),
    Tensor(f"{_MIXTURE}router.gate.weight", GGUF.FFN_GATE_INP.weight, required=False),
    Tensor(f"{_MIXTURE}expert_bias", GGUF.FFN_EXP_PROBS_B.bias, required=False),
    *(Experts(f"{_MIXTURE}experts.{{x}}.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_exps.weight", "num_experts",
              required=False) for p in ("gate", "up", "down")),
    *(Tensor(f"{_MIXTURE}shared_experts.{p}_proj.weight", f"blk.{{bid}}.ffn_{p}_shexp.weight", required=False)
      for p in ("gate", "up", "down")),
    Skip(f"{_LAYER}self_attn.rotary_emb.inv_freq"),
)

# llama.cpp's afmoe: every 4th layer global (full attention, no rope), the others sliding with rope
_GLOBAL_EVERY = 4


def _layer_pattern(n_layer: int, every: int) -> list[str]:
    """AfmoeConfig's layer_types from global_attn_every_n_layers."""
    return ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layer)]


def normalise(h: dict) -> dict:
    """What AfmoeConfig's __post_init__ computes: layer kinds and KV heads."""
    if h.get("layer_types") is None:
        h["layer_types"] = _layer_pattern(h["num_hidden_layers"], h["global_attn_every_n_layers"])
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    return h


REFUSE = (
    Refuse("hidden_act", ("silu",), "llama.cpp's afmoe computes SiLU only; this checkpoint would run wrong"),
    Refuse("attention_bias", unset, "llama.cpp's afmoe has no attention biases"),
    Refuse("rope_parameters.rope_type", ("default",), "not a rope type llama.cpp's afmoe computes (plain rope only)",
           default="default"),
    Refuse("mup_enabled", bool, "llama.cpp's afmoe always scales the embeddings by sqrt(hidden_size), which "
           "transformers does only with mup_enabled true (every Trinity release states it)"),
    Refuse("num_experts", bool, "llama.cpp's afmoe needs a mixture after its leading dense layers"),
    Refuse("num_shared_experts", bool, "transformers' AFMoE then holds a shared expert of width 0, which no GGUF "
           "tensor can carry"),
    # `is True`, not (True,): 1 == True would pass a tuple
    Refuse("route_norm", lambda v: v is True, "transformers' AFMoE always renormalises the chosen experts' "
           "weights, llama.cpp's afmoe only where the converter writes route_norm true (Trinity's config.json "
           "states it; transformers 5 leaves it out when it saves a config)"),
    Refuse("score_func", ("sigmoid",), "transformers' AFMoE scores experts by sigmoid only, so the converter's "
           "gating by it would run otherwise", default="sigmoid"),
    *(Refuse(key, (None, 1), "transformers' AFMoE routes without expert groups, llama.cpp would limit the choice "
             "to groups") for key in ("n_group", "topk_group")),
)


def check(h: dict, path: Path) -> None:
    check_no_pooling(path)
    if list(h["layer_types"]) != _layer_pattern(h["num_hidden_layers"], _GLOBAL_EVERY):
        raise ConfigError(f"{path}: layer_types {h['layer_types']} (global_attn_every_n_layers "
                          f"{h.get('global_attn_every_n_layers')!r}): llama.cpp's afmoe makes every 4th layer "
                          f"global without rope and the others sliding with rope; this pattern would run wrong")
    if not 0 <= h["num_dense_layers"] <= h["num_hidden_layers"]:
        raise ConfigError(f"{path}: num_dense_layers {h['num_dense_layers']} of {h['num_hidden_layers']} layers")


_llama = llama_parameters("afmoe")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """AfmoeModel.set_gguf_parameters: LlamaModel's entries, then the mixture's, routing and window."""
    kv = [*_llama(h, block_count, file_type),
          u32(Keys.LLM.EXPERT_SHARED_COUNT.format(arch="afmoe"), h["num_shared_experts"]),
          u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch="afmoe"), h["moe_intermediate_size"]),
          u32(Keys.LLM.LEADING_DENSE_BLOCK_COUNT.format(arch="afmoe"), h["num_dense_layers"])]
    if h.get("route_norm") is not None:
        kv.append(boolean(Keys.LLM.EXPERT_WEIGHTS_NORM.format(arch="afmoe"), h["route_norm"]))
    kv.append(f32(Keys.LLM.EXPERT_WEIGHTS_SCALE.format(arch="afmoe"), h["route_scale"]))
    if h.get("sliding_window") is not None:
        kv.append(u32(Keys.Attention.SLIDING_WINDOW.format(arch="afmoe"), h["sliding_window"]))
    return kv


FAMILY = Family(
    name="afmoe",
    gguf_arch="afmoe",
    architectures=("AfmoeForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=llama_vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    # llama.cpp's afmoe slides on three layers of four, as the model does
    runner=RunnerFacts(llama_cpp_applies_window=True, applies_ffn_scales=False),  # nor does it scale its FFNs
)
