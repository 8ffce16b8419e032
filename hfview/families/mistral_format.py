"""Mistral's own format -> llama.cpp `llama`, as the converter's `--mistral-format` writes it (its MistralModel).

A directory with params.json, consolidated*.safetensors and tekken.json or tokenizer.model.v3 (and no
config.json: with both, Transformers' files are read). params.json is read as it stands — no config class
fills defaults — and its keys are Mistral's own (dim, n_layers, n_heads, ...), which the converter's
hyperparameter search lists already name.

The tensors keep Meta's layout: wq/wk rows are already in the rotation-pair order llama.cpp computes with,
so the converter copies them unpermuted (MistralModel.undo_permute = False), unlike Transformers' q_proj.

model_type: this family is registered under "mistral-params", a name no Transformers config uses, so it
claims nothing from the llama family (which owns "mistral"); HfCheckpoint reaches it through
`config_file = "params.json"` when a directory has no config.json.
"""
from __future__ import annotations

from pathlib import Path

from ..config import ANY, Harmless
from ..errors import CheckpointError, ConfigError
from ..family import Family, Refuse, Tensor
from ..names import GGUF, Keys
from ..params import f32, string, text_model_parameters, u32
from ..shards import StoredTensor, read_header, select_weights

MODEL_TYPE = "mistral-params"

READS = frozenset({
    "dim", "n_layers", "head_dim", "hidden_dim", "n_heads", "n_kv_heads", "norm_eps", "rope_theta", "vocab_size",
    "max_position_embeddings", "sliding_window", "yarn",
    # read only to refuse them by name (see check)
    "llama_4_scaling", "vision_encoder",
})
# max_seq_len / max_batch_size: serving limits of Mistral's reference code; tied_embeddings: the
# checkpoint then has no output.weight and llama.cpp reuses the embeddings, as the model does.
# moe: null only (a params.json with a "moe" object is mistral_moe_format's: Family.claims)
HARMLESS: Harmless = {"max_seq_len": ANY, "max_batch_size": ANY, "tied_embeddings": ANY, "moe": (None,)}

TENSORS = (
    Tensor("tok_embeddings.weight", GGUF.TOKEN_EMBD.weight),
    Tensor("norm.weight", GGUF.OUTPUT_NORM.weight),
    Tensor(GGUF.OUTPUT.weight, GGUF.OUTPUT.weight, required=False),  # absent when tied to the embeddings
    Tensor("layers.{bid}.attention_norm.weight", GGUF.ATTN_NORM.weight),
    # Meta's layout: already rotation pairs, stored as they are
    Tensor("layers.{bid}.attention.wq.{wb}", GGUF.ATTN_Q.wb),
    Tensor("layers.{bid}.attention.wk.{wb}", GGUF.ATTN_K.wb),
    Tensor("layers.{bid}.attention.wv.{wb}", GGUF.ATTN_V.wb),
    Tensor("layers.{bid}.attention.wo.{wb}", GGUF.ATTN_OUT.wb),
    Tensor("layers.{bid}.ffn_norm.weight", GGUF.FFN_NORM.weight),
    Tensor("layers.{bid}.feed_forward.w1.{wb}", GGUF.FFN_GATE.wb),
    Tensor("layers.{bid}.feed_forward.w2.{wb}", GGUF.FFN_DOWN.wb),
    Tensor("layers.{bid}.feed_forward.w3.{wb}", GGUF.FFN_UP.wb),
)

_REQUIRED = ("dim", "n_layers", "n_heads", "n_kv_heads", "hidden_dim", "norm_eps")
_YARN_KEYS = ("factor", "beta", "alpha", "original_max_position_embeddings", "apply_scale")


