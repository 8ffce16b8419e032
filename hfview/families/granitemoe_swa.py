"""Granite MoE SWA (GraniteMoeSWAForCausalLM) -> llama.cpp `granite_swa` (the converter's GraniteMoeSWAModel, derived
from its GraniteSWAModel).

Granite SWA's attention (Q/K in rotation pairs, Granite's four multipliers, interleaved sliding-window layers,
per-head attention sinks) with Granite MoE's mixture in place of the MLP: the router, and every layer's experts
stored fused — gate_up_proj [experts, 2 x ff, hidden] — which the converter keeps fused (llama.cpp's
`ffn_gate_up_exps`), as it keeps the optional shared expert's fused input_linear (`ffn_up_shexp`, 2 x width rows).
Every tensor is presented as stored.
"""
from __future__ import annotations

from ..family import Family, Refuse, RunnerFacts, Tensor
from ..names import GGUF, Keys
from ..params import u32
from .granite_swa import HARMLESS
from .granite_swa import READS as _SWA_READS
from .granite_swa import REFUSE as _SWA_REFUSE
from .granite_swa import TENSORS as _SWA_TENSORS
from .granite_swa import check as _swa_check
from .granite_swa import normalise
from .granite_swa import parameters as _swa_parameters
from .granite_swa import vocab
from .granitemoe import DEFAULTS as _MOE_DEFAULTS

# transformers 5.24's GraniteMoeSWAConfig defaults: GraniteMoeSharedConfig's plus the window (layer_types and
# layer_rope_theta derived)
DEFAULTS = {"granitemoe_swa": {**_MOE_DEFAULTS["granitemoeshared"], "rms_norm_eps": 1e-06, "sliding_window": 128}}

READS = (_SWA_READS - {"mlp_bias", "no_rope_layers"}) | {"num_local_experts", "num_experts_per_tok",
                                                         "shared_intermediate_size"}

_LAYER = "model.layers.{bid}."
_shared = lambda h: bool(h.get("shared_intermediate_size"))  # noqa: E731
TENSORS = (
    *(r for r in _SWA_TENSORS if ".mlp." not in r.hf),
    Tensor(_LAYER + "block_sparse_moe.router.weight", GGUF.FFN_GATE_INP.weight),
    Tensor(_LAYER + "block_sparse_moe.experts.gate_up_proj", GGUF.FFN_GATE_UP_EXP.weight),
    Tensor(_LAYER + "block_sparse_moe.experts.down_proj", GGUF.FFN_DOWN_EXP.weight),
    Tensor(_LAYER + "shared_mlp.input_linear.weight", GGUF.FFN_UP_SHEXP.weight, required=_shared),
    Tensor(_LAYER + "shared_mlp.output_linear.weight", GGUF.FFN_DOWN_SHEXP.weight, required=_shared),
)


REFUSE = (
    *_SWA_REFUSE,
    Refuse("num_local_experts", bool, "a Granite MoE SWA without experts is not one the view presents (transformers "
           "would still build a router)"),
)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    kv = _swa_parameters(h, block_count, file_type)
    if h.get("shared_intermediate_size"):
        kv.append(u32(Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH.format(arch="granite_swa"),
                      h["shared_intermediate_size"]))
    return kv


FAMILY = Family(
    name="granitemoe_swa",
    gguf_arch="granite_swa",
    architectures=("GraniteMoeSWAForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=_swa_check,
    normalise=normalise,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
    nvfp4_unmapped=("shared_mlp.input_linear.weight",),  # measured: "Can not map tensor" (test_nvfp4_more)
    runner=RunnerFacts(llama_cpp_applies_window=True),  # llama.cpp's granite_swa slides on the layers layer_types names
)
