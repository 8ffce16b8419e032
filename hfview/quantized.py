"""Quantized checkpoints: the forms hfview reads as the pinned converter reads them (conversion/base.py
prepare_tensors, _generate_nvfp4_tensors and dequant_model, conversion/gpt_oss.py, conversion/mistral.py), decided
from the config files alone, and a refusal naming every other form before any weight is read or downloaded
(docs/quantization.md)."""
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
    producer = data.get("producer") if isinstance(data, dict) and isinstance(data.get("producer"), dict) else {}
    method = str(producer.get("name") or "").lower()  # the converter takes the producer as the method
    return {"quant_method": method, **quant} if isinstance(quant, dict) else {"quant_method": method}


@dataclass(frozen=True)
class ScaledForm:
    """Weights stored quantized (FP8) beside a float scale, read as the converter's dequant_model computes them
    (`dequant_simple`: weight.float() x scale, the scale repeated over `block` and trimmed, or broadcast from its
    leading axes): one form for quant_method "fp8" (`<weight>_scale_inv`, Mistral's `qscale_weight`), ModelOpt's FP8
    and compressed-tensors' float-quantized (`<weight>_scale`).
    `scales`: (scale name suffix, what replaces it to name the weight); `dropped`: suffixes of the tensors it
    removes unread (activation and KV scales); `orphan_scales_dropped`: a scale with no weight beside it is
    removed (ModelOpt) rather than a missing shard (the others, where the converter fails on it)."""
    method: str
    block: tuple[int, ...] | None
    scales: tuple[tuple[str, str], ...]
    dropped: tuple[str, ...] = ()
    orphan_scales_dropped: bool = False
    unread: tuple[str, ...] = ()  # tensors the converter leaves and fails to map (refused as it fails)
    # which dequantized weights the converter's --fp8-as-q8 writes as Q8_0 (its _fp8_dequantized): "all" of them,
    # those "stored" as FP8 (ModelOpt), or "none" (compressed-tensors' int8)
    fp8_original: str = "all"


Fp8Form = ScaledForm  # (the name it had while fp8 was the only scaled form)

# quant_method "fp8": `<weight>_scale_inv`, and in Mistral's own format `<module>.qscale_weight` (its params.json
# `quantization` read as fp8 by MistralModel.dequant_model); activation scales unused
_FP8_SCALES = (("_scale_inv", ""), (".qscale_weight", ".weight"))
_FP8_DROPPED = (".activation_scale", "_activation_scale", ".qscale_act")
# ModelOpt and compressed-tensors: `<weight>_scale`; ModelOpt's activation and KV-cache scales unused
_WEIGHT_SCALE = ((".weight_scale", ".weight"),)
_MODELOPT_DROPPED = (".input_scale", ".k_scale", ".v_scale")
# ModelOpt's FP8 algorithms whose weight_scale the converter's dequant_simple broadcasts: one per tensor (FP8) or one
# per output row (FP8_PER_CHANNEL_PER_TOKEN, 1-D); FP8_PB_WO's 2-D block scales it cannot broadcast (refused)
_MODELOPT_FP8 = ("FP8", "FP8_PER_CHANNEL_PER_TOKEN")


@dataclass(frozen=True)
class Mxfp4Form:
    """The converter's quant_method "mxfp4" as it reads it, for gpt-oss only (GptOssModel): each layer's experts
    stored as `<proj>_blocks` / `<proj>_scales` and repacked, bits only, into ggml's MXFP4; the file's type
    MOSTLY_MXFP4_MOE at f32/f16/bf16."""


@dataclass(frozen=True)
class GptqForm:
    """The converter's quant_method "gptq" (dequant_gptq): `bits` 2, 4 or 8; the stored zeros are one below the
    true ones (`zero_offset` 1) unless checkpoint_format says otherwise (gptq_v2)."""
    bits: int
    zero_offset: int


@dataclass(frozen=True)
class PackedForm:
    """compressed-tensors' pack-quantized as the converter's dequant_packed reads it: int codes of `bits` packed in
    int32 words, a scale per `group_size` inputs, a packed zero point or the symmetric offset."""
    bits: int
    group_size: int