def consolidated_tensors(model_dir: Path) -> dict[str, StoredTensor]:
    """Every tensor of consolidated*.safetensors, in the converter's order: files sorted by name, names
    sorted within a file."""
    names = [p.name for p in Path(model_dir).iterdir() if p.is_file()]
    files = [model_dir / n for n in select_weights(names, "mistral")]
    if not files:
        raise CheckpointError(f"{model_dir}: model directory contains no safetensors weights (Mistral's format "
                              f"keeps them in consolidated*.safetensors beside params.json)")
    tensors: dict[str, StoredTensor] = {}
    for path in files:
        for t in sorted(read_header(path), key=lambda t: t.name):
            if t.name in tensors:
                raise CheckpointError(f"tensor {t.name!r} is stored twice: in {tensors[t.name].path.name} and "
                                      f"{path.name}; remove the stale file")
            tensors[t.name] = t
    return tensors


REFUSE = (
    Refuse("llama_4_scaling", lambda v: v is None, "makes the converter write llama.cpp's mistral3 architecture, which "
           "hfview's view does not present yet; use the Transformers-format upload"),
    Refuse("vision_encoder", lambda v: v is None, "a multimodal Mistral checkpoint; hfview reads text-only models in "
           "Mistral's format"),
    Refuse("yarn", lambda v: v is None or isinstance(v, dict) and all(k in v for k in _YARN_KEYS),
           f"must be an object with {', '.join(_YARN_KEYS)}"),
)


def check(h: dict, path: Path) -> None:
    missing = [k for k in _REQUIRED if k not in h]
    if missing:
        raise ConfigError(f"{path}: {', '.join(missing)} missing; Mistral's params.json states them all")
    # code, not a Refuse: the message works out the head width from dim and n_heads
    if h.get("head_dim") is None:
        raise ConfigError(f"{path}: no head_dim; the converter fails on such a params.json (it looks for "
                          f"hidden_size, a Transformers key); add \"head_dim\": {h['dim'] // h['n_heads']} if the "
                          f"heads are dim / n_heads wide")


def parameters(h: dict, block_count: int, file_type: int) -> list:
    kv = [*text_model_parameters(h, "llama", block_count, file_type),
          u32(Keys.Rope.DIMENSION_COUNT.format(arch="llama"), h["head_dim"])]
    if (yarn := h.get("yarn")) is not None:
        kv += [string(Keys.Rope.SCALING_TYPE.format(arch="llama"), "yarn"),
               f32(Keys.Rope.SCALING_FACTOR.format(arch="llama"), yarn["factor"]),
               f32(Keys.Rope.SCALING_YARN_BETA_FAST.format(arch="llama"), yarn["beta"]),
               f32(Keys.Rope.SCALING_YARN_BETA_SLOW.format(arch="llama"), yarn["alpha"]),
               # as the converter maps it: 0 when params.json's apply_scale is set, else 1
               f32(Keys.Rope.SCALING_YARN_LOG_MUL.format(arch="llama"), 0.0 if yarn["apply_scale"] else 1.0),
               u32(Keys.Rope.SCALING_ORIG_CTX_LEN.format(arch="llama"), yarn["original_max_position_embeddings"])]
    return kv


def vocab(model_dir: Path, h: dict) -> list:
    from hfview.tokenizer.mistral import mistral_vocab

    # the vocabulary size is the tokenizer file's own: bounded by the embedding rows (HfCheckpoint has
    # checked the headers already; reading them again costs little)
    embedding = consolidated_tensors(Path(model_dir)).get("tok_embeddings.weight")
    return mistral_vocab(model_dir, "llama", n_vocab=embedding.shape[0] if embedding and embedding.shape else 0)


FAMILY = Family(
    name="mistral_format",
    gguf_arch="llama",
    architectures=(),
    defaults={MODEL_TYPE: {}},  # params.json is read as it stands: no config class, no defaults
    reads=READS,
    harmless=HARMLESS,
    tensors=TENSORS,
    parameters=parameters,
    vocab=vocab,
    refuse=REFUSE,
    check=check,
    config_file="params.json",
    index=consolidated_tensors,
    notes={"sliding_window": "the converter ignores it and llama.cpp's llama architecture attends to the whole "
                             "context: the runner caps the context at sliding_window so the computation stays "
                             "the same"},
)
