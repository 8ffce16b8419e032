"""InternLM3 (InternLM3ForCausalLM, remote code) -> llama.cpp `llama` (the converter's InternLM3Model).

transformers 5.24 has no InternLM3 class, so the converter reads config.json as written (no defaults) and
so does the view. The decoder is Llama's (Q/K regrouped into rotation pairs; optional q/k/v/o biases
with qkv_bias / bias, which llama.cpp's llama reads when present). SentencePiece vocabulary, whose EOS is
<|im_end|> when tokenizer_config.json declares it special.
"""
from __future__ import annotations

from pathlib import Path

from ..family import Family, Refuse, Skip, stated
from ..names import Keys
from ._parts.checks import silu_only
from ._parts.decoder import LM_HEAD, decoder_tensors, llama_parameters

READS = frozenset({
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_parameters",
    "rope_scaling", "rope_theta", "hidden_act", "tie_word_embeddings", "qkv_bias", "bias",
})
ARCHITECTURES = ("InternLM3ForCausalLM",)
# rope_pairs reads the KV head count under this key: the config's, else the head count (as the converter's
# permute does when num_key_value_heads is absent), without adding num_key_value_heads to what is written.
_ROPE_KV = "_rope_kv_heads"


def _tensors() -> tuple:
    from ..family import Tensor, rope_pairs
    base = decoder_tensors("model.", pairs=True)
    # the converter's InternLM3 permutes K with the KV head count found by hparams.get, not find_hparam
    fixed = tuple(Tensor(t.hf, t.gguf, rope_pairs(_ROPE_KV), t.steps, t.required) if ".k_proj." in t.hf else t
                  for t in base)
    return (*fixed, LM_HEAD, Skip("model.layers.{bid}.self_attn.rotary_emb.inv_freq"))


TENSORS = _tensors()
_ROPE_TYPES = ("default", "linear", "yarn", "dynamic")


def normalise(h: dict) -> dict:
    h[_ROPE_KV] = h.get("num_key_value_heads") or h["num_attention_heads"]
    return h


REFUSE = (
    silu_only("llama"),
    # a stated null refused too: the KV computes with these values
    *(Refuse(key, stated, f"{key} is missing; InternLM3's config has no defaults the view could use")
      for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")),
    # "dynamic" (InternLM3-8B's NTK scaling) changes nothing within max_position_embeddings, and the
    # converter writes no scaling for it: llama.cpp computes the same there
    Refuse("rope_parameters.rope_type", _ROPE_TYPES, "not one llama.cpp's llama computes", default="default"),
)


def vocab(model_dir: Path, h: dict) -> list:
    """InternLM3Model.set_vocab: SentencePiece pieces, tokenizer_config's add_prefix_space, then the special
    ids, EOS taken from a special <|im_end|>."""
    from hfview.tokenizer.special import SpecialVocab, read_json
    from hfview.tokenizer.vocab import _write_scored_vocab, sentencepiece_tokens
    from hfview.tokenizer.writer import KVWriter

    model_dir = Path(model_dir)
    tokens, scores, types = sentencepiece_tokens(model_dir, h)
    w = KVWriter()
    _write_scored_vocab(w, tokens, scores, types)
    special = SpecialVocab(model_dir, n_vocab=len(tokens))
    cfg_path = model_dir / "tokenizer_config.json"
    if cfg_path.is_file():
        cfg = read_json(cfg_path)
        if "add_prefix_space" in cfg:
            w.add_bool(Keys.Tokenizer.ADD_PREFIX, cfg["add_prefix_space"])
        for tid, data in cfg.get("added_tokens_decoder", {}).items():
            if data.get("special") and data["content"] == "<|im_end|>" and "eos" in special.special_token_ids:
                special.special_token_ids["eos"] = int(tid)
    special.write(w)
    return w.kvs()


parameters = llama_parameters("llama")


FAMILY = Family(
    name="internlm3",
    gguf_arch="llama",
    architectures=ARCHITECTURES,
    defaults={"internlm3": {}},
    reads=READS,
    harmless={},
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    normalise=normalise,
)
