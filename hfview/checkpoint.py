"""HfCheckpoint: a Hugging Face checkpoint directory presented as the GGUF the converter writes from it."""
from __future__ import annotations

import bisect
import dataclasses
import itertools
import os
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from . import config_values, families
from .config import check_keys, class_defaults, read_checkpoint_config, read_config, with_defaults
from .quantized import (GptqForm, Mxfp4Form, Nvfp4Form, PackedForm, ScaledForm,
                        nvfp4_stored, quantized_form)
from .errors import CheckpointError, ConfigError
from .family import Family, plan_tensors
from .memfile import PieceWriter
from .gguf_layout import (KEPT_ENCODED, KV, EncodedArray, FileSpan, GGMLType, Pieces, ValueType, encode_header,
                          encode_kv, encode_tensor_info, encoded_kv_pieces, pad_to)
from .shards import StoredTensor, index_shards, read_bytes_into
from .views import (FP8Dequantized, Generated, MXFP4Rows, NVFP4Rows, Presented, RowSelection, Stack, Stored,
                    gptq_dequantized, mxfp4_paired, nvfp4_first, pack_dequantized, quiet_bf16_nans, scale_dequantized)
from .vocab_cache import vocab_kv
from .names import Keys

# families whose converter class overrides tensor_force_quant without consulting its base (DbrxModel): --fp8-as-q8
# changes nothing there
_FORCE_QUANT_OWN = frozenset({"dbrx"})

# --outtype -> (the type of the tensors it converts, general.file_type)
OUTTYPES = {"f32": (GGMLType.F32, 0), "f16": (GGMLType.F16, 1), "bf16": (GGMLType.BF16, 32),
            "q8_0": (GGMLType.Q8_0, 7)}

# Tensors the converter keeps in F32 whatever the outtype (its prepare_tensors list), by GGUF base name.
_ALWAYS_F32 = frozenset({
    "ffn_gate_inp", "ffn_gate_inp_shexp", "position_embd", "token_types", "ssm_conv1d", "shortconv.conv",
    "time_mix_first", "time_mix_w1", "time_mix_w2", "time_mix_decay_w1", "time_mix_decay_w2",
    "time_mix_lerp_fused", "posnet.norm1", "posnet.norm2", "ssm_conv1d_q", "ssm_conv1d_k", "ssm_conv1d_v",
    "indexer.proj", "altup_correct_coef", "altup_predict_coef",
})

_CHUNK_BYTES = 32 << 20  # a transformed tensor is produced at most this much at a time (its f32 working rows,
                         # for a quantized one)


# what a reader of the virtual file (llama.cpp, in small stdio pieces) gets produced ahead and kept, of a tensor
# converted but not quantized (stored bits go straight into the reader's buffer): held while the model's own buffers
# fill, so it adds to the view's peak memory one for one (2 MiB: 8 MB less peak than 8 MiB on the hybrid bench, at
# the same load time; 1 MiB saves no more)
_READ_AHEAD_BYTES = 2 << 20


