"""Next-token-prediction (MTP) layers written as blocks after the trunk: GLM-4.5's nextn tensors (stored in the
layers past num_hidden_layers) and Qwen3-Next's mtp.* tensors, which the converter renames into those blocks."""
from __future__ import annotations

import re

from ...errors import CheckpointError, ConfigError
from ...family import Tensor, converter_name
from ...names import GGUF
from ...views import OFFSET_ONE

_L = "model.layers.{bid}."


_OPTIONAL = False  # biases and q/k norms as the config says, nextn tensors in the MTP layers only


# the MTP layers' own tensors (GGUF's NEXTN_* names), in the layers after num_hidden_layers only
NEXTN_TENSORS = (
    Tensor(f"{_L}eh_proj.weight", GGUF.NEXTN_EH_PROJ.weight, required=_OPTIONAL),
    Tensor(f"{_L}embed_tokens.weight", GGUF.NEXTN_EMBED_TOKENS.weight, required=_OPTIONAL),
    Tensor(f"{_L}enorm.weight", GGUF.NEXTN_ENORM.weight, required=_OPTIONAL),
    Tensor(f"{_L}hnorm.weight", GGUF.NEXTN_HNORM.weight, required=_OPTIONAL),
    Tensor(f"{_L}shared_head.head.weight", GGUF.NEXTN_SHARED_HEAD_HEAD.weight, required=_OPTIONAL),
    Tensor(f"{_L}shared_head.norm.weight", GGUF.NEXTN_SHARED_HEAD_NORM.weight, required=_OPTIONAL),
)


def mtp_layers(h: dict) -> int:
    """The converter's extra blocks: the next-token-prediction layers (it writes them unless --no-mtp)."""
    return h.get("num_nextn_predict_layers") or 0


_STORED_BLOCK = re.compile(r"model\.layers\.(\d+)\.")


def in_mtp_block(name: str, h: dict) -> bool:
    """Whether a stored model.layers.{i}.* name lies after the trunk (i >= num_hidden_layers): an MTP layer stored as
    a block of its own (GLM-4.5, Step-3.5, Hy3), where a converter class renames some of its tensors."""
    m = _STORED_BLOCK.match(name)
    return m is not None and int(m.group(1)) >= h["num_hidden_layers"]


# Qwen3-Next's MTP layer (mtp.* as stored), as the converter renames it into the blocks after the trunk
# ---------------------------------------------------------------- the multi-token-prediction layers
# (shared with Qwen3.5). The converter takes them under mtp. or model.mtp.; it reads mtp.layers.{i}.* (a full-attention
# decoder layer of the family's own kind) as model.layers.{num_hidden_layers + i}.*, and the layer's own tensors
# as that first MTP block's nextn tensors; then its tensor rules apply to them as to the trunk's.
MTP_LAYERS = "mtp layers (stored)"  # the hparams entry mtp_layers adds: how many MTP blocks the converter writes


_MTP_OWN = {"fc": "eh_proj", "pre_fc_norm_embedding": "enorm", "pre_fc_norm_hidden": "hnorm",
            "norm": "shared_head.norm"}


def _mtp_parts(name: str) -> list[str] | None:
    """A stored name under mtp. or model.mtp. split as the converter splits it (None: not an MTP tensor)."""
    name = name.removeprefix("model.") if name.startswith("model.mtp.") else name
    return name.split(".", 3) if name.startswith("mtp.") else None


def _mtp_layer(parts: list[str]) -> int | None:
    return int(parts[2]) if len(parts) == 4 and parts[1] == "layers" and parts[2].isdecimal() else None


def mtp_rename(name: str, h: dict) -> str:
    """The converter's MTP renames: mtp.layers.{i}.X -> model.layers.{n + i}.X, mtp.fc / pre_fc_norm_embedding /
    pre_fc_norm_hidden / norm -> model.layers.{n}.eh_proj / enorm / hnorm / shared_head.norm (n: num_hidden_layers);
    model.mtp.* read as mtp.*; any other mtp.* name is kept (refused by name below: the converter cannot map it)."""
    parts = _mtp_parts(name)
    if parts is None:
        return name
    n = h["num_hidden_layers"]
    if (i := _mtp_layer(parts)) is not None:
        return f"model.layers.{n + i}.{parts[3]}"
    if len(parts) == 3 and parts[1] in _MTP_OWN:
        return f"model.layers.{n}.{_MTP_OWN[parts[1]]}.{parts[2]}"
    return ".".join(parts)


def stored_mtp_layers(h: dict, stored: dict) -> dict:
    """The MTP block count the converter writes without --no-mtp: mtp_num_hidden_layers where the config states one,
    else one more than the highest stored mtp.layers.{i}. A checkpoint with no mtp.* tensor (as transformers saves
    one) is presented as --no-mtp converts it: 0 (the converter without --no-mtp stops on it)."""
    names = [n for n in stored if _mtp_parts(converter_name(n)) is not None]
    if not names:
        return {**h, MTP_LAYERS: 0}
    found = [i for n in names if (i := _mtp_layer(_mtp_parts(converter_name(n)))) is not None]
    count = h.get("mtp_num_hidden_layers") or (max(found) + 1 if found else 0)
    if not count:
        raise CheckpointError(f"{stored[names[0]].path.name}: tensor {names[0]!r} is part of a multi-token-prediction "
                              f"layer, but the checkpoint stores no mtp.layers.{{i}}.* decoder tensors and the config "
                              f"states no mtp_num_hidden_layers: the converter finds no MTP layer to write and stops; "
                              f"remove the mtp.* tensors to run the trunk as --no-mtp converts it")
    if found and max(found) >= count:
        raise ConfigError(f"mtp_num_hidden_layers {count}, but the checkpoint stores MTP layer {max(found)} "
                          f"(mtp.layers.{max(found)}.*): the converter would place it past its {count} MTP blocks")
    return {**h, MTP_LAYERS: count}


def extra_mtp_blocks(h: dict) -> int:
    return h.get(MTP_LAYERS, 0)


def _mtp_unknown(sources, h):
    raise CheckpointError(f"{sources[0].path.name}: tensor {sources[0].name!r} is a multi-token-prediction tensor "
                          f"the converter does not map (it maps mtp.layers.{{i}}.*, mtp.fc, mtp.pre_fc_norm_embedding, "
                          f"mtp.pre_fc_norm_hidden and mtp.norm) and would stop on")


# the MTP layer's own tensors, as the converter names them after its renames (its (1 + w) norms as the trunk's)
MTP_TENSORS = (
    Tensor("mtp.{rest}", "mtp", _mtp_unknown, required=False),
    Tensor(_L + "eh_proj.weight", GGUF.NEXTN_EH_PROJ.weight, required=False),
    Tensor(_L + "enorm.weight", GGUF.NEXTN_ENORM.weight, steps=(OFFSET_ONE,), required=False),
    Tensor(_L + "hnorm.weight", GGUF.NEXTN_HNORM.weight, steps=(OFFSET_ONE,), required=False),
    Tensor(_L + "shared_head.norm.weight", GGUF.NEXTN_SHARED_HEAD_NORM.weight, steps=(OFFSET_ONE,),
           required=False),
)
