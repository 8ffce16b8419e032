"""gpt-oss, BF16 exports (GptOssForCausalLM) -> llama.cpp `gpt-oss` (the converter's GptOssModel).

RMS norms, q/k/v/o with biases (rotate-half rope: as stored), one learned attention sink per head, layers
alternating sliding-window and full attention, yarn rope, and a mixture in every layer: a router with a bias
(softmax over the top-k logits) and experts stored fused and inputs-first. gate_up_proj [experts, hidden, 2 x
ffn] holds gate and up in interleaved columns (even, odd): each is presented [experts, ffn, hidden], its
columns picked and transposed expert by expert (views.Transposed with columns); down_proj [experts, ffn,
hidden] is transposed the same way; the biases' columns are picked alike (views.ColumnSelection).

The released checkpoints are MXFP4-quantized (quantization_config quant_method mxfp4): each layer's experts stored
outputs-first as `<proj>_blocks` / `<proj>_scales` (views.MXFP4Pair), gate and up in interleaved rows. They are
presented as the converter writes them (GptOssModel.generate_extra_tensors): ggml MXFP4 at every outtype, their bits
moved into ggml's blocks on read (views.MXFP4Rows), first in the file; the file type MOSTLY_MXFP4_MOE.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, RunnerFacts, Split, Tensor, unset
from ..names import GGUF, Keys
from ..params import text_model_parameters, u32
from ..views import ColumnSelection, MXFP4Pair, MXFP4Rows, Transposed, interleaved

# transformers 5.24's GptOssConfig defaults
DEFAULTS = {
    "gpt_oss": dict(num_hidden_layers=36, num_local_experts=128, vocab_size=201088, hidden_size=2880,
                    intermediate_size=2880, head_dim=64, num_attention_heads=64, num_key_value_heads=8,
                    sliding_window=128, tie_word_embeddings=False, hidden_act="silu", initializer_range=0.02,
                    max_position_embeddings=131072, rms_norm_eps=1e-05,
                    rope_parameters={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                     "truncate": False, "original_max_position_embeddings": 4096,
                                     "rope_theta": 150000.0},
                    attention_dropout=0.0, num_experts_per_tok=4, swiglu_alpha=1.702, swiglu_limit=7.0,
                    router_aux_loss_coef=0.001, output_router_logits=False, use_cache=True, pad_token_id=None,
                    bos_token_id=None, eos_token_id=None, attention_bias=True),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "tie_word_embeddings", "num_local_experts", "num_experts_per_tok",
    "sliding_window", "layer_types",  # checked: llama.cpp's gpt-oss alternates sliding and full from layer 0
    "attention_bias",  # checked: llama.cpp's gpt-oss needs the output bias
    "swiglu_alpha", "swiglu_limit",  # checked: llama.cpp's gpt-oss fixes them at 1.702 and 7.0
})
# GptOssConfig carries hidden_act, which its experts never read (their gate is the clamped SwiGLU above). The
# release also states OpenAI's own names, which GptOssConfig does not define and neither transformers nor the
# converter reads: experts_per_token (num_experts_per_tok) and initial_context_length (the rope's original context)
HARMLESS: Harmless = {"hidden_act": ANY, "experts_per_token": ANY, "initial_context_length": ANY}

# llama.cpp's LLM_FFN_SWIGLU_OAI_MOE constants (src/llama-graph.cpp)
_ALPHA, _LIMIT = 1.702, 7.0


def _experts_first(src, h):
    if src.shape[0] != h["num_local_experts"]:
        raise CheckpointError(f"tensor {src.name!r} holds {src.shape[0]} experts, but num_local_experts = "
                              f"{h['num_local_experts']}")


def _gate_up(part: int):
    """gate (0) or up (1): the even or odd columns of each expert's [hidden, 2 x ffn] block, transposed."""
    def make(sources, h):
        src = sources[0]
        _experts_first(src, h)
        if isinstance(src, MXFP4Pair):  # the release's MXFP4: outputs-first, gate and up in interleaved rows
            return MXFP4Rows(src, interleaved(src.shape[-2], part), ("gate", "up")[part] + " rows of each expert")
        return Transposed(src, columns=interleaved(src.shape[-1], part), label=("gate", "up")[part] + " columns")
    return make


def _gate_up_bias(part: int):
    def make(sources, h):
        src = sources[0]
        _experts_first(src, h)
        return ColumnSelection(src, interleaved(src.shape[-1], part), ("gate", "up")[part] + " columns of each "
                               "expert's interleaved gate_up bias")
    return make


def _down(sources, h):
    _experts_first(sources[0], h)
    if isinstance(sources[0], MXFP4Pair):
        return MXFP4Rows(sources[0])
    return Transposed(sources[0])