def _rows_per_chunk(t: Presented, read_ahead: bool = False) -> int:
    work = t.row_bytes if t.via is None else max(t.row_bytes, (t.shape[-1] if t.shape else 1) * 4)
    budget = min(_CHUNK_BYTES, _READ_AHEAD_BYTES) if read_ahead and t.via is None else _CHUNK_BYTES
    return max(1, budget // work)


# a job of the parallel fill (HfCheckpoint.fill_into) covers at most this many bytes of a tensor: small enough that
# the threads share a large tensor evenly, large enough that a job's reads are few and long
_FILL_JOB_BYTES = 16 << 20

# a computed tensor (dequantized, converted, quantized) is made this much of its output at a time: its working
# arrays (the codes, their f32 values, the rounding's) are several times its output, on every thread at once
_FILL_COMPUTE_BYTES = 2 << 20

# stored bits are read (and their bf16 NaNs looked for) this much at a time: the look reads them while they are
# still in the CPU's cache (1.07 GB on 2 threads: 0.08 s of user time instead of 0.18 s with 16 MiB reads)
_FILL_READ_BYTES = 1 << 20

# views with no state kept between calls: their row ranges can be made by several threads at once (the others keep
# a block or their norms between calls, so one thread makes all of such a tensor, front to back)
_STATELESS_VIEWS = (Stored, Stack, Generated, MXFP4Rows, NVFP4Rows)


def _fill_threads() -> int:
    """Threads filling a file: every CPU this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def _stored_spans(t: Presented, first: int, stop: int) -> list[tuple[StoredTensor, int, int]] | None:
    """(stored tensor, byte offset in its data, length) whose bytes in a row are rows [first, stop) of a stored-bits
    tensor; None where its view rearranges them."""
    rb = t.row_bytes
    if any(type(source) is not StoredTensor for source in t.view.sources):
        return None  # a stand-in computed on read (an FP8 weight dequantized): its bytes are not the shard's
    if type(t.view) is Stored:
        return [(t.view.source, first * rb, (stop - first) * rb)]
    if type(t.view) is Stack and len(t.view.parts[0].shape) == 2:
        per, spans, row = t.view.parts[0].shape[0], [], first
        while row < stop:
            part, within = divmod(row, per)
            take = min(stop - row, per - within)
            spans.append((t.view.parts[part], within * rb, take * rb))
            row += take
        return spans
    if type(t.view) is RowSelection and len(t.view.shape) > 1:
        # one part of a fused tensor (each expert's gate half): its runs of consecutive stored rows, where long
        runs = t.view.runs(first, stop)
        return None if runs is None else [(t.view.source, row * rb, n * rb) for row, n in runs]
    return None


def _write_stored(spans: list[tuple[StoredTensor, int, int]], quiet_nans: bool, buffer: np.ndarray,
                  writer: PieceWriter, at: int) -> None:
    """The stored bytes of `spans` put in the memory file from offset `at`, a buffer the CPU's cache holds at a time:
    read in, any bf16 NaN made quiet while the bytes are in the cache, put in place (one pass over the shard's
    bytes)."""
    for source, start, n in spans:
        for offset in range(start, start + n, buffer.nbytes):
            take = min(buffer.nbytes, start + n - offset)
            piece = buffer[:take]
            read_bytes_into(source, offset, memoryview(piece))
            if quiet_nans:
                quiet_bf16_nans(piece.view(np.uint16), in_place=True)
            writer.put(at, piece)
            at += take


def _bytes_view(array: np.ndarray) -> memoryview:
    """An array's bytes without copying them."""
    return memoryview(np.ascontiguousarray(array)).cast("B")


def _base_name(gguf_name: str) -> str:
    parts = gguf_name.split(".")
    if parts[0] == "blk" and len(parts) > 2 and parts[1].isdecimal():
        parts = parts[2:]
    return ".".join(parts[:-1])


def _read(source, offset: int, n: int) -> bytes:
    """n bytes of a byte source's file from `offset` (fewer only at its end), through its readinto."""
    buf = bytearray(max(0, min(n, source.size - offset)))
    source.readinto(offset, memoryview(buf))
    return bytes(buf)


def _kept_encoded(kv: KV, header: Pieces, span: tuple[int, int]) -> KV:
    """`kv`, or where its value is a long array, the same entry over its encoded bytes in the header (one left in
    a file stays there)."""
    if kv.type != ValueType.ARRAY or len(kv.value) <= KEPT_ENCODED or (
            isinstance(kv.value, EncodedArray) and isinstance(kv.value.piece, FileSpan)):
        return kv
    start = span[0] + 8 + len(kv.key.encode("utf-8")) + 4  # past the key (length, bytes) and the value type
    return KV(kv.key, kv.type, EncodedArray(header.view(start, span[1]), len(kv.value)), kv.item_type)


def _checked_load_arrays(family: Family, h: dict, kv: list[KV]) -> dict[str, list[int]]:
    """family.runner.load_arrays, held to what keeps the file's layout: each an integer array the KV has, at its length."""
    arrays = family.runner.load_arrays(h)
    written = {entry.key: entry for entry in kv}
    for key, values in arrays.items():
        entry = written.get(key)
        if entry is None or entry.type != ValueType.ARRAY or len(entry.value) != len(values) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise TypeError(f"family {family.name}: load_arrays {key!r} is not an integer array of the file's KV "
                            f"at its length")
    return arrays


class LoadTimeView:
    """A view as hfview's runner hands it to llama.cpp where the family declares load-time array values
    (RunnerFacts.load_arrays): the converter's bytes, but for those arrays' values in the header. An array of the same
    length and element type encodes to the same number of bytes, so every other byte and offset is the file's."""

    def __init__(self, ckpt: "HfCheckpoint"):
        self.ckpt = ckpt
        self._patches = [(span[0], encode_kv(KV(kv.key, kv.type, ckpt.load_arrays[kv.key], kv.item_type)))
                         for kv, span in zip(ckpt.kv, ckpt._kv_spans) if kv.key in ckpt.load_arrays]

    def __getattr__(self, name):  # everything else (size, family, hparams, load_kv, path) is the view's
        return getattr(self.ckpt, name)

    def readinto(self, offset: int, out: memoryview) -> int:
        n = self.ckpt.readinto(offset, out)
        for start, data in self._patches:
            lo, hi = max(offset, start), min(offset + n, start + len(data))
            if lo < hi:
                out[lo - offset:hi - offset] = data[lo - start:hi - start]
        return n

    def read(self, offset: int, n: int) -> bytes:
        return _read(self, offset, n)

    def fill_into(self, out: memoryview, *, threads: int | None = None,
                  on_bytes: Callable[[int], None] | None = None, fd: int | None = None,
                  on_header: Callable[[], None] | None = None) -> None:
        """HfCheckpoint.fill_into, with these arrays' values in the header (put there before `on_header`)."""
        def patched() -> None:
            for start, data in self._patches:
                out[start:start + len(data)] = data
            if on_header is not None:
                on_header()

        self.ckpt.fill_into(out, threads=threads, on_bytes=on_bytes, fd=fd, on_header=patched)

    def __repr__(self) -> str:
        return f"{self.ckpt!r} with {', '.join(self.ckpt.load_arrays)} as llama.cpp must read them"


def _checked_load_kv(family: Family):
    """family.runner.load_kv, held to what llama_model_kv_override can carry: keys under 128 bytes, scalar values."""
    def load_kv(h: dict) -> dict[str, bool | int | float | str]:
        kv = family.runner.load_kv(h)
        for key, value in kv.items():
            if len(key.encode()) >= 128 or not isinstance(value, (bool, int, float, str)) or (
                    isinstance(value, str) and len(value.encode()) >= 128):
                raise TypeError(f"family {family.name}: load_kv {key!r}={value!r} is not a llama.cpp KV override "
                                f"(key and string value under 128 bytes; bool, int, float or str)")
        return kv
    return load_kv


def override_kv_flags(kv: dict[str, bool | int | float | str]) -> list[str]:
    """The same overrides as llama-cli / llama-server arguments: --override-kv KEY=TYPE:VALUE."""
    def typed(v):
        if isinstance(v, bool):
            return f"bool:{str(v).lower()}"
        return f"int:{v}" if isinstance(v, int) else f"float:{v!r}" if isinstance(v, float) else f"str:{v}"
    return [f"--override-kv {key}={typed(value)}" for key, value in kv.items()]


def _read_config(path: Path) -> tuple[dict, Path]:
    """config.json; in a directory without one, the config file a family of its own format reads
    (Mistral's params.json), tagged with that family's model_type: the first family claiming its content where
    several read that file (Family.claims), else the first without a claim."""
    if not (path / "config.json").is_file():
        for family in families.own_format_families():
            own = path / family.config_file
            if own.is_file():
                config = read_config(own)
                if family.claims is None or family.claims(config):
                    return {**config, "model_type": family.model_types[0]}, own
    return read_checkpoint_config(path)


def _closest_types(model_type) -> str:
    """The "did you mean …?" suffix for an unsupported model type: the full list is over a hundred names."""
    import difflib
    if not isinstance(model_type, str):
        return ""
    near = difflib.get_close_matches(model_type, families.supported_model_types(), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(near)}?)" if near else ""


