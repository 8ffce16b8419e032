"""VaultGemma (VaultGemmaForCausalLM, model_type vaultgemma) -> llama.cpp `gemma`, under hfview's own mapping: the
pinned converter has no class for it, so the byte oracle is its GemmaModel over the same weights renamed as Gemma's.

transformers 5.24's modeling_vaultgemma.py computes Gemma 2's block without its post-attention and post-feedforward
norms: the embeddings times sqrt(hidden_size); per layer x + o_proj(attn((1 + w) * rmsnorm(x))) and then
x + down(gelu_tanh(gate(h)) * up(h)) with h = (1 + w) * rmsnorm(x) (pre_feedforward_layernorm); rotate-half rotary
over the whole head; scores times query_pre_attn_scalar^-0.5, capped by attn_logit_softcapping when it is set,
sliding-window masked on "sliding_attention" layers; a final (1 + w) RMSNorm, the tied head, and
final_logit_softcapping when it is set. llama.cpp's gemma graph computes exactly that block when neither cap is
set, every layer attends over the whole context and query_pre_attn_scalar is the head width: the view presents
it there, the norms stored as 1 + w as the converter stores Gemma's.

What no llama.cpp architecture computes is refused by name: attention-logit softcapping (only gemma2's graph and
grok's cap the scores, and both add an RMSNorm after attention and after the MLP, which VaultGemma does not have;
an RMSNorm is not the identity for any weight), final-logit softcapping (gemma2, gemma3, gemma4 and grok cap the
logits, all with those post norms), and sliding-window layers whose window is shorter than the context (gemma has
no window; the windowed Gemma graphs again carry the post norms).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF
from ._parts.gemma_common import NORM, check_gemma_common, gemma_parameters
from .gemma import vocab

# transformers 5.24's VaultGemmaConfig defaults, as data (tests/test_family_vaultgemma.py compares them).
DEFAULTS = {
    "vaultgemma": dict(
        vocab_size=256000, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
        num_key_value_heads=4, head_dim=256, hidden_activation="gelu_pytorch_tanh", max_position_embeddings=8192,
        initializer_range=0.02, rms_norm_eps=1e-06, use_cache=True, pad_token_id=0, eos_token_id=1, bos_token_id=2,
        tie_word_embeddings=True, rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
        attention_bias=False, attention_dropout=0.0, query_pre_attn_scalar=256, sliding_window=4096,
        final_logit_softcapping=30.0, attn_logit_softcapping=50.0),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "hidden_activation",
    "tie_word_embeddings", "attention_bias", "rope_parameters", "rope_scaling", "rope_theta",
    "query_pre_attn_scalar", "sliding_window", "layer_types", "final_logit_softcapping", "attn_logit_softcapping",
})
# VaultGemmaConfig has no hidden_act: a Gemma-2-style config carrying it computes with hidden_activation only.
HARMLESS: Harmless = {"hidden_act": ANY}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight, steps=NORM),
    Skip("lm_head.weight"),  # tied: llama.cpp's gemma reads the output through the embeddings
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.pre_feedforward_layernorm.weight", GGUF.FFN_NORM.weight, steps=NORM),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
)

_POST_NORMS = ("an RMSNorm after attention and after the MLP, which VaultGemma does not have (an RMSNorm is not "
               "the identity for any weight)")


def normalise(h: dict) -> dict:
    """VaultGemmaConfig's constructor: no layer_types means sliding and full layers alternating, sliding first."""
    if h.get("layer_types") is None:
        h["layer_types"] = ["sliding_attention" if (i + 1) % 2 else "full_attention"
                            for i in range(h["num_hidden_layers"])]
    return h


REFUSE = (
    Refuse("attn_logit_softcapping", lambda v: v is None, f"llama.cpp's gemma caps no attention scores, and the "
           f"graphs that do (gemma2, grok) add {_POST_NORMS}"),
    Refuse("final_logit_softcapping", lambda v: v is None, f"llama.cpp's gemma caps no logits, and the graphs that "
           f"do (gemma2, gemma3, gemma4, grok) add {_POST_NORMS}"),
    Refuse("layer_types", lambda v: set(v) <= {"full_attention", "sliding_attention"}, "VaultGemma's layers are "
           "full_attention or sliding_attention"),
)


def check(h: dict, path: Path) -> None:
    check_gemma_common(h, path, "gemma", "hidden_activation")
    if h["query_pre_attn_scalar"] != h["head_dim"]:
        raise ConfigError(f"{path}: query_pre_attn_scalar {h['query_pre_attn_scalar']} is not head_dim "
                          f"{h['head_dim']}: llama.cpp's gemma scales the scores by 1/sqrt(head width) only")
    types = h["layer_types"]
    if len(types) != h["num_hidden_layers"]:
        raise ConfigError(f"{path}: layer_types has {len(types)} entries for {h['num_hidden_layers']} layers")
    window = h.get("sliding_window")
    if "sliding_attention" in types and (window is not None and window < h["max_position_embeddings"]):
        raise ConfigError(f"{path}: layer_types has sliding_attention layers with sliding_window {window} below "
                          f"max_position_embeddings {h['max_position_embeddings']}: llama.cpp's gemma attends over "
                          f"the whole context, and the windowed Gemma graphs (gemma2, gemma3) add {_POST_NORMS}")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    return gemma_parameters("gemma", h, block_count, file_type)


FAMILY = Family(
    name="vaultgemma",
    gguf_arch="gemma",
    architectures=("VaultGemmaForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    normalise=normalise,
    no_converter="the pinned converter has no class for VaultGemmaForCausalLM; hfview's own mapping presents it as "
                 "llama.cpp's gemma (Gemma's block: VaultGemma is Gemma 2 without its post norms, uncapped, full "
                 "attention)",
    notes={"embedding scale": "sqrt(hidden_size) is applied by llama.cpp's gemma graph; nothing is written",
           "pre_feedforward_layernorm": "the norm before the MLP, llama.cpp's ffn_norm (stored as 1 + w)"},
)
