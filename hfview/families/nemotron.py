"""Nemotron (NemotronForCausalLM: Minitron, Nemotron-4) -> llama.cpp `nemotron` (the converter's NemotronModel).

Tensors as stored (NeoX rope) except the LayerNorm1P weights, which the converter stores as 1 + w so that
llama.cpp's plain LayerNorm computes Nemotron's (biases unchanged). The MLP is up -> squared ReLU -> down.
Hyperparameters: TextModel's, then vocab_size, the LayerNorm epsilon, partial-rotary dimensions and a rope
scaling type (none, or linear with its factor). Vocabulary: SentencePiece, with pad 0 and unk 1 forced.
"""
from __future__ import annotations

from pathlib import Path

from ..config import Harmless
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF, Keys
from ..params import f32, first, string, text_model_parameters, u32
from ..views import OFFSET_ONE

# transformers 5.24's NemotronConfig defaults (head_dim and partial_rotary_factor computed in normalise)
DEFAULTS = {
    "nemotron": dict(vocab_size=256000, hidden_size=6144, intermediate_size=24576, num_hidden_layers=32,
                     num_attention_heads=48, head_dim=None, num_key_value_heads=None, hidden_act="relu2",
                     max_position_embeddings=4096, initializer_range=0.0134, norm_eps=1e-05, use_cache=True,
                     pad_token_id=None, bos_token_id=2, eos_token_id=3, tie_word_embeddings=False,
                     attention_bias=False, attention_dropout=0.0, mlp_bias=False,
                     rope_parameters={"rope_theta": 10000.0, "rope_type": "default"}),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "head_dim",
    "num_key_value_heads", "max_position_embeddings", "norm_eps", "rope_parameters", "rope_scaling", "rope_theta",
    "partial_rotary_factor", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias",
})
HARMLESS: Harmless = {}


def _norm(hf: str, gguf: str) -> tuple[Tensor, Tensor]:
    """LayerNorm1P: weight stored as 1 + w; bias as is."""
    return (Tensor(f"{hf}.weight", f"{gguf}.weight", steps=(OFFSET_ONE,)), Tensor(f"{hf}.bias", f"{gguf}.bias"))


TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    *_norm("model.norm", "output_norm"),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    *_norm("model.layers.{bid}.input_layernorm", GGUF.ATTN_NORM),
    Tensor("model.layers.{bid}.self_attn.q_proj.{wb}", GGUF.ATTN_Q.wb),
    Tensor("model.layers.{bid}.self_attn.k_proj.{wb}", GGUF.ATTN_K.wb),
    Tensor("model.layers.{bid}.self_attn.v_proj.{wb}", GGUF.ATTN_V.wb),
    Tensor("model.layers.{bid}.self_attn.o_proj.{wb}", GGUF.ATTN_OUT.wb),
    *_norm("model.layers.{bid}.post_attention_layernorm", GGUF.FFN_NORM),
    Tensor("model.layers.{bid}.mlp.up_proj.{wb}", GGUF.FFN_UP.wb),
    Tensor("model.layers.{bid}.mlp.down_proj.{wb}", GGUF.FFN_DOWN.wb),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)


def normalise(h: dict) -> dict:
    """NemotronConfig: head_dim from hidden_size / heads; partial_rotary_factor (default 0.5) into the rope."""
    if h.get("head_dim") is None:
        h["head_dim"] = h["hidden_size"] // h["num_attention_heads"]
    h["rope_parameters"] = dict(h["rope_parameters"])
    h["rope_parameters"].setdefault("partial_rotary_factor", h.get("partial_rotary_factor", 0.5))
    return h


REFUSE = (
    Refuse("hidden_act", ("relu2",), "llama.cpp's nemotron architecture computes squared ReLU (relu2) only; this "
           "checkpoint would run wrong"),
    Refuse("rope_parameters.rope_type", ("default", "linear"), "the converter writes Nemotron's rope as unscaled or "
           "linear only; this checkpoint would run wrong", default="default"),
)


def parameters(h: dict, block_count: int, file_type: int) -> list:
    rope = h["rope_parameters"]
    kv = [*text_model_parameters(h, "nemotron", block_count, file_type),
          u32(Keys.LLM.VOCAB_SIZE.format(arch="nemotron"), h["vocab_size"]),
          f32(Keys.Attention.LAYERNORM_EPS.format(arch="nemotron"),
              first(h, ["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", "norm_eps"])),
          u32(Keys.Rope.DIMENSION_COUNT.format(arch="nemotron"),
              int(rope["partial_rotary_factor"] * h["hidden_size"]) // h["num_attention_heads"])]
    factor = h.get("factor") or rope.get("factor")
    if factor is None:
        kv.append(string(Keys.Rope.SCALING_TYPE.format(arch="nemotron"), "none"))
    else:
        kv += [string(Keys.Rope.SCALING_TYPE.format(arch="nemotron"), "linear"),
               f32(Keys.Rope.SCALING_FACTOR.format(arch="nemotron"), factor)]
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.errors import TokenizerError
    from hfview.tokenizer.vocab import sentencepiece_vocab
    if not (model_dir / "tokenizer.model").is_file():
        raise TokenizerError(f"{model_dir / 'tokenizer.model'} is missing: the converter reads Nemotron's vocabulary "
                             f"from the SentencePiece model only; copy it from the released checkpoint")
    # the converter sets pad 0 and unk 1 after SentencePiece's own special ids
    return [*sentencepiece_vocab(model_dir, h), u32(Keys.Tokenizer.PAD_ID, 0),
            u32(Keys.Tokenizer.UNK_ID, 1)]


FAMILY = Family(
    name="nemotron",
    gguf_arch="nemotron",
    architectures=("NemotronForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    normalise=normalise,
)
