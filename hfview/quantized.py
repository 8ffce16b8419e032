"""Quantized checkpoints: the forms hfview reads as the converter reads them (conversion/base.py
dequant_model), and a refusal naming every other form before any weight is read or downloaded."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import merge_text_config
from .errors import QuantizedCheckpoint, shown


_QUANT_METHODS = {
    "fp8": "FP8", "fbgemm_fp8": "FP8 (FBGEMM)", "mxfp4": "MXFP4", "gptq": "GPTQ", "awq": "AWQ",
    "bitsandbytes": "bitsandbytes", "modelopt": "ModelOpt", "compressed-tensors": "compressed-tensors",
    "hqq": "HQQ", "aqlm": "AQLM", "eetq": "EETQ", "quanto": "Quanto", "torchao": "torchao",
    "bitnet": "BitNet", "higgs": "HIGGS", "vptq": "VPTQ", "spqr": "SpQR", "fp_quant": "FP-Quant",
    "auto-round": "AutoRound", "gptqmodel": "GPTQ", "exl2": "EXL2", "exl3": "EXL3",
}


def _quant_scheme(quant: dict[str, Any]) -> str:
    """A short name for a quantization config: its method, and the number format where stated."""
    method = str(quant.get("quant_method") or quant.get("quantization_method") or "").lower()
    label = _QUANT_METHODS.get(method, method)
    details = " ".join(str(quant.get(k, "")) for k in ("quant_algo", "format", "weight_dtype", "qformat_weight"))
    details = details.lower()
    for marker, scheme in (("nvfp4", "NVFP4"), ("mxfp4", "MXFP4"), ("fp8", "FP8"), ("float-quantized", "FP8")):
        if marker in details and scheme not in label:
            label = f"{scheme} ({label})" if label else scheme
            break
    bits = quant.get("bits") or quant.get("w_bit")
    if quant.get("load_in_4bit"):
        bits = 4
    elif quant.get("load_in_8bit"):
        bits = 8
    if isinstance(bits, int) and label:
        label += f" {bits}-bit"
    return label or "method not named"


def _modelopt_record(path: Path) -> dict[str, Any]:
    """The `quantization` of NVIDIA ModelOpt's hf_quant_config.json (its config.json may state none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        data = None
    quant = data.get("quantization") if isinstance(data, dict) else None
    return {"quant_method": "modelopt", **quant} if isinstance(quant, dict) else {"quant_method": "modelopt"}


@dataclass(frozen=True)
class Fp8Form:
    """The converter's quant_method "fp8" (conversion/base.py dequant_model): weights with a float scale
    `<weight>_scale_inv`, over blocks of `block` (weight_block_size) or, with none, per tensor or per row."""
    block: tuple[int, ...] | None


@dataclass(frozen=True)
class Mxfp4Form:
    """The converter's quant_method "mxfp4" as it reads it, for gpt-oss only (GptOssModel): each layer's experts
    stored as `<proj>_blocks` / `<proj>_scales` and repacked, bits only, into ggml's MXFP4; the file's type
    MOSTLY_MXFP4_MOE at f32/f16/bf16."""


# the architectures whose MXFP4 the pinned converter reads (GptOssModel skips dequant_model and repacks the experts);
# for any other its dequant_model raises NotImplementedError("Quant method is not yet supported: 'mxfp4'")
_MXFP4_ARCHITECTURES = ("GptOssForCausalLM",)


def quantized_form(config: dict[str, Any], config_path: Path) -> Fp8Form | Mxfp4Form | None:
    """The quantized form hfview reads (the converter's fp8: config.json's own quantization_config with
    quant_method "fp8"; gpt-oss's mxfp4), or None for an unquantized checkpoint; every other quantization is
    refused by name."""
    quant = config.get("quantization_config")
    if isinstance(quant, dict) and quant.get("quant_method") == "mxfp4":
        architectures = config.get("architectures") or []
        arch = architectures[0] if isinstance(architectures, list) and architectures else None
        if arch in _MXFP4_ARCHITECTURES:
            return Mxfp4Form()
        _refuse_other(config, config_path, also=(
            f" for {shown(arch)}: the pinned converter reads MXFP4 only for gpt-oss (GptOssForCausalLM, its experts "
            f"repacked) and refuses it for any other architecture (\"Quant method is not yet supported: 'mxfp4'\")"))
    if isinstance(quant, dict) and quant.get("quant_method") == "fp8" and config.get("expert_dtype") is not None:
        # DeepSeek-V4's releases: FP8 linears, but experts in another form (fp4), which hfview does not read
        _refuse_other(config, config_path, also=f" with expert_dtype {shown(config['expert_dtype'])}")
    if isinstance(quant, dict) and quant.get("quant_method") == "fp8":
        block = quant.get("weight_block_size")
        if block is not None and not (isinstance(block, list) and block
                                      and all(isinstance(b, int) and not isinstance(b, bool) and b > 0
                                              for b in block)):
            raise QuantizedCheckpoint(f"{config_path}: quantization_config weight_block_size {shown(block)} is "
                                      f"not a list of positive integers (e.g. [128, 128])")
        return Fp8Form(tuple(block) if block is not None else None)
    _refuse_other(config, config_path)
    return None


def refuse_quantized(config: dict[str, Any], config_path: Path) -> None:
    """Refuse any quantized checkpoint hfview does not read: a quantization_config (top level or text_config)
    other than the converter's fp8 form (quantized_form), Mistral's params.json `quantization`, or a ModelOpt
    hf_quant_config.json beside the config."""
    quantized_form(config, config_path)


def _refuse_other(config: dict[str, Any], config_path: Path, also: str = "") -> None:
    config_path = Path(config_path)
    merged = merge_text_config(config)
    quant = merged.get("quantization_config") or config.get("quantization_config")
    source = "quantization_config"
    if not quant and merged.get("compression_config"):
        quant, source = merged["compression_config"], "compression_config"
    if not quant and isinstance(config.get("quantization"), dict):  # Mistral's params.json
        quant, source = config["quantization"], "quantization"
    where = config_path
    record = config_path.parent / "hf_quant_config.json"
    if not quant and record.is_file():
        quant, source, where = _modelopt_record(record), "quantization", record
    if not quant:
        return
    if not isinstance(quant, dict):
        quant = {}
    stated = [f'{key} "{quant[key]}"' for key in ("quant_method", "quantization_method", "qformat_weight")
              if quant.get(key)]
    method_part = stated[0] if stated else "no quant_method stated"
    raise QuantizedCheckpoint(
        f"quantized checkpoints are unsupported: {where} declares {source} ({_quant_scheme(quant)}, "
        f"{method_part}){also}; of quantized forms hfview reads the converter's block-scaled or per-tensor FP8 "
        "(quant_method \"fp8\") and gpt-oss's MXFP4 (quant_method \"mxfp4\"). Use a BF16 export of this model (the unquantized BF16/F16 upload of the same "
        "checkpoint) instead")
