"""Hunyuan dense (HunYuanDenseV1ForCausalLM) -> llama.cpp `hunyuan-dense` (the converter's HunYuanModel).

Hunyuan's rope is labelled "dynamic" but, with `alpha`, is a fixed NTK-scaled base: theta x alpha^(d/(d-2)).
The converter writes that base, scaling type none (factor 1) and a 256k context for the dynamic label. q/k
norms; Q/K as stored (llama.cpp's hunyuan-dense rotates halves, as Hunyuan does).
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import ConfigError
from ..family import Family, Refuse, Skip, Tensor
from ..names import GGUF, Keys
from ..params import f32, string, text_model_parameters, u32

# transformers 5.24's HunYuanDenseV1Config defaults, as data.
DEFAULTS = {
    "hunyuan_v1_dense": dict(vocab_size=290943, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                             num_attention_heads=32, num_key_value_heads=32, hidden_act="silu",
                             max_position_embeddings=2048, initializer_range=0.02, rms_norm_eps=1e-05,
                             use_cache=True, pad_token_id=0, bos_token_id=1, eos_token_id=2, eod_token_id=3,
                             pretraining_tp=1, tie_word_embeddings=False,
                             rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},
                             attention_bias=False, attention_dropout=0.0, head_dim=None),
}

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "attention_bias", "eod_token_id",
    "use_qk_norm", "use_cla", "use_rotary_pos_emb", "norm_type", "mlp_bias", "attention_head_dim",
})
# org_vocab_size: the tokenizer's size before padding
HARMLESS: Harmless = {"org_vocab_size": ANY}

TENSORS = (
    Tensor("model.embed_tokens.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("model.norm.weight", GGUF.OUTPUT_NORM.weight),
    # a tied model may still store lm_head: the converter drops it then (llama.cpp reuses token_embd)
    Skip("lm_head.weight", when=lambda h: bool(h.get("tie_word_embeddings"))),
    Tensor("lm_head.weight", GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("model.layers.{bid}.input_layernorm.weight", GGUF.ATTN_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.q_proj.weight", GGUF.ATTN_Q.weight),
    Tensor("model.layers.{bid}.self_attn.k_proj.weight", GGUF.ATTN_K.weight),
    Tensor("model.layers.{bid}.self_attn.v_proj.weight", GGUF.ATTN_V.weight),
    Tensor("model.layers.{bid}.self_attn.o_proj.weight", GGUF.ATTN_OUT.weight),
    Tensor("model.layers.{bid}.self_attn.query_layernorm.weight", GGUF.ATTN_Q_NORM.weight),
    Tensor("model.layers.{bid}.self_attn.key_layernorm.weight", GGUF.ATTN_K_NORM.weight),
    Tensor("model.layers.{bid}.post_attention_layernorm.weight", GGUF.FFN_NORM.weight),
    Tensor("model.layers.{bid}.mlp.gate_proj.weight", GGUF.FFN_GATE.weight),
    Tensor("model.layers.{bid}.mlp.up_proj.weight", GGUF.FFN_UP.weight),
    Tensor("model.layers.{bid}.mlp.down_proj.weight", GGUF.FFN_DOWN.weight),
    Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"),
)

_NTK_TYPES = ("dynamic", "xdrope")


REFUSE = (
    Refuse("hidden_act", ("silu",), "llama.cpp's hunyuan-dense computes SiLU only", default="silu"),
    *(Refuse(key, (wanted,), f"llama.cpp's hunyuan-dense computes {key} = {wanted!r} only", default=wanted)
      for key, wanted in (("use_qk_norm", True), ("use_cla", False), ("use_rotary_pos_emb", True),
                          ("attention_bias", False), ("mlp_bias", False), ("norm_type", "rms"))),
    Refuse("rope_parameters.rope_type", ("default", "linear", "yarn", *_NTK_TYPES), "not one hfview reads for Hunyuan",
           default="default"),
)


def check(h: dict, path: Path) -> None:
    rope = h["rope_parameters"]
    if rope.get("rope_type") in _NTK_TYPES:
        if h.get("head_dim") is None:
            raise ConfigError(f"{path}: head_dim is missing: the converter sizes Hunyuan's NTK rope base from it")
        if rope["rope_type"] == "dynamic" and not (rope.get("rope_theta", 10000.0) == 10000.0 and
                                                   h["max_position_embeddings"] in (32 * 1024, 256 * 1024)):
            raise ConfigError(f"{path}: dynamic rope with rope_theta {rope.get('rope_theta')} and "
                              f"max_position_embeddings {h['max_position_embeddings']}: the converter assumes "
                              f"theta 10000 and 32k or 256k positions (it refuses this config too)")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    arch = "hunyuan-dense"
    kv = text_model_parameters({k: v for k, v in h.items() if k != "num_experts"}, arch, block_count, file_type)
    rope = h["rope_parameters"]
    if rope.get("rope_type") in _NTK_TYPES:
        alpha, dim = rope.get("alpha", 50), h["head_dim"]
        kv += [f32(Keys.Rope.FREQ_BASE.format(arch=arch),
                   rope.get("rope_theta", 10000.0) * (alpha ** (dim / (dim - 2)))),
               string(Keys.Rope.SCALING_TYPE.format(arch=arch), "none"),
               f32(Keys.Rope.SCALING_FACTOR.format(arch=arch), 1)]
        if rope["rope_type"] == "dynamic":  # the converter's stated usable context for alpha 1000
            kv += [u32(Keys.Rope.SCALING_ORIG_CTX_LEN.format(arch=arch), 256 * 1024),
                   u32(Keys.LLM.CONTEXT_LENGTH.format(arch=arch), 256 * 1024)]
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    """HunYuanModel.set_vocab (tokenizer.json route): the BPE vocab, eos replaced by eod_token_id, the first of
    generation_config.json's end-of-sequence ids as end-of-turn."""
    from hfview.tokenizer.special import SpecialVocab, read_json
    from hfview.tokenizer.vocab import bpe_tokens
    from hfview.tokenizer.writer import KVWriter

    model_dir = Path(model_dir)
    if not (model_dir / "tokenizer.json").is_file():
        raise ConfigError(f"{model_dir / 'tokenizer.json'} is missing: hfview reads Hunyuan's tokenizer.json only "
                          f"(the converter's tiktoken route needs the model's remote tokenizer code)")
    tokens, types, pre = bpe_tokens(model_dir, h)
    w = KVWriter()
    w.add_string(Keys.Tokenizer.MODEL, "gpt2")
    w.add_string(Keys.Tokenizer.PRE, pre)
    w.add_array(Keys.Tokenizer.LIST, tokens)
    w.add_array(Keys.Tokenizer.TOKEN_TYPE, types)
    pad = h.get("pad_token_id")
    types_ = ("bos", "eos", "unk", "sep", "cls", "mask") if (pad or 0) < 0 else None
    SpecialVocab(model_dir, load_merges=True, special_token_types=types_).write(w)
    if h.get("eod_token_id") is not None:
        w.add_uint32(Keys.Tokenizer.EOS_ID, h["eod_token_id"])
    gen = model_dir / "generation_config.json"
    if gen.is_file():
        eos = read_json(gen).get("eos_token_id")
        if isinstance(eos, list) and len(eos) >= 2:
            w.add_uint32(Keys.Tokenizer.EOT_ID, eos[0])
    return w.kvs()


FAMILY = Family(
    name="hunyuan_v1_dense",
    gguf_arch="hunyuan-dense",
    architectures=("HunYuanDenseV1ForCausalLM",),
    defaults=DEFAULTS,
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
)
