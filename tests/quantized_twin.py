"""The dequantized twin of a scaled-FP8 checkpoint: the same model with each quantized weight dequantized by torch
as its release's own recipe states it (the scale repeated over its block and trimmed at the edge, or broadcast from
its leading axes, times the stored value, in float32), saved in float32 with no quantization stated. transformers
runs it where it cannot load the quantized form itself on the CPU (ModelOpt's FP8, compressed-tensors without its
package, FP8 widths that are not whole blocks); llama.cpp's logits from the view are compared with it."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

# (scale suffix, what replaces it to name the weight), as each form names its scales
_SCALES = (("_scale_inv", ""), (".weight_scale", ".weight"))
# scales no forward over the dequantized weights reads (activation and KV-cache scales)
_UNUSED = (".input_scale", ".k_scale", ".v_scale", ".activation_scale", "_activation_scale")


def _block(config: dict) -> list[int] | None:
    quant = config.get("quantization_config") or {}
    if quant.get("weight_block_size"):
        return quant["weight_block_size"]
    for group in (quant.get("config_groups") or {}).values():
        return (group.get("weights") or {}).get("block_structure")
    return None


def dequantized(weight, scale, block):
    """weight.float() x scale: the scale repeated over `block` on the last axes and trimmed, else broadcast."""
    scale = scale.float()
    if block:
        for axis, size in enumerate(block, start=scale.ndim - len(block)):
            scale = scale.repeat_interleave(size, axis)
        scale = scale[tuple(slice(0, n) for n in weight.shape)]
    while scale.ndim < weight.ndim:
        scale = scale.unsqueeze(-1)
    return weight.float() * scale


def gptq_dequantized(qweight, qzeros, scales, g_idx, bits, checkpoint_format):
    """GPTQ's weight [out, in] from its packed tensors, as AutoGPTQ's own dequantization states it: codes and zeros
    unpacked from int32 words (lowest bits first), zeros stored one below the true ones in checkpoint_format gptq,
    weight = scale x (code - zero) of each input's group (g_idx)."""
    import torch

    shifts = torch.arange(0, 32, bits, dtype=torch.int64)
    mask = (1 << bits) - 1
    codes = (qweight.to(torch.int64).unsqueeze(1) >> shifts.view(1, -1, 1)) & mask      # [in / pack, pack, out]
    codes = codes.reshape(-1, qweight.shape[1])                                           # [in, out]
    zeros = (qzeros.to(torch.int64).unsqueeze(2) >> shifts.view(1, 1, -1)) & mask       # [groups, out / pack, pack]
    zeros = zeros.reshape(qzeros.shape[0], -1) + (1 if checkpoint_format == "gptq" else 0)
    g = g_idx.to(torch.int64)
    return (scales.float()[g] * (codes - zeros[g]).float()).T.contiguous()


def packed_dequantized(packed, scale, zero_point, shape, bits, group_size):
    """compressed-tensors pack-quantized's weight [out, in], as its own decompressor states it: codes unpacked along
    the inputs (lowest bits first), minus the zero point (unpacked along the outputs) or 2^(bits - 1), times the
    scale of each group."""
    import torch

    out_f, in_f = (int(v) for v in shape.tolist())
    pack = 32 // bits
    shifts = torch.arange(0, pack * bits, bits, dtype=torch.int64)
    mask = (1 << bits) - 1
    codes = ((packed.to(torch.int64).unsqueeze(-1) >> shifts) & mask).reshape(out_f, -1)[:, :in_f]
    if zero_point is None:
        zeros = torch.full((out_f, in_f // group_size), 1 << (bits - 1), dtype=torch.int64)
    else:
        zeros = ((zero_point.to(torch.int64).unsqueeze(1) >> shifts.view(1, -1, 1)) & mask)
        zeros = zeros.reshape(-1, zero_point.shape[1])[:out_f]
    codes = codes.reshape(out_f, -1, group_size) - zeros.unsqueeze(-1)
    return (codes.float() * scale.float().unsqueeze(-1)).reshape(out_f, in_f).contiguous()


def dequantized_twin(src: Path, dst: Path) -> Path:
    """Write the float32 dequantized twin of checkpoint `src` (one model.safetensors) into `dst`."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    src, dst = Path(src), Path(dst)
    tmp = dst.with_name(dst.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    (tmp / "hf_quant_config.json").unlink(missing_ok=True)
    config = json.loads((tmp / "config.json").read_text())
    block = _block(config)
    quant = config.pop("quantization_config", None) or {}
    with safe_open(str(src / "model.safetensors"), "pt") as f:
        tensors = {n: f.get_tensor(n) for n in f.keys()}
    out = {}
    gptq = quant.get("quant_method") == "gptq"
    for name, t in tensors.items():
        if gptq and name.endswith((".qweight", ".qzeros", ".scales", ".g_idx")):
            if name.endswith(".qweight"):
                base = name.removesuffix(".qweight")
                out[base + ".weight"] = gptq_dequantized(*(tensors[base + p] for p in (".qweight", ".qzeros",
                                                                                      ".scales", ".g_idx")),
                                                         quant["bits"], quant.get("checkpoint_format", "gptq"))
            continue
        if name.endswith((".weight_packed", ".weight_shape", ".weight_zero_point")) or (
                name.endswith(".weight_scale") and name.removesuffix("_scale") + "_packed" in tensors):
            if name.endswith(".weight_packed"):
                base = name.removesuffix("_packed")
                weights = next(iter(quant["config_groups"].values()))["weights"]
                out[base] = packed_dequantized(t, tensors[base + "_scale"], tensors.get(base + "_zero_point"),
                                               tensors[base + "_shape"], weights["num_bits"], weights["group_size"])
            continue
        if name.endswith(_UNUSED) or any(name.endswith(s) for s, _ in _SCALES):
            continue
        scale = next((tensors[name.removesuffix(w) + s] for s, w in _SCALES
                      if name.endswith(w) and name.removesuffix(w) + s in tensors), None)
        out[name] = (t.float() if scale is None else dequantized(t, scale, block)).contiguous()
    save_file(out, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    config.pop("dtype", None)
    config["torch_dtype"] = "float32"
    (tmp / "config.json").write_text(json.dumps(config))
    tmp.rename(dst)
    return dst
