"""IQuest-Coder (IQuestCoderForCausalLM, remote code) -> llama.cpp `llama` (the converter's LlamaModel).

Its non-looping decoder is Llama's. transformers 5.24 has no IQuestCoder class, so the converter reads
config.json as written (no defaults), and so does the view. The Loop variant (IQuestLoopCoderForCausalLM)
runs its layers twice; the converter does not know it, and the view refuses it by architecture.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse
from ._parts.checks import silu_only
from ._parts.decoder import LM_HEAD, decoder_tensors, llama_parameters
from ._parts.rope import llama3_rope_freqs
from ._parts.vocab import llama_vocab

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias",
})
HARMLESS: Harmless = {}
ARCHITECTURES = ("IQuestCoderForCausalLM",)
TENSORS = (*decoder_tensors("model.", pairs=True), LM_HEAD)
_ROPE_TYPES = ("default", "linear", "yarn", "llama3")


REFUSE = (
    silu_only("llama"),
    Refuse("rope_parameters.rope_type", _ROPE_TYPES, "not one llama.cpp's llama computes", default="default"),
)


def check(h: dict, path: Path) -> None:
    # LlamaModel permutes K by the KV head count it must find; the rest is read by name too
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads"):
        if key not in h:
            raise ConfigError(f"{path}: {key} is missing; IQuest-Coder's config has no defaults the view could use")


parameters = llama_parameters("llama")


FAMILY = Family(
    name="iquestcoder",
    gguf_arch="llama",
    architectures=ARCHITECTURES,
    defaults={"iquestcoder": {}},
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=llama_vocab,
    generated=llama3_rope_freqs,
    refuse=REFUSE,
    check=check,
    nvfp4_qk_pairs=lambda h: True,  # its converter class is a LlamaModel with undo_permute
)
