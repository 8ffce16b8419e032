"""Tele-FLM / FLM-2 (TeleFLMForCausalLM, model_type TeleFLM, remote code) -> llama.cpp `granite`, under hfview's own
mapping: the pinned converter has no class for it, so there is no converter file to be byte-identical to.

Tele-FLM is Llama's decoder under Llama's tensor names with µScaling (µP) multipliers: with use_mup, the token
embeddings are multiplied by input_mult and the logits by output_mult / mup_scale_factor; attention keeps Llama's
1/sqrt(head width). That is the reading of vLLM's port (vllm/model_executor/models/teleflm.py: LlamaModel with
embed_input_ids scaled by input_mult, LlamaForCausalLM with its logits processor scaled by output_mult /
mup_scale_factor, Llama's weight names and loader): the release's own modeling_teleflm.py and its config.json
publish on the Hub only and were not reached. The same arithmetic is in the code of the lineage's 52B model as
Tele-AI released it under GPT-2's names (github.com/Tele-AI/TeleChat-52B, models/modeling_telechat.py at d3c85623:
inputs_embeds * input_mult, lm_logits * output_mult / mup_scale_factor, and scores over sqrt(head width) with and
without use_mup, its muP branch dividing by d / sqrt(d)). llama.cpp's granite graph is Llama's with an embedding scale, a
residual scale (unused here), an attention scale (Llama's default) and a logit divisor: embedding_scale =
input_mult, logit_scale = mup_scale_factor / output_mult.

Config: read as written (no transformers class fills defaults); every key vLLM's port reads must be stated, and any
key outside that reading is refused by name. Vocabulary: as Llama's (SentencePiece, or the tokenizer.json forms).
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, stated
from ..names import Keys
from ..params import f32, text_model_parameters, u32
from ._parts.checks import silu_only
from .granite import TENSORS

DEFAULTS = {"TeleFLM": {}}  # no transformers class: nothing is filled in

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
    "hidden_act", "tie_word_embeddings", "use_mup", "input_mult", "output_mult", "mup_scale_factor",
})
# Llama's switches vLLM's port reads, harmless in their off position (biases would be presented as Llama's are,
# but llama.cpp's granite graph has none for q/k/v)
HARMLESS: Harmless = {"attention_bias": (False,), "mlp_bias": (False,)}

_NEEDED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
           "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings", "use_mup")


def normalise(h: dict) -> dict:
    if h.get("num_key_value_heads") is None and "num_attention_heads" in h:
        h["num_key_value_heads"] = h["num_attention_heads"]
    return h


REFUSE = (
    *(Refuse(key, stated, f"TeleFLM needs {key!r} (read as stated: transformers has no TeleFLM "
             f"class to fill it in); add it as the released config.json has it") for key in _NEEDED),
    silu_only("granite"),
    Refuse("rope_parameters.rope_type", ("default",), "hfview presents TeleFLM with plain rope only",
           default="default"),
)


def check(h: dict, path: Path) -> None:
    for key in ("input_mult", "output_mult", "mup_scale_factor") if h.get("use_mup") else ():
        if h.get(key) is None:
            raise ConfigError(f"{path}: TeleFLM needs {key!r} (read as stated: transformers has no TeleFLM class to "
                              f"fill it in); add it as the released config.json has it")
    if h.get("use_mup") and (not h["output_mult"] or not h["mup_scale_factor"]):
        raise ConfigError(f"{path}: output_mult {h['output_mult']} and mup_scale_factor {h['mup_scale_factor']}: "
                          f"the logits are scaled by their quotient, which needs both nonzero")
    if h["hidden_size"] % h["num_attention_heads"] or h["num_attention_heads"] % h["num_key_value_heads"]:
        raise ConfigError(f"{path}: hidden_size {h['hidden_size']}, num_attention_heads {h['num_attention_heads']} "
                          f"and num_key_value_heads {h['num_key_value_heads']} do not split into whole heads")


def _scales(h: dict) -> tuple[float, float]:
    """(embedding scale, logit divisor) llama.cpp's granite applies: input_mult and mup_scale_factor / output_mult."""
    if not h["use_mup"]:
        return 1.0, 1.0
    return float(h["input_mult"]), h["mup_scale_factor"] / h["output_mult"]


def parameters(h: dict, block_count: int, file_type: int) -> list:
    embedding_scale, logit_scale = _scales(h)
    return [*text_model_parameters(h, "granite", block_count, file_type),
            u32(Keys.LLM.VOCAB_SIZE.format(arch="granite"), h["vocab_size"]),
            u32(Keys.Rope.DIMENSION_COUNT.format(arch="granite"), h["hidden_size"] // h["num_attention_heads"]),
            f32(Keys.LLM.EMBEDDING_SCALE.format(arch="granite"), embedding_scale),
            f32(Keys.LLM.LOGIT_SCALE.format(arch="granite"), logit_scale)]


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.vocab import llama_vocab
    return llama_vocab(model_dir, h)


FAMILY = Family(
    name="teleflm",
    gguf_arch="granite",
    architectures=("TeleFLMForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    no_converter="the pinned converter has no class for TeleFLMForCausalLM; hfview's own mapping presents it as "
                 "llama.cpp's granite (Llama's block, µScaling embedding and logit multipliers as granite's scales)",
)