class HfCheckpoint:
    """A checkpoint directory read in place as its converted GGUF.

    Opening reads config.json, the tokenizer files and each shard's header; tensor bytes are read only when
    asked for (`read_tensor`, `read`, `readinto`). `outtype` is the converter's --outtype: f32, f16, bf16 or
    auto (the first matrix's dtype when bf16 or f16, else f16). `vocab_apart`: a vocabulary not yet in hfview's
    cache is built in a child process (hfview.vocab_cache), so that a process that goes on to load the model never
    holds what its parse leaves behind; a caller that holds no model (export, inspect) builds it itself and runs no
    second process.
    """

    def __init__(self, path: str | Path, outtype: str = "auto", *, model_name: str | None = None,
                 quant: str | None = None, imatrix=None, vocab_apart: bool = True, fp8_as_q8: bool = False):
        self.path = Path(path)
        self._vocab_apart = vocab_apart
        if not self.path.is_dir():
            raise CheckpointError(f"{self.path}: not a checkpoint directory")
        config, config_path = _read_config(self.path)
        form = quantized_form(config, config_path)  # every other quantized form is refused here
        family = families.family_for(config.get("model_type"), config.get("architectures"))
        if family is None:
            why = families.NOT_PRESENTED.get(config.get("model_type"))
            if config.get("model_type") in families.NOT_COMPUTABLE:
                raise ConfigError(f"model architecture {config.get('model_type')!r} ({config_path}) cannot be "
                                  f"presented as a GGUF: {families.NOT_COMPUTABLE[config['model_type']]}")
            if why:
                raise ConfigError(f"model architecture {config.get('model_type')!r} ({config_path}) cannot be "
                                  f"presented as a GGUF: {why}; `hfview generate` runs it with transformers")
            raise ConfigError(f"model architecture {config.get('model_type')!r} ({config_path}) is unsupported by "
                              f"hfview's view{_closest_types(config.get('model_type'))}; "
                              f"`hfview families` lists the {len(families.supported_model_types())} model types it reads")
        # Mistral's params.json states its quantization beside the model's keys: read above as the form it is
        mistral_quantized = form is not None and Path(config_path).name == "params.json"
        keyed = {k: v for k, v in config.items() if k != "quantization"} if mistral_quantized else config
        check_keys(keyed, config_path, family.name, family.reads, family.harmless,
                   class_defaults(family, config))
        self.family: Family = family
        self.config = config
        defaults = family.defaults[config["model_type"]]
        # values are checked before anything computes with them, counts against the stored tensors before
        # normalise builds per-layer lists from them
        config_values.check_values(family.name, defaults, config, config_path)
        hparams = with_defaults(family.canonical(config), defaults)
        config_values.check_shapes(hparams, config_path,
                                    family.extra_blocks(hparams) if family.layer_lists_over_extra_blocks else 0)
        try:
            self._stored: dict[str, StoredTensor] = (family.index or index_shards)(self.path)
        except CheckpointError:
            # no shards to bound the counts by: the config is still checked first (its refusal says what to
            # fix), its layer counts held to what any model has, then the shards' error stands
            config_values.check_against_tensors(config, None, config_path)
            family.validate(family.normalise(hparams), config_path)
            raise
        # the converter guesses --outtype auto from the tensors as stored, scales and packed blocks among them
        self._as_stored = self._stored
        if isinstance(form, ScaledForm):  # each FP8 weight read dequantized in its place, its scale consumed
            self._stored = scale_dequantized(self._stored, form.scales, form.block, form.dropped,
                                             form.orphan_scales_dropped, form.unread)
        elif isinstance(form, GptqForm):  # each packed linear read dequantized, after every other tensor
            self._stored = gptq_dequantized(self._stored, form.bits, form.zero_offset)
        elif isinstance(form, PackedForm):  # each packed linear read dequantized, after every other tensor
            self._stored = pack_dequantized(self._stored, form.bits, form.group_size)
        elif isinstance(form, Mxfp4Form):  # each MXFP4 pair one weight, first, its bits repacked on read
            self._stored = mxfp4_paired(self._stored)
        elif isinstance(form, Nvfp4Form):  # each NVFP4 weight one pair in its place (first, repacked on read)
            self._stored = nvfp4_stored(self._stored, form, form.n_experts(config))
        config_values.check_against_tensors(config, [t.shape for t in self._stored.values()], config_path)
        self.hparams = family.normalise(hparams)
        family.validate(self.hparams, config_path)
        self.hparams = family.stored_hparams(self.hparams, self._stored)
        self.load_kv: dict[str, bool | int | float | str] = _checked_load_kv(family)(self.hparams)
        self.block_count = config_values.layer_count(self.hparams)
        if self.block_count is None:
            raise ConfigError(f"{config_path}: no layer count ({' / '.join(config_values.LAYER_COUNTS)}); "
                              f"the converter needs one")
        self.block_count += family.extra_blocks(self.hparams)

        # (auto's guess passes over f32 matrices: the same over the dequantized weights as over the FP8 ones)
        self.outtype = self._resolve_outtype(outtype)
        out_type, self.file_type = OUTTYPES[self.outtype]
        if isinstance(form, Mxfp4Form) and out_type != GGMLType.Q8_0:
            self.file_type = 38  # MOSTLY_MXFP4_MOE: the converter's prepare_metadata over f32, f16 and bf16
        if isinstance(form, Nvfp4Form) and out_type != GGMLType.Q8_0:
            self.file_type = 39  # MOSTLY_NVFP4, likewise
        self._out_type = out_type
        self.tensors: list[Presented] = [
            # blocks already in a ggml type (MXFP4) are that type whatever the outtype
            # (F32 is type 0: a packed type is tested against None)
            dataclasses.replace(t, ggml_type=t.view.packed_type)
            if getattr(t.view, "packed_type", None) is not None else t
            for t in plan_tensors(family, self._stored, self.hparams, self.block_count, self._type_for)]
        self._prec_a4: list[str] = []  # tensors the converter marks for 16-bit activations (W4A16_NVFP4)
        if isinstance(form, Nvfp4Form):
            self.tensors, self._prec_a4 = nvfp4_first(self.tensors, self._stored, form.n_experts(config),
                                                      family.nvfp4_qk_pairs(self.hparams), form.algo_of,
                                                      family.nvfp4_unmapped)
        if fp8_as_q8:
            self.tensors = self._fp8_as_q8(form)
        self._by_name = {t.name: t for t in self.tensors}
        if (embedding := self._by_name.get("token_embd.weight")) is not None:  # before the tokenizer pads to it
            rows = embedding.shape[0] if embedding.shape else 0
            config_values.check_vocab(config, rows, embedding.view.sources[0].name, config_path)
        self.kv: list[KV] = self._build_kv(model_name)
        self.quant = None
        if quant is not None:
            self._requantize(quant.upper(), config_path, imatrix)
        elif imatrix is not None:
            raise ConfigError("an importance matrix (--imatrix) applies only with --quant")
        self._layout()
        self.load_arrays = _checked_load_arrays(family, self.hparams, self.kv)
        self.kv = [_kept_encoded(kv, self._header, span) for kv, span in zip(self.kv, self._kv_spans)]
        from hfview.tokenizer.special import forget_parsed  # (here: tokenizer imports hfview)

        forget_parsed()  # the header is built: what it was built from is not held while the tensors are read

    # ------------------------------------------------------------ what the converter decides
    def _resolve_outtype(self, outtype: str) -> str:
        if outtype in OUTTYPES:
            return outtype
        if outtype != "auto":
            raise ValueError(f"outtype {outtype!r}: use one of {', '.join(OUTTYPES)}, auto")
        # the converter's guess: the first matrix stored as bf16 or f16 (a matrix of another dtype, f32 or FP8 and
        # its scales, is passed over), else f16
        for name, t in self._as_stored.items():
            if len(t.shape) >= 2 and t.dtype in ("BF16", "F16"):
                return t.dtype.lower()
        return "f16"

    def _type_for(self, gguf_name: str, shape: tuple[int, ...]) -> GGMLType:
        if len(shape) <= 1 or gguf_name.endswith("_norm.weight"):
            return GGMLType.F32
        if not self.family.matrices_at_outtype and not self.family.f32_list_missed(gguf_name, self.hparams) and (
                _base_name(gguf_name) in _ALWAYS_F32 or gguf_name[-7:] not in (".weight", ".lora_a", ".lora_b")):
            return GGMLType.F32
        if self.family.kept_f32(gguf_name, self.hparams):
            return GGMLType.F32
        if self._out_type == GGMLType.Q8_0 and shape[-1] % 32:
            return GGMLType.F16  # the converter's fallback where a row is not whole Q8_0 blocks
        return self._out_type

    def _fp8_as_q8(self, form) -> list[Presented]:
        """The converter's --fp8-as-q8 (tensor_force_quant): each matrix made from weights its dequant_model
        dequantized from FP8 written as Q8_0 (F16 where a row is not whole blocks of 32, its QuantError fallback),
        whatever the outtype; norms and 1-D tensors stay F32. The file type stays the outtype's (MOSTLY_NVFP4 for
        ModelOpt NVFP4, whose mixed checkpoints' FP8 layers dequant_model dequantizes, and marks, as ModelOpt FP8's)."""
        if isinstance(form, Nvfp4Form) and form.fp8 is not None:
            form = form.fp8
        if not isinstance(form, ScaledForm):
            raise ConfigError(f"{self.path}: --fp8-as-q8 applies to FP8 checkpoints; this one is "
                              f"{'not quantized' if form is None else type(form).__name__.removesuffix('Form')}")
        if self.family.name in _FORCE_QUANT_OWN:  # its converter class decides every type itself
            return self.tensors

        def original(src) -> bool:
            if not isinstance(src, FP8Dequantized):
                return False
            return form.fp8_original == "all" or (form.fp8_original == "stored" and src.weight.dtype.startswith("F8_"))
        out = []
        for t in self.tensors:
            if (t.view.sources and all(original(src) for src in t.view.sources) and len(t.shape) >= 2
                    and not t.name.endswith("_norm.weight")):
                t = dataclasses.replace(t, ggml_type=GGMLType.F16 if t.shape[-1] % 32 else GGMLType.Q8_0)
            out.append(t)
        return out

    def _build_kv(self, model_name: str | None) -> list[KV]:
        from .metadata import general_kv, parameter_counts
        from .gguf_layout import KV as _KV

        h = self.hparams
        counts = parameter_counts((t.name, t.shape) for t in self.tensors)
        merged: dict[str, KV] = {}
        for entry in (
            [_KV("general.architecture", ValueType.STRING, self.family.arch_of(h))],
            self.family.tensor_time_kv(h),
            self.family.stored_kv(h, self._stored),
            [_KV("general.type", ValueType.STRING, "model")],
            general_kv(self.path, total_params=counts[0], shared_params=counts[1], expert_params=counts[2],
                       expert_count=counts[3], model_name=model_name),
            self.family.parameters(h, self.block_count, self.file_type),
            [_KV("general.quantization_version", ValueType.UINT32, 2)],
            [_KV("general.tensor_extra.name", ValueType.ARRAY, self._prec_a4, ValueType.STRING),
             _KV("general.tensor_extra.prec_a4", ValueType.ARRAY, [False] * len(self._prec_a4), ValueType.BOOL)]
            if self._prec_a4 else [],
            vocab_kv(self.family.vocab, self.path, h, apart=self._vocab_apart),
        ):
            for kv in entry:
                merged[kv.key] = kv  # a key set twice keeps its first place and its last value
        return list(merged.values())

    def _requantize(self, quant: str, config_path: Path, imatrix) -> None:
        """The file llama_model_quantize writes from the converter's: its tensor order and types, its KV edits;
        with an importance matrix, as llama-quantize --imatrix writes it."""
        from . import quant as q
        from .imatrix import Imatrix, load

        if quant not in q.FILE_TYPES:
            raise ConfigError(f"--quant {quant!r}: choose one of {', '.join(q.FILE_TYPES)}")
        if self._out_type not in (GGMLType.F32, GGMLType.F16, GGMLType.BF16):
            raise ConfigError(f"--quant {quant} over --outtype {self.outtype}: llama-quantize does not requantize "
                              f"a quantized file; choose --outtype auto, f32, f16 or bf16")
        if imatrix is not None and not isinstance(imatrix, Imatrix):
            imatrix = load(imatrix)
        kv = {k.key: k.value for k in self.kv}
        facts = q.ModelFacts.from_kv(kv)
        by_name = {t.name: t for t in self.tensors}
        order = [by_name[n] for n in q.tensor_order(list(by_name))]
        try:
            types = q.choose_types([(t.name, t.ggml_dims, t.ggml_type) for t in order], quant, facts,
                                   imatrix=imatrix is not None)
        except ValueError as e:
            raise ConfigError(f"{config_path}: --quant {quant}: {e}") from None
        for t, new in zip(order, types):
            if new != t.ggml_type and t.ggml_type not in (GGMLType.F32, GGMLType.F16, GGMLType.BF16):
                # llama_model_quantize copies a tensor already of the type it chooses, and refuses to requantize
                # one of another quantized type (allow_requantize is false by default)
                raise ConfigError(f"{config_path}: --quant {quant} would quantize {t.name} ({t.ggml_type.name} in the "
                                  f"converter's file) as {new.name}, which llama-quantize refuses: "
                                  f"\"requantizing from type {t.ggml_type.name.lower()} is disabled\"; "
                                  + ("choose --quant MXFP4_MOE, which keeps the MXFP4 experts as they are"
                                     if t.ggml_type == GGMLType.MXFP4 else
                                     "no --quant type keeps NVFP4 weights: run it without --quant"
                                     if t.ggml_type == GGMLType.NVFP4 else
                                     f"choose a --quant that keeps it {t.ggml_type.name}, or no --fp8-as-q8"))
        self.tensors = []
        for t, new in zip(order, types):
            if new != t.ggml_type:
                weights = self._importance(imatrix, t, new, quant) if imatrix is not None else None
                t = Presented(t.name, t.view, new, t.steps, via=t.ggml_type, imatrix=weights)
            self.tensors.append(t)
        self._by_name = {t.name: t for t in self.tensors}
        self.file_type = q.FILE_TYPES[quant][0]
        # gguf_set_val_* removes a key and appends it: these move to the end, in llama-quantize's order
        edits = [KV(Keys.General.QUANTIZATION_VERSION, ValueType.UINT32, q.QUANTIZATION_VERSION),
                 KV(Keys.General.FILE_TYPE, ValueType.UINT32, self.file_type)]
        if imatrix is not None:
            def cut(text):  # its override values are 127 bytes at most
                return text.encode()[:127].decode("utf-8", "ignore")
            edits.append(KV("quantize.imatrix.file", ValueType.STRING, cut(imatrix.path)))
            if imatrix.datasets:
                edits.append(KV("quantize.imatrix.dataset", ValueType.STRING, cut(imatrix.datasets[0])))
            edits.append(KV("quantize.imatrix.entries_count", ValueType.UINT32, len(imatrix.entries)))
            if imatrix.chunk_count > 0:
                edits.append(KV("quantize.imatrix.chunks_count", ValueType.UINT32, imatrix.chunk_count))
        edited = {e.key for e in edits}
        self.kv = [k for k in self.kv if k.key not in edited] + edits
        self.quant = quant

    @staticmethod
    def _importance(imatrix, t: Presented, new: GGMLType, quant: str):
        from .quant import requires_imatrix

        weights = imatrix.entries.get(t.name)
        dims = t.ggml_dims
        expected = dims[0] * (dims[2] if len(dims) > 2 else 1)
        if weights is not None and weights.size != expected:
            if t.name in ("token_embd.weight", "per_layer_token_embd.weight"):
                weights = None  # llama-quantize ignores a mismatched one here only
            else:
                raise ConfigError(f"{imatrix.path}: importance matrix of {weights.size} values for {t.name}, "
                                  f"which needs {expected}: it was computed for another model")
        if weights is None and requires_imatrix(t.name, new, quant):
            raise ConfigError(f"{imatrix.path}: no importance data for {t.name}, which {quant} quantizes as "
                              f"{new.name} (llama-quantize refuses it without)")
        return weights

    # ------------------------------------------------------------ the virtual file
    def _layout(self) -> None:
        header = encode_header(len(self.tensors), len(self.kv))
        entries = [encoded_kv_pieces(kv) for kv in self.kv]
        ends = list(itertools.accumulate((sum(map(len, e)) for e in entries), initial=len(header)))
        self._kv_spans = list(zip(ends[:-1], ends[1:]))  # where each KV entry lies in the file
        parts = [header, *itertools.chain.from_iterable(entries)]
        offset = 0
        self._data_offsets: list[int] = []
        for t in self.tensors:
            dims = t.ggml_dims
            if self.quant:  # gguf.cpp writes ggml_n_dims: trailing dims of one dropped
                while len(dims) > 1 and dims[-1] == 1:
                    dims = dims[:-1]
            parts.append(encode_tensor_info(t.name, dims, t.ggml_type, offset))
            self._data_offsets.append(offset)
            offset += pad_to(t.nbytes)
        length = sum(map(len, parts))
        parts.append(b"\0" * (pad_to(length) - length))
        self._header = Pieces(parts)  # a kept vocabulary's arrays left in their file, the rest joined once
        self.data_start = len(self._header)
        self.size = self.data_start + offset
        self._cache: tuple[int, int, int, memoryview] | None = None  # (tensor index, first row, last row, bytes)
        self._chunk_buffer = np.empty(0, np.uint8)  # what stored bits are read into, reused chunk after chunk

    @property
    def arch(self) -> str:
        return self.family.arch_of(self.hparams)

    def tensor(self, name: str) -> Presented:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no tensor {name!r} in the view of {self.path}") from None

    def read_tensor(self, name: str) -> np.ndarray:
        """A presented tensor's values in its GGUF type, numpy dim order (BF16 as its uint16 bits)."""
        return self.tensor(name).read()

    def data_offset(self, name: str) -> int:
        """Absolute file offset of a tensor's data."""
        i = self.tensors.index(self.tensor(name))
        return self.data_start + self._data_offsets[i]

    def read(self, offset: int, n: int) -> bytes:
        return _read(self, offset, n)

    def readinto(self, offset: int, out: memoryview) -> int:
        """Fill `out` with the file's bytes from `offset`; returns how many (short only at the end)."""
        n = min(len(out), max(0, self.size - offset))
        done = 0
        while done < n:
            pos = offset + done
            if pos < self.data_start:
                take = self._header.readinto(pos, out[done:n])
            else:
                # a read that began in an earlier tensor spills into this one (a stdio buffer filled after a seek)
                take = self._read_data(pos - self.data_start, out[done:n], read_ahead=done == 0)
            done += take
        return n

    def _read_data(self, rel: int, out: memoryview, read_ahead: bool = True) -> int:
        i = bisect.bisect_right(self._data_offsets, rel) - 1
        t = self.tensors[i]
        within = rel - self._data_offsets[i]
        if within >= t.nbytes:  # alignment padding after the tensor
            take = min(len(out), pad_to(t.nbytes) - within)
            out[:take] = b"\0" * take
            return take
        row_bytes = t.row_bytes
        first_row = within // row_bytes
        if t.stored_bits:
            # whole rows of stored bits go straight into the reader's buffer; a row its edge cuts, through the
            # chunk buffer alone
            rows = min(t.nbytes, within + len(out)) // row_bytes - first_row
            if within % row_bytes == 0 and rows > 0:
                t.rows_into(first_row, first_row + rows, np.frombuffer(out, np.uint8, rows * row_bytes))
                return rows * row_bytes
            rows_per_chunk = 1
        else:
            rows_per_chunk = _rows_per_chunk(t, read_ahead=True)
        want_end = min(t.nbytes, within + len(out))
        last_row = min(t.view.n_rows, -(-want_end // row_bytes), first_row + rows_per_chunk)
        cached = self._cache
        if cached and cached[0] == i and cached[1] <= first_row and last_row <= cached[2]:
            data, base = cached[3], cached[1]
        else:
            # readers go front to back in small pieces (stdio buffers): produce a whole chunk ahead, except for
            # the edge a spilling read touches (llama.cpp may read this tensor much later, or never from here)
            ahead = min(t.view.n_rows, first_row + rows_per_chunk) if read_ahead else last_row
            self._cache = None  # the chunk before is done with: not held while the next one is made
            data = self._chunk(t, first_row, ahead)
            base = first_row
            self._cache = (i, first_row, ahead, data)
            last_row = min(last_row, ahead)
        start = within - base * row_bytes
        take = min(len(out), last_row * row_bytes - within, want_end - within)
        out[:take] = data[start:start + take]
        return take

    def _chunk(self, t: Presented, first: int, stop: int) -> memoryview:
        """The file's bytes of rows [first, stop) of `t`. Stored bits are read straight into one buffer reused
        chunk after chunk (no new pages to fault in), so they are valid only until the next chunk is made."""
        if not t.stored_bits:
            return _bytes_view(t.rows(first, stop))
        self._cache = None  # it may point into the buffer about to be overwritten
        n = (stop - first) * t.row_bytes
        if len(self._chunk_buffer) < n:
            self._chunk_buffer = np.empty(n, np.uint8)
        t.rows_into(first, stop, self._chunk_buffer[:n])
        return memoryview(self._chunk_buffer[:n]).cast("B")

    def fill_into(self, out: memoryview, *, threads: int | None = None,
                  on_bytes: Callable[[int], None] | None = None, fd: int | None = None,
                  on_header: Callable[[], None] | None = None) -> None:
        """Write the whole file into `out`, a writable buffer of exactly `size` bytes (a mapped memory file:
        hfview.memfile), on `threads` threads (default: every CPU): the header first, then `on_header()` (a loader
        may read the header while the tensors are filled), then the tensors. A tensor whose bytes are the stored bits is read
        from its shards straight into its place; every other one is made a chunk at a time and copied into its place.
        `fd`: a file whose bytes `out` maps (the memory file): stored bits that lie in a row in a shard are then
        read into a buffer the CPU's cache holds, their bf16 NaNs made quiet there, and put in the file by
        hfview.memfile.PieceWriter (pwrite, or pages made in one call, never a fault per page). `on_bytes(n)` is
        called (from any of the threads) as each n bytes of tensor data are in place."""
        out = memoryview(out).cast("B")
        if len(out) != self.size or out.readonly:
            raise ValueError(f"fill_into needs a writable buffer of {self.size} bytes, got {len(out)}"
                             f"{' (read-only)' if out.readonly else ''}")
        self._header.readinto(0, out[:self.data_start])
        if on_header is not None:
            on_header()
        writer = PieceWriter(fd, out) if fd is not None else None
        if writer is not None:
            writer.let_go(0, self.data_start)
        jobs: dict[object, list[tuple[Presented, int, int, int]]] = {}  # what one thread does, in order
        for t, rel in zip(self.tensors, self._data_offsets):
            start = self.data_start + rel
            out[start + t.nbytes:start + pad_to(t.nbytes)] = bytes(pad_to(t.nbytes) - t.nbytes)
            step = max(1, min(_rows_per_chunk(t), _FILL_JOB_BYTES // max(1, t.row_bytes)))
            for first in range(0, t.view.n_rows, step):
                stop = min(t.view.n_rows, first + step)
                # a view keeping state between calls (and any tensor sharing it) is one job, made front to back
                key = (id(t.view), first) if isinstance(t.view, _STATELESS_VIEWS) else id(t.view)
                jobs.setdefault(key, []).append((t, first, stop, start + first * t.row_bytes))

        def run(job: list[tuple[Presented, int, int, int]]) -> None:
            buffer = None
            for t, first, stop, at in job:
                n = (stop - first) * t.row_bytes
                place = np.frombuffer(out, np.uint8, n, at)
                spans = _stored_spans(t, first, stop) if writer is not None and t.stored_bits else None
                if spans is not None:
                    buffer = np.empty(_FILL_READ_BYTES, np.uint8) if buffer is None else buffer
                    _write_stored(spans, t.ggml_type == GGMLType.BF16, buffer, writer, at)
                else:
                    rows = max(1, (_FILL_READ_BYTES if t.stored_bits else _FILL_COMPUTE_BYTES) // max(1, t.row_bytes))
                    for r in range(first, stop, rows):
                        end = min(stop, r + rows)
                        lo, hi = (r - first) * t.row_bytes, (end - first) * t.row_bytes
                        if t.stored_bits:
                            t.rows_into(r, end, place[lo:hi])
                        else:
                            place[lo:hi] = np.frombuffer(_bytes_view(t.rows(r, end)), np.uint8)
                        if writer is not None:  # written through the mapping
                            writer.let_go(at + lo, hi - lo)
                if on_bytes is not None:
                    on_bytes(n)

        ordered = sorted(jobs.values(), key=lambda job: -sum((stop - first) * t.row_bytes
                                                             for t, first, stop, _ in job))  # longest first
        threads = threads or _fill_threads()
        if threads == 1:
            for job in ordered:
                run(job)
            return
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hfview-fill") as pool:
            futures = [pool.submit(run, job) for job in ordered]
            try:
                wait(futures, return_when=FIRST_EXCEPTION)
            finally:  # once one failed (or Ctrl-C came), the jobs not yet started are not started
                for f in futures:
                    f.cancel()
        for f in futures:
            if not f.cancelled() and f.exception() is not None:
                raise f.exception()

    def for_llama_cpp(self) -> "HfCheckpoint | LoadTimeView":
        """What hfview's runner hands llama.cpp: this view, or where the family declares load-time array values
        (RunnerFacts.load_arrays) the view with those values in the header. Refuses a view whose FFN or attention scales
        the family's llama.cpp graph would not apply (RunnerFacts.applies_ffn_scales, applies_attn_scales)."""
        facts = self.family.runner
        unapplied = [part for part, applied in ((".ffn_", facts.applies_ffn_scales),
                                                (".attn_", facts.applies_attn_scales)) if not applied]
        scaled = next((t.name for t in self.tensors if t.name.startswith("blk.") and t.name.endswith(".scale")
                       and any(part in t.name for part in unapplied)), None)
        if scaled is not None:
            which = "FFN and expert" if ".ffn_" in scaled else "attention"
            raise CheckpointError(f"{self.path}: {scaled!r} (NVFP4's per-tensor weight_scale_2) is a scale llama.cpp's "
                                  f"{self.arch} graph does not apply to its {which} weights, so it would run another "
                                  f"model (the converter's own file gives NaN or wrong logits); `hfview export` writes "
                                  f"the file as the converter does, and the release's BF16 weights run")
        return LoadTimeView(self) if self.load_arrays else self

    def iter_file(self) -> Iterator[tuple[bytes | memoryview, str | None]]:
        """The whole file in pieces: (bytes, tensor name or None for the header and padding). A piece is valid
        until the next one is asked for."""
        for piece in self._header.chunks():
            yield piece, None
        for t in self.tensors:
            step = _rows_per_chunk(t)
            for r in range(0, t.view.n_rows, step):
                yield self._chunk(t, r, min(t.view.n_rows, r + step)), t.name
            if pad := pad_to(t.nbytes) - t.nbytes:
                yield b"\0" * pad, None

    def __repr__(self) -> str:
        return (f"HfCheckpoint({str(self.path)!r}, arch={self.arch!r}, outtype={self.outtype!r}, "
                f"{len(self.tensors)} tensors, {len(self.kv)} keys, {self.size} bytes)")
