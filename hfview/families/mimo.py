"""MiMo-7B (MiMoForCausalLM, model_type mimo; XiaomiMiMo/MiMo-7B-Base, -SFT, -RL, -RL-Zero; remote code) ->
llama.cpp `qwen2`, under hfview's own mapping: the pinned converter has no class for MiMoForCausalLM.

The release's modeling_mimo.py subclasses transformers' Qwen2: MiMoForCausalLM is Qwen2ForCausalLM whose model is
Qwen2Model plus `mtp_layers` (num_nextn_predict_layers MiMoMTPLayers: token/hidden norms, an input_proj over both,
a Qwen2 attention and MLP, a final norm) that the forward never reads; they serve speculative decoding in
vLLM / SGLang. So the function of a MiMo checkpoint is Qwen2ForCausalLM's over its other tensors, which is what
llama.cpp's qwen2 computes (q/k/v biases, rotate-half rope over the whole head): the tensors are presented under
Qwen2's table and model.mtp_layers.* are dropped, as they are not part of that function.

Config: read as written, transformers' Qwen2Config defaults filling the rest (the release's MiMoConfig subclasses
it, adding num_nextn_predict_layers). Vocabulary: Qwen2's byte-level BPE, as the release ships it.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..family import Family, Skip
from . import qwen2
from ._parts.checks import check_no_sliding, rope_types, silu_only
from ._parts.decoder import LM_HEAD, decoder_tensors

ARCHITECTURES = ("MiMoForCausalLM",)

DEFAULTS = {"mimo": dict(qwen2.DEFAULTS["qwen2"], num_nextn_predict_layers=1)}

READS = qwen2.READS
HARMLESS: Harmless = {
    # the MTP layers' count: the forward never runs them (their tensors are dropped)
    "num_nextn_predict_layers": ANY,
    # transformers' Qwen2Attention, which the release's code builds on, always has q/k/v biases (and the releases
    # state true)
    "attention_bias": (True,),
}

TENSORS = (
    *decoder_tensors("model."),
    LM_HEAD,
    Skip("model.mtp_layers.{rest}"),  # the MTP layers: not part of the forward's function
)


REFUSE = (silu_only("qwen2"), rope_types("qwen2"))


def check(h: dict, path: Path) -> None:
    check_no_sliding(h, path, "qwen2")


FAMILY = Family(
    name="mimo",
    gguf_arch="qwen2",
    architectures=ARCHITECTURES,
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=qwen2.parameters,
    vocab=qwen2.gpt2_or_sentencepiece_vocab,
    refuse=REFUSE,
    check=check,
    normalise=qwen2.normalise,
    no_converter="the pinned converter has no class for MiMoForCausalLM; hfview's own mapping presents it as "
                 "llama.cpp's qwen2 (Qwen2ForCausalLM's function; the MTP layers, which the forward never runs, "
                 "dropped)",
)