_LAYER = "model.layers.{bid}."
TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight),
    Tensor(_LAYER + "input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor(_LAYER + "post_attention_layernorm.weight", GGUF.ATTN_POST_NORM.weight),
    *(Tensor(f"{_LAYER}self_attn.{p}_proj.{wb}", f"blk.{{bid}}.attn_{g}.{wb}")
      for p, g in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "output")) for wb in ("weight", "bias")),
    Tensor(_LAYER + "self_attn.sinks", GGUF.ATTN_SINKS.weight),
    Tensor(_LAYER + "mlp.router.weight", GGUF.FFN_GATE_INP.weight),
    Tensor(_LAYER + "mlp.router.bias", GGUF.FFN_GATE_INP.bias),
    Split(_LAYER + "mlp.experts.gate_up_proj", ((GGUF.FFN_GATE_EXP.weight, _gate_up(0)),
                                                (GGUF.FFN_UP_EXP.weight, _gate_up(1)))),
    Split(_LAYER + "mlp.experts.gate_up_proj_bias", ((GGUF.FFN_GATE_EXP.bias, _gate_up_bias(0)),
                                                     (GGUF.FFN_UP_EXP.bias, _gate_up_bias(1)))),
    Tensor(_LAYER + "mlp.experts.down_proj", GGUF.FFN_DOWN_EXP.weight, _down),
    Tensor(_LAYER + "mlp.experts.down_proj_bias", GGUF.FFN_DOWN_EXP.bias),
)


def _layer_kinds(n: int) -> list[str]:
    """GptOssConfig's default, and the only pattern llama.cpp's gpt-oss runs: sliding on even layers."""
    return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]


def normalise(h: dict) -> dict:
    """GptOssConfig's constructor: layer kinds alternate from sliding where none are stated."""
    if h.get("num_key_value_heads") is None:
        h["num_key_value_heads"] = h["num_attention_heads"]
    if h.get("layer_types") is None:
        h["layer_types"] = _layer_kinds(h["num_hidden_layers"])
    return h


REFUSE = (
    Refuse("sliding_window", bool, "the converter writes it as the window of the sliding layers (and fails without "
           "it); llama.cpp's gpt-oss needs one"),
    Refuse("swiglu_alpha", lambda v: float(v) == _ALPHA, f"llama.cpp's gpt-oss computes its experts' clamped SwiGLU "
           f"with alpha {_ALPHA} (a constant), so this checkpoint would run wrong"),
    Refuse("swiglu_limit", lambda v: float(v) == _LIMIT, f"llama.cpp's gpt-oss computes its experts' clamped SwiGLU "
           f"with limit {_LIMIT} (a constant), so this checkpoint would run wrong"),
    Refuse("attention_bias", bool, "llama.cpp's gpt-oss requires the attention output bias (attn_output.bias), which "
           "this checkpoint does not store"),
    Refuse("tie_word_embeddings", unset, "llama.cpp's gpt-oss needs an output matrix of its own, which a tied "
           "checkpoint does not store"),
    Refuse("num_local_experts", bool, "llama.cpp's gpt-oss needs experts"),
    Refuse("rope_parameters.rope_type", ("default", "yarn"), "gpt-oss is released with yarn rope; the view presents "
           "default or yarn only", default="default"),
)


def check(h: dict, path: Path) -> None:
    if h["layer_types"] != _layer_kinds(h["num_hidden_layers"]):
        raise ConfigError(f"{path}: layer_types {h['layer_types']}: llama.cpp's gpt-oss makes the even layers "
                          f"sliding-window and the odd ones full attention (the converter writes no pattern), so "
                          f"these layers would run as other kinds")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    """TextModel's list, then the window and the expert width (GptOssModel.set_gguf_parameters)."""
    return [*text_model_parameters(h, "gpt-oss", block_count, file_type),
            u32(Keys.Attention.SLIDING_WINDOW.format(arch="gpt-oss"), h["sliding_window"]),
            u32(Keys.LLM.EXPERT_FEED_FORWARD_LENGTH.format(arch="gpt-oss"), h["intermediate_size"])]


def vocab(model_dir: Path, h: dict) -> list:
    """GptOssModel.set_vocab: byte-level BPE."""
    from hfview.tokenizer.vocab import gpt2_vocab
    return gpt2_vocab(model_dir, h)


FAMILY = Family(
    name="gpt_oss",
    gguf_arch="gpt-oss",
    architectures=("GptOssForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    # llama.cpp's gpt-oss applies the window on its sliding layers (LLAMA_SWA_TYPE_STANDARD, pattern 2:
    # src/models/openai-moe.cpp), as transformers does
    runner=RunnerFacts(llama_cpp_applies_window=True),
)
