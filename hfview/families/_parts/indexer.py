"""DeepSeek-V3.2's lightning indexer (sparse attention's key selector): its tensors, keys, checks and KV."""
from __future__ import annotations

from pathlib import Path

from ...errors import ConfigError
from ...family import Tensor
from ...names import GGUF, Keys
from ...params import u32

INDEXER_READS = frozenset({"index_topk", "index_head_dim", "index_n_heads"})


_L = "model.layers.{bid}.self_attn.indexer."


def indexer_tensors(required: bool = True) -> tuple:
    """The lightning indexer of a layer, as the converter names it (gguf's INDEXER_* tensors)."""
    return (
        Tensor(f"{_L}wq_b.weight", GGUF.INDEXER_ATTN_Q_B.weight, required=required),
        Tensor(f"{_L}wk.weight", GGUF.INDEXER_ATTN_K.weight, required=required),
        Tensor(f"{_L}k_norm.{{wb}}", GGUF.INDEXER_K_NORM.wb, required=required),
        Tensor(f"{_L}weights_proj.weight", GGUF.INDEXER_PROJ.weight, required=required),
    )


def check_indexer(h: dict, path: Path, arch: str) -> None:
    """What llama.cpp's indexer graph (and its Hadamard rotation of the indexer's keys) can run."""
    rope, width = h["qk_rope_head_dim"], h["index_head_dim"]
    if rope > width:
        raise ConfigError(f"{path}: qk_rope_head_dim {rope} is more than index_head_dim {width}: the indexer's heads "
                          f"are [rope | no rope] and llama.cpp's {arch} asserts the rope part fits")
    if width < 64 or width & (width - 1):
        raise ConfigError(f"{path}: index_head_dim {width}: llama.cpp's {arch} rotates the indexer's queries and "
                          f"keys by a Hadamard matrix of at least 64 rows, which needs a power of two >= 64 (every "
                          f"release states 128)")


def indexer_parameters(h: dict, arch: str) -> list:
    """The indexer's sizes, as DeepseekV32Model and GlmMoeDsaModel write them."""
    return [u32(Keys.Attention.Indexer.HEAD_COUNT.format(arch=arch), h["index_n_heads"]),
            u32(Keys.Attention.Indexer.KEY_LENGTH.format(arch=arch), h["index_head_dim"]),
            u32(Keys.Attention.Indexer.TOP_K.format(arch=arch), h["index_topk"])]