@dataclass(frozen=True)
class Nvfp4Form:
    """NVFP4 as the converter's prepare_tensors reads it (ModelOpt's NVFP4 / W4A16_NVFP4 / MIXED_PRECISION with
    NVFP4 layers, or compressed-tensors' nvfp4-pack-quantized): each NVFP4 weight repacked, bits only, into ggml's
    NVFP4 and written first, with its per-tensor scales as F32 `.scale` / `.input_scale` tensors; the file type
    MOSTLY_NVFP4 at f32/f16/bf16. `method` names the tensors (ModelOpt's, or compressed-tensors' renamed and their
    global scales inverted); `fp8`: the ModelOpt FP8 layers of a mixed checkpoint, dequantized as dequant_model
    does; `global_algo` and `layer_algo` (module path -> quant_algo) decide which weights the `prec_a4` KV marks
    (W4A16_NVFP4: 16-bit activations)."""
    method: str
    global_algo: str | None
    layer_algo: tuple[tuple[str, str | None], ...] = ()
    fp8: ScaledForm | None = None
    where: Path | None = None

    def algo_of(self, name: str) -> str | None:
        """The quant_algo of weight `name` as _tag_prec_a4 finds it: its closest enclosing module in
        quantized_layers, else the checkpoint's."""
        layers = dict(self.layer_algo)
        module = name.removesuffix(".weight").removesuffix(".bias")
        while module:
            if module in layers:
                return layers[module]
            module = module.rpartition(".")[0]
        return self.global_algo

    @staticmethod
    def n_experts(config: dict[str, Any]) -> int:
        """The expert count the converter stacks NVFP4 experts by (find_hparam num_local_experts / num_experts)."""
        key = next((k for k in ("num_local_experts", "num_experts") if k in config), None)
        return int(config[key] or 0) if key else 0


def nvfp4_stored(stored: dict, form: Nvfp4Form, n_experts: int) -> dict:
    """The tensors the converter's prepare_tensors leaves for NVFP4: each NVFP4 weight one views.NVFP4Pair in its
    place (Gemma 4's router per-expert scales folded into its experts', nvfp4_router_folded); then, where a
    weight_scale is left (ModelOpt's FP8 layers of a mixed checkpoint), dequant_model's ModelOpt FP8
    dequantization. compressed-tensors leaves such a scale unread, and the converter fails on it."""
    from .errors import CheckpointError
    from .views import nvfp4_paired, nvfp4_router_folded, scale_dequantized

    out = nvfp4_router_folded(nvfp4_paired(stored, inverted=form.method == "compressed-tensors"), n_experts)
    left = [n for n in out if n.endswith((".weight_scale", ".weight_scale_inv"))]
    if not left:  # dequant_model returns at once: "all quantized tensors were already handled"
        return out
    if form.fp8 is None:
        raise CheckpointError(f"{out[left[0]].path.name}: {left[0]!r} is a scale beside no NVFP4 weight in a "
                              f"compressed-tensors NVFP4 checkpoint; the pinned converter leaves it unread and fails on "
                              f"it (\"Can not map tensor {left[0]!r}\")")
    f = form.fp8
    return scale_dequantized(out, f.scales, f.block, f.dropped, f.orphan_scales_dropped, f.unread)


def _nvfp4(config: dict[str, Any], config_path: Path) -> Nvfp4Form | None:
    """The converter's NVFP4 detection (prepare_tensors, over _prepared_quantization's reading): NVFP4 where
    quant_algo is NVFP4 or W4A16_NVFP4, a quantized_layers entry's algorithm ends in NVFP4, or compressed-tensors
    states nvfp4-pack-quantized (for every group of a mixed-precision one)."""
    stated = _prepared_quantization(config, config_path)
    algo, method, fmt, where = stated.algo, stated.method, stated.fmt, stated.where
    groups, layers = stated.groups, stated.layers
    compressed = method == "compressed-tensors" and (fmt == "nvfp4-pack-quantized" or fmt == "mixed-precision" and (
        bool(groups) and all(g.get("format") == "nvfp4-pack-quantized" for g in groups.values() if isinstance(g, dict))))
    per_layer = any(str(v.get("quant_algo")).endswith("NVFP4") for v in layers.values() if isinstance(v, dict))
    if not (algo in ("NVFP4", "W4A16_NVFP4") or compressed or per_layer):
        return None
    if method not in ("modelopt", "compressed-tensors"):
        _refuse_other(config, config_path, also=(
            f" with NVFP4 layers under quant_method {shown(method)}; hfview reads NVFP4 stated by ModelOpt or by "
            f"compressed-tensors' nvfp4-pack-quantized"))
    # the module paths as the converter's filter_tensors names them ("language_model." dropped)
    layer_algo = tuple((str(k).replace("language_model.", ""), v.get("quant_algo"))
                       for k, v in layers.items() if isinstance(v, dict))
    fp8 = ScaledForm("modelopt", None, _WEIGHT_SCALE, _MODELOPT_DROPPED, orphan_scales_dropped=True,
                     fp8_original="stored") if method == "modelopt" else None
    return Nvfp4Form(method, algo, layer_algo, fp8, where)


