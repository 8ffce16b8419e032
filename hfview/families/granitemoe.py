"""Granite MoE and Granite MoE Shared (GraniteMoeForCausalLM, GraniteMoeSharedForCausalLM) -> llama.cpp
`granitemoe` (the converter's GraniteMoeModel).

Granite's attention, multipliers and vocabulary (Q/K in rotation pairs, as LlamaModel presents them), with a
mixture in place of the MLP: the router (softmax over the top-k logits), and every layer's experts stored
fused — input_linear [experts, 2 x ff, hidden] holds each expert's gate rows then its up rows, presented as two
stacks; output_linear is the down stack as stored. The shared variant adds one always-on SwiGLU expert.
"""
from __future__ import annotations

from ..family import Family, Refuse, Skip, Split, Tensor
from ..names import GGUF, Keys
from ..params import u32
from ._parts.mixture import half_of_each
from .granite import DEFAULTS as _GRANITE_DEFAULTS
from .granite import HARMLESS
from .granite import READS as _GRANITE_READS
from .granite import REFUSE as _GRANITE_REFUSE
from .granite import TENSORS as _GRANITE_TENSORS
from .granite import granite_parameters, normalise, vocab

_MOE = dict(num_local_experts=8, num_experts_per_tok=2, output_router_logits=False, router_aux_loss_coef=0.001)
# transformers 5.24's GraniteMoeConfig and GraniteMoeSharedConfig defaults
DEFAULTS = {
    "granitemoe": {**{k: v for k, v in _GRANITE_DEFAULTS["granite"].items() if k != "mlp_bias"},
                   "num_key_value_heads": 32, **_MOE},
    "granitemoeshared": {**{k: v for k, v in _GRANITE_DEFAULTS["granite"].items() if k != "mlp_bias"},
                         "num_key_value_heads": 32, **_MOE, "shared_intermediate_size": 0},
}

READS = (_GRANITE_READS - {"mlp_bias"}) | {"num_local_experts", "num_experts_per_tok", "shared_intermediate_size"}

TENSORS = (
    *(r for r in _GRANITE_TENSORS if isinstance(r, Skip) or ".mlp." not in r.hf),
    Tensor("model.layers.{bid}.block_sparse_moe.router.layer.weight", GGUF.FFN_GATE_INP.weight),
    Split("model.layers.{bid}.block_sparse_moe.input_linear.weight",
          ((GGUF.FFN_GATE_EXP.weight, half_of_each(0)), (GGUF.FFN_UP_EXP.weight, half_of_each(1)))),
    Tensor("model.layers.{bid}.block_sparse_moe.output_linear.weight", GGUF.FFN_DOWN_EXP.weight),
    Split("model.layers.{bid}.shared_mlp.input_linear.weight",
          ((GGUF.FFN_GATE_SHEXP.weight, half_of_each(0)), (GGUF.FFN_UP_SHEXP.weight, half_of_each(1))),
          required=lambda h: bool(h.get("shared_intermediate_size"))),
    Tensor("model.layers.{bid}.shared_mlp.output_linear.weight", GGUF.FFN_DOWN_SHEXP.weight,
           required=lambda h: bool(h.get("shared_intermediate_size"))),
)


REFUSE = (
    *_GRANITE_REFUSE,
    Refuse("num_local_experts", bool, "a Granite MoE without experts is not one the converter presents as granitemoe"),
)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    kv = granite_parameters("granitemoe")(h, block_count, file_type)
    if h.get("shared_intermediate_size"):
        kv.append(u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch="granitemoe"),
                      h["shared_intermediate_size"]))
    return kv


FAMILY = Family(
    name="granitemoe",
    gguf_arch="granitemoe",
    architectures=("GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM"),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    nvfp4_unmapped=("shared_mlp.input_linear.weight",),  # measured: "Can not map tensor" (test_nvfp4_more)
)