# the architectures whose MXFP4 the pinned converter reads (GptOssModel skips dequant_model and repacks the experts);
# for any other its dequant_model raises NotImplementedError("Quant method is not yet supported: 'mxfp4'")
_MXFP4_ARCHITECTURES = ("GptOssForCausalLM",)


def _block(block: Any, config_path: Path, key: str) -> tuple[int, ...] | None:
    if block is not None and not (isinstance(block, list) and block
                                  and all(isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
        raise QuantizedCheckpoint(f"{config_path}: quantization_config {key} {shown(block)} is not a list of "
                                  f"positive integers (e.g. [128, 128])")
    return tuple(block) if block is not None else None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


@dataclass(frozen=True)
class _Prepared:
    """The quantization the converter's prepare_tensors finds: config.json's quantization_config, completed from
    hf_quant_config.json where it states no quant_algo or no quantized_layers (the record's producer naming the
    method where config.json names none). `where`: the file that stated it."""
    method: Any
    algo: Any
    fmt: Any
    groups: dict
    layers: dict
    where: Path


def _prepared_quantization(config: dict[str, Any], config_path: Path) -> _Prepared:
    quant = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else {}
    algo, method, fmt = quant.get("quant_algo"), quant.get("quant_method"), quant.get("format")
    groups, layers = quant.get("config_groups") or {}, quant.get("quantized_layers") or {}
    record, where = Path(config_path).parent / "hf_quant_config.json", Path(config_path)
    if (not algo or not layers) and record.is_file():
        data = _read_json(record)
        data = data if isinstance(data, dict) else {}
        q = data.get("quantization") if isinstance(data.get("quantization"), dict) else {}
        producer = data.get("producer") if isinstance(data.get("producer"), dict) else {}
        if method is None:
            method = str(producer.get("name") or "").lower()
        algo, method, fmt = q.get("quant_algo", algo), q.get("quant_method", method), q.get("format", fmt)
        groups, layers = q.get("config_groups", groups) or {}, q.get("quantized_layers", layers) or {}
        where = record
    return _Prepared(method, algo, fmt, groups if isinstance(groups, dict) else {},
                     layers if isinstance(layers, dict) else {}, where)


# Measured (tests/test_family_bitnet.py): what the pinned converter does with BitNet's packed weights
_BITNET_PACKED = (
    " with its weights packed (quantization_mode offline: four ternary codes a byte beside weight_scale): the pinned "
    "converter fails on them in its default lazy mode (dequant_bitnet: \"Tensor on device cpu is not on the expected "
    "device meta\"), and with --no-lazy its weight_quant ternarizes the unpacked weights again, which scales each "
    "projection by its fraction of nonzero codes, so llama.cpp on that file computes another model (NMSE 0.12 from "
    "transformers, top-1 agreement 0.25); use the release's unpacked (bf16, quantization_mode online) checkpoint")


def _deepseek_v4_other_experts(config: dict[str, Any], config_path: Path) -> str:
    """Why a DeepSeek-V4 quantization other than DeepSeek's own is refused. NVIDIA's NVFP4 export (ModelOpt
    MIXED_PRECISION, each layer's routed experts NVFP4 under DeepSeek's names, measured on a fixture of that form in
    tests/test_family_deepseek_v4.py): the converter's NVFP4 path stacks only experts named gate/up/down_proj and
    maps the others one by one, and the DeepSeek names have no GGUF name, so it stops."""
    prepared = _prepared_quantization(config, config_path)
    if any(isinstance(v, dict) and str(v.get("quant_algo")).endswith("NVFP4") for v in prepared.layers.values()):
        return (f" with quant_algo {shown(prepared.algo)} and NVFP4 routed experts (ModelOpt's per-layer "
                "quant_algo): the pinned converter's DeepseekV4Model reads routed experts only as DeepSeek's MXFP4 "
                "pairs, and its NVFP4 path cannot name DeepSeek's expert tensors (measured: \"Can not map tensor "
                "'layers.0.ffn.experts.0.w1.weight'\"); use DeepSeek's own release (MXFP4 experts)")
    return f" with expert_dtype {shown(config.get('expert_dtype'))}"


def quantized_form(config: dict[str, Any], config_path: Path
                   ) -> ScaledForm | Mxfp4Form | GptqForm | PackedForm | Nvfp4Form | None:
    """The quantized form hfview reads, as the pinned converter reads it (conversion/base.py prepare_tensors and
    dequant_model), or None for an unquantized checkpoint; every other quantization is refused by name:
    quant_method "fp8" (block-scaled, per tensor or per row; Mistral's params.json `quantization` fp8_e4m3),
    gpt-oss's "mxfp4", ModelOpt's FP8 (config.json or hf_quant_config.json), compressed-tensors'
    float-quantized FP8 (channel or block), "gptq" of 2, 4 or 8 bits (config.json's quantization_config), and NVFP4
    (ModelOpt's, compressed-tensors' nvfp4-pack-quantized), detected as its prepare_tensors detects it."""
    # the converter's TextModel merges text_config over the top level before it reads quantization_config, so one
    # stated inside text_config (Kimi-K2.5's) is the one it reads
    merged = merge_text_config(config)
    quant = merged.get("quantization_config")
    quant = quant if isinstance(quant, dict) else None
    method = quant.get("quant_method") if quant else None
    if method == "mxfp4":
        architectures = config.get("architectures") or []
        arch = architectures[0] if isinstance(architectures, list) and architectures else None
        if arch in _MXFP4_ARCHITECTURES:
            return Mxfp4Form()
        _refuse_other(config, config_path, also=(
            f" for {shown(arch)}: the pinned converter reads MXFP4 only for gpt-oss (GptOssForCausalLM, its experts "
            f"repacked) and refuses it for any other architecture (\"Quant method is not yet supported: 'mxfp4'\")"))
    if method == "compressed-tensors" and quant.get("format") == "mxfp4-pack-quantized" and \
            merged.get("model_type") == "kimi_k3":
        # Kimi-K3's release (mxfp4-pack-quantized routed experts): KimiK3Model skips dequant_model and repacks the
        # experts itself, and so does the kimi_k3 family's index
        return None
    if method == "fp8" and config.get("expert_dtype") is not None:
        # DeepSeek-V4's releases (FP8 linears, MXFP4 experts): DeepseekV4Model reads them with its own dequant_model
        # and expert repacking, whatever quantization_config says, and so does the deepseek_v4 family's index
        # (NVIDIA's NVFP4 export states the same keys beside a quant_algo and NVFP4 config_groups: still refused)
        if ((config.get("architectures") or [None])[0] == "DeepseekV4ForCausalLM" and config["expert_dtype"] == "fp4"
                and not quant.get("quant_algo") and not quant.get("config_groups")):
            return None
        _refuse_other(config, config_path, also=_deepseek_v4_other_experts(merged, config_path))
    if method == "fp8":
        return ScaledForm("fp8", _block(quant.get("weight_block_size"), config_path, "weight_block_size"),
                          _FP8_SCALES, _FP8_DROPPED)
    if quant is None and isinstance(config.get("quantization"), dict):  # Mistral's own format (params.json)
        mistral = config["quantization"]
        if mistral.get("qformat_weight") == "fp8_e4m3":  # MistralModel.dequant_model: fp8, no block
            return ScaledForm("fp8", None, _FP8_SCALES, _FP8_DROPPED)
        if "qformat_weight" not in mistral and {"bits", "group_size"} <= mistral.keys():
            # mlx-lm's affine quantization in a config.json: the converter reads no `quantization` there and meets the
            # packed uint32 weights' scales and biases unread (measured in tests/test_converter_refusals.py)
            _refuse_other(config, config_path, also=(
                " (mlx-lm's packed uint32 weights with per-group scales and biases: the pinned converter reads no "
                "`quantization` from a config.json and fails on them, for a Llama layout with \"Can not map tensor "
                "'model.embed_tokens.biases'\")"))
        _refuse_other(config, config_path, also=(
            " (the pinned converter asserts qformat_weight == \"fp8_e4m3\", the one Mistral quantization it reads)"))
    nvfp4 = _nvfp4(merged, config_path) if method in (None, "modelopt", "compressed-tensors") else None
    if nvfp4 is not None:
        return nvfp4
    if method == "compressed-tensors":
        return _compressed_tensors(config, quant, config_path)
    if method == "bitnet":
        if quant.get("use_rms_norm"):
            _refuse_other(config, config_path, also=" with use_rms_norm (transformers' BitLinear then normalises each "
                          "projection's input, which the converter does not write)")
        if quant.get("quantization_mode", "offline") != "online":
            _refuse_other(config, config_path, also=_BITNET_PACKED)
        return None  # "online": the weights are stored unpacked, ternarized on read as every BitNet checkpoint's
    if method == "gptq":
        bits = quant.get("bits")
        if bits in (2, 4, 8) and not isinstance(bits, bool):
            return GptqForm(bits, 1 if quant.get("checkpoint_format", "gptq") == "gptq" else 0)
        _refuse_other(config, config_path, also=(
            " (the pinned converter dequantizes GPTQ of 2, 4 or 8 bits"
            + (": \"3-bit gptq dequantization is not yet implemented\")" if bits == 3 else ")")))
    modelopt = _prepared_quantization(merged, config_path) if method in (None, "modelopt") else None
    if modelopt is not None and modelopt.method == "modelopt":
        per_layer = sorted({str(v.get("quant_algo")) for v in modelopt.layers.values() if isinstance(v, dict)})
        if modelopt.algo in _MODELOPT_FP8 and not per_layer:
            return ScaledForm("modelopt", None, _WEIGHT_SCALE, _MODELOPT_DROPPED, orphan_scales_dropped=True,
                              fp8_original="stored")
        _refuse_other(config, config_path, also=(
            f" with quant_algo {shown(modelopt.algo)}"
            + (f" and per-layer quant_algo {', '.join(per_layer)}" if per_layer else "")
            + "; of ModelOpt's forms hfview reads FP8 and FP8_PER_CHANNEL_PER_TOKEN (a weight_scale per tensor or per "
            "row), as the converter dequantizes them"))
    record = Path(config_path).parent / "hf_quant_config.json"
    if quant is None and record.is_file() and not _modelopt_record(record)["quant_method"]:
        # (measured: the converter on a ModelOpt FP8 fixture whose record names no producer, as Nemotron-3 Super's)
        _refuse_other(config, config_path, also=(
            " and names no producer: the pinned converter takes the producer's name as the quant method, so it "
            "reads the method '' and fails before writing anything (\"Quant method is not yet supported: ''\"); "
            "a record naming producer modelopt would be read as ModelOpt's"))
    _refuse_other(config, config_path)
    return None


# the 8-bit weight types each scaled compressed-tensors format is read with: naive-quantized (llm-compressor's earlier
# name, used for FP8 and int8 alike) is dequantized by the converter as the other two, whatever the type
_EIGHT_BIT = {"float-quantized": ("float",), "int-quantized": ("int",), "naive-quantized": ("float", "int")}


def _compressed_tensors(config: dict[str, Any], quant: dict[str, Any], config_path: Path) -> ScaledForm | PackedForm:
    """compressed-tensors as dequant_model reads it: one config group, format float-quantized (8-bit float weights),
    int-quantized (8-bit int) or naive-quantized (either), a channel or block scale (`<weight>_scale`, blocks of
    block_structure); the rest refused by name."""
    fmt, groups = quant.get("format"), quant.get("config_groups")
    weights = None
    if isinstance(groups, dict) and len(groups) == 1 and isinstance(next(iter(groups.values())), dict):
        weights = next(iter(groups.values())).get("weights")
    why = None
    if not isinstance(groups, dict) or len(groups) != 1:
        why = (f"{len(groups) if isinstance(groups, dict) else 'no'} config groups (the converter: \"Can't handle "
               f"multiple config groups for compressed-tensors yet\")")
    elif fmt == "pack-quantized":
        if not isinstance(weights, dict) or weights.get("strategy") != "group" or weights.get(
                "type", "int") != "int":
            why = (f"format 'pack-quantized' with weight strategy {shown((weights or {}).get('strategy'))} (the "
                   f"converter reads int weights in groups)")
        elif not all(isinstance(weights.get(k), int) and not isinstance(weights.get(k), bool)
                     and weights.get(k) > 0 for k in ("num_bits", "group_size")) or weights["num_bits"] > 8:
            why = (f"format 'pack-quantized' with num_bits {shown(weights.get('num_bits'))} and group_size "
                   f"{shown(weights.get('group_size'))}")
        else:
            return PackedForm(weights["num_bits"], weights["group_size"])
    elif fmt not in ("float-quantized", "int-quantized", "naive-quantized"):
        why = f"format {shown(fmt)}"
    elif not isinstance(weights, dict) or weights.get("num_bits") != 8 or weights.get("type") not in _EIGHT_BIT[fmt]:
        why = f"format {shown(fmt)} with weights other than 8-bit {' or '.join(_EIGHT_BIT[fmt])}"
    elif weights.get("strategy") not in ("channel", "block") or weights.get("group_size") is not None:
        why = f"weight strategy {shown(weights.get('strategy'))} (the converter reads channel and block scales)"
    if why is not None:
        _refuse_other(config, config_path, also=(
            f" with {why}; of compressed-tensors' forms hfview reads 8-bit float-quantized (FP8) and int-quantized "
            "(int8) weights with channel or block scales, and pack-quantized int weights in groups"))
    # static activation scales, zero points and KV-cache scales: its dequant_model reads only weight_scale, then
    # cannot map them
    return ScaledForm("compressed-tensors", _block(weights.get("block_structure"), config_path, "block_structure"),
                      _WEIGHT_SCALE, unread=(".input_scale", "_zero_point", ".k_scale", ".v_scale"),
                      fp8_original="all" if fmt == "float-quantized" else "none")


def refuse_quantized(config: dict[str, Any], config_path: Path) -> None:
    """Refuse any quantized checkpoint hfview does not read (quantized_form): a quantization_config (top level or
    text_config), Mistral's params.json `quantization`, a ModelOpt hf_quant_config.json or a GPTQ
    quantize_config.json beside the config, each unless it states a form the view reads."""
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
    gptq = config_path.parent / "quantize_config.json"
    if not quant and gptq.is_file():  # AutoGPTQ / GPTQModel's record, beside a config.json that states none
        data = _read_json(gptq)
        quant = {"quant_method": "gptq", **data} if isinstance(data, dict) else {"quant_method": "gptq"}
        source, where = "quantization", gptq
        also += (" (the pinned converter reads quantization only from config.json, so it would meet the packed "
                 "qweight / qzeros / scales / g_idx tensors unread and fail: \"Can not map tensor\")")
    if not quant:
        return
    if not isinstance(quant, dict):
        quant = {}
    stated = [f'{key} "{quant[key]}"' for key in ("quant_method", "quantization_method", "qformat_weight")
              if quant.get(key)]
    method_part = stated[0] if stated else "no quant_method stated"
    raise QuantizedCheckpoint(
        f"quantized checkpoints are unsupported: {where} declares {source} ({_quant_scheme(quant)}, "
        f"{method_part}){also}; of quantized forms hfview reads the converter's FP8 (quant_method \"fp8\", "
        "ModelOpt's FP8, compressed-tensors' float-quantized), GPTQ of 2, 4 or 8 bits stated in config.json, gpt-oss's "
        "MXFP4 (quant_method \"mxfp4\") and NVFP4 (ModelOpt's, compressed-tensors' nvfp4-pack-quantized). Use a BF16 "
        "export of this model (the unquantized BF16/F16 upload of the same checkpoint) instead")
