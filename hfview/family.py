"""What a family module declares, and the one routine that turns a checkpoint's tensors into the
converter's tensor list from those declarations.

A family is data: its config keys (read / harmless, with the config class's defaults), its tensor
table (HF name pattern -> GGUF name + a named view), its hyperparameter KV function and its vocab
routine. Nothing here knows any particular family.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from .config import ANY
from .errors import CheckpointError, ConfigError, shown
from .gguf_layout import KV, GGMLType
from .shards import StoredTensor
from .views import (Generated, Presented, RowPermutation, Stack, Stored, ValueStep, View, grouped_qkv,
                    rotation_pairs)

# ---------------------------------------------------------------- tensor rules
# A view maker gets the matched sources and the hyperparameters and returns the View.
ViewMaker = Callable[[list[StoredTensor], dict], View]


def stored(sources: list[StoredTensor], h: dict) -> View:
    return Stored(sources[0])


def rope_pairs(head_count_key: str) -> ViewMaker:
    """Q/K rows regrouped from rotate-half halves into interleaved rotation pairs, per head."""
    def make(sources: list[StoredTensor], h: dict) -> View:
        src = sources[0]
        n_head = h[head_count_key]
        if src.shape[0] % (2 * n_head):
            raise CheckpointError(f"tensor {src.name!r} has {src.shape[0]} rows, which do not split into "
                                  f"{n_head} heads of rotation pairs ({head_count_key} = {n_head})")
        return RowPermutation(src, rotation_pairs(src.shape[0], n_head), f"rotation pairs over {n_head} heads")
    return make


def qkv_by_part(head_count_key: str, kv_heads: Callable[[dict], int] | None = None) -> ViewMaker:
    """A fused QKV stored by KV group regrouped as all q rows, then k, then v (views.grouped_qkv); `kv_heads`
    gives the group count from the hyperparameters (default: one group per head, as GPT-NeoX and BLOOM)."""
    def make(sources: list[StoredTensor], h: dict) -> View:
        src = sources[0]
        n_head = h[head_count_key]
        n_kv = kv_heads(h) if kv_heads else n_head
        if n_head % n_kv or src.shape[0] % (n_kv * (n_head // n_kv + 2)):
            raise CheckpointError(f"tensor {src.name!r} has {src.shape[0]} rows, which do not split into {n_kv} "
                                  f"groups of {n_head // max(n_kv, 1)} query heads, a key and a value "
                                  f"({head_count_key} = {n_head})")
        label = f"q, k, v regrouped over {n_head} heads" + (f" in {n_kv} KV groups" if n_kv != n_head else "")
        return RowPermutation(src, grouped_qkv(src.shape[0], n_head, n_kv), label)
    return make


def stack(sources: list[StoredTensor], h: dict) -> View:
    return Stack(tuple(sources))


@dataclass(frozen=True)
class Tensor:
    """HF name pattern -> GGUF name. Patterns use {bid} (block index) and {wb} (weight|bias)."""
    hf: str
    gguf: str
    view: ViewMaker = stored
    # or a function of the hyperparameters giving them (Falcon-H1's multipliers, which the converter folds in)
    steps: tuple[ValueStep, ...] | Callable[[dict], tuple[ValueStep, ...]] = ()
    required: bool | Callable[[dict], bool] = True   # may depend on the config (e.g. dense vs mixture)
    # applies only where it holds for the hyperparameters (elsewhere the next matching rule does): one stored
    # name the converter writes under two GGUF names (Granite 4's shared MLP: *_shexp beside experts, else ffn_*)
    when: Callable[[dict], bool] | None = None


@dataclass(frozen=True)
class Stacked:
    """One tensor per index {x}, stacked in index order into one tensor of the block. On its own (StableLM's
    per-head q/k norms) a stack is emitted as soon as its last part is read; the stacks of one `group` (a
    mixture's experts) are emitted together, in declaration order, once the block's last part of any is read,
    as the converter writes them."""
    hf: str
    gguf: str
    count_key: str
    required: bool | Callable[[dict], bool] = True
    group: str | None = None
    view: "ViewMaker | None" = None  # how the parts become one tensor (default: stacked along a new first axis)


def Experts(hf: str, gguf: str, count_key: str, required: bool | Callable[[dict], bool] = True) -> Stacked:
    """One tensor per expert ({x}) stacked into a `*_exps` tensor, emitted with the block's other expert stacks."""
    return Stacked(hf, gguf, count_key, required, group="experts")


@dataclass(frozen=True)
class Split:
    """One stored tensor presented as several (a fused tensor the converter splits, e.g. InternLM2's wqkv into
    attn_q, attn_k, attn_v): `parts` are (GGUF name pattern, view maker) pairs, emitted in that order."""
    hf: str
    parts: tuple[tuple[str, ViewMaker], ...]
    required: bool | Callable[[dict], bool] = True
    when: Callable[[dict], bool] | None = None  # as Tensor.when


@dataclass(frozen=True)
class Skip:
    """Stored tensors the converter drops (buffers such as rotary inv_freq). A pattern may end in {rest}
    (any remainder): everything under a module, e.g. a multimodal checkpoint's vision tower. `when`: drop
    only where it holds for the hyperparameters (e.g. lm_head of a tied model); elsewhere the next matching
    rule applies."""
    hf: str
    when: Callable[[dict], bool] | None = None
    # drop only blocks from this index on (DeepSeek-V3's next-token-prediction layers after its
    # num_hidden_layers, which the converter skips); the pattern names {bid}
    from_block: Callable[[dict], int] | None = None

    def drops(self, h: dict, m: re.Match) -> bool:
        if self.when is not None and not self.when(h):
            return False
        return self.from_block is None or int(m.group("bid")) >= self.from_block(h)


Rule = Tensor | Stacked | Split | Skip


def rule_applies(rule: Rule, h: dict) -> bool:
    """Whether a rule that names a tensor holds for these hyperparameters (its `when`, where it has one)."""
    when = getattr(rule, "when", None)
    return when is None or when(h)


def _regex(pattern: str) -> re.Pattern:
    rx = re.escape(pattern)
    for name, sub in (("bid", r"(?P<bid>\d+)"), ("x", r"(?P<x>\d+)"), ("wb", r"(?P<wb>weight|bias)"),
                      ("rest", r"(?P<rest>.+)")):
        rx = rx.replace(re.escape("{" + name + "}"), sub)
    return re.compile(rx + "$")


# ---------------------------------------------------------------- the family declaration
@dataclass(frozen=True)
class Refuse:
    """A value of one key the family cannot honour, refused by the engine with `reason`: where the key's value (in
    the hyperparameters, with the config class's defaults; a dotted key reads into a mapping, as
    "rope_parameters.rope_type") is not among `allowed`, or where `allowed` is a predicate, fails it. An absent key
    reads as `default`."""
    key: str
    allowed: tuple | Callable[[object], bool]
    reason: str
    default: object = None

    def value(self, h: dict) -> object:
        value: object = h
        for part in self.key.split("."):
            value = value.get(part, self.default) if isinstance(value, dict) else self.default
        return value

    def refuses(self, value: object) -> bool:
        return not self.allowed(value) if callable(self.allowed) else value not in self.allowed

    def apply(self, h: dict, path: Path) -> None:
        value = self.value(h)
        if self.refuses(value):
            raise ConfigError(f"{path}: {self.key} {shown(value)}: {self.reason}")


def stated(value: object) -> bool:
    """For Refuse.allowed: the key has a value (absent or null is refused)."""
    return value is not None


def unset(value: object) -> bool:
    """For Refuse.allowed: the key is absent, null, false, zero or empty (a flag or list that asks for nothing)."""
    return not value


@dataclass(frozen=True)
class RunnerFacts:
    """How llama.cpp must load and run a family's view, beyond the converter's file: facts the runner reads, which
    the file itself does not carry."""
    # Whether llama.cpp's architecture applies the model's sliding window itself. Where it does not (the
    # llama architecture serving Mistral v0.1) attention past the window differs from the model's, so the
    # runner stops the context at the window unless asked for more.
    llama_cpp_applies_window: bool = False
    # The config key that states the model's attention window (PLaMo 2: attention_window_size)
    window_key: str = "sliding_window"
    # KV llama.cpp requires that the converter writes under another key or not at all (Qwen-1's RMS epsilon,
    # written under the LayerNorm key): the file stays the converter's, and llama.cpp gets these as load-time
    # overrides (llama_model_kv_override, llama-cli's --override-kv) wherever hfview loads the view. Scalars only:
    # llama.cpp cannot override an array
    load_kv: Callable[[dict], dict[str, bool | int | float | str]] = lambda h: {}
    # Integer arrays of the converter's KV that llama.cpp must read with other values to run the view (PLaMo 2's
    # head_count: its zeros make the pinned llama.cpp loop forever), from the hyperparameters. The file stays the
    # converter's; wherever hfview loads the view, llama.cpp reads the header with these values in place, at the
    # same length, so no other byte or offset moves (HfCheckpoint.for_llama_cpp). llama-cli cannot override an array
    load_arrays: Callable[[dict], dict[str, list[int]]] = lambda h: {}
    # Whether llama.cpp's graph multiplies each FFN and expert weight by its per-tensor `.scale` (NVFP4's
    # weight_scale_2, which the converter writes beside the weight). deepseek2's passes none (src/models/deepseek2.cpp),
    # so it would run a view carrying them as another model (NaN logits from the converter's own file, measured): the
    # runner refuses that view, which export and mount still write as the converter does
    applies_ffn_scales: bool = True
    # The same for attention weights' `.scale` (nanbeige's loop passes after the first carry none: measured, a
    # Nanbeige whose attention alone is NVFP4 misses transformers by NMSE 1.3 from the converter's own file)
    applies_attn_scales: bool = True


@dataclass(frozen=True)
class Family:
    name: str                       # module name, e.g. "llama"
    gguf_arch: str                  # llama.cpp architecture, e.g. "llama"
    architectures: tuple[str, ...]  # HF `architectures` entries this family reads
    defaults: dict[str, dict]       # model_type -> its transformers config class's defaults
    reads: frozenset[str]
    harmless: Mapping[str, object]   # key -> ANY or the values at which it changes nothing (hfview.config)
    tensors: tuple[Rule, ...]
    parameters: Callable[[dict, int, int], list[KV]]   # (hparams, block_count, file_type) -> KV
    vocab: Callable[[Path, dict], list[KV]]
    generated: Callable[[dict], list[tuple[str, np.ndarray]]] = lambda h: []
    check: Callable[[dict, Path], None] = lambda h, path: None     # refuse values it cannot honour
    normalise: Callable[[dict], dict] = lambda h: h                 # what the config class's __init__ computes
    notes: dict[str, str] = field(default_factory=dict)
    # KVs the converter adds while it prepares tensors (e.g. Phi-3's rope attn_factor from
    # generate_extra_tensors): they come before general.type, right after general.architecture
    tensor_time_kv: Callable[[dict], list[KV]] = lambda h: []
    # the same, computed from stored tensors' values (e.g. Apertus' per-layer xIELU scalars, which the
    # converter reads out of the checkpoint into KV arrays); gets the hparams and the stored tensors
    stored_kv: Callable[[dict, dict[str, StoredTensor]], list[KV]] = lambda h, stored: []
    # A format of its own (Mistral's params.json + consolidated*.safetensors): the config file read in a
    # directory without config.json, and the routine listing its tensors (default: Transformers' shards)
    config_file: str = "config.json"
    # For a family of its own config file, which of those files it reads where several families share one
    # (Mistral's params.json: dense vs "moe"); None: every such file
    claims: Callable[[dict], bool] | None = None
    index: Callable[[Path], dict[str, StoredTensor]] | None = None
    # A prefix one layout of the family puts before its tensor names and another does not (GPT-2: transformers
    # writes "transformer.h.0...", OpenAI's release "h.0..."): removed before matching, so rules name it once.
    optional_prefix: str = ""
    # Released names the config class reads as another key (its attribute map or constructor aliases: BLOOM's
    # n_embed for hidden_size): read as that key before the defaults fill in the rest
    aliases: dict[str, str] = field(default_factory=dict)
    # The converter's tensor_force_quant asks every matrix at the outtype (DBRX): none is kept F32 by its name
    # (a router included); vectors and norms still are
    matrices_at_outtype: bool = False
    # Where the converter picks llama.cpp's architecture from the config (Nemotron-H: nemotron_h, or nemotron_h_moe
    # for a mixture): that choice from the hyperparameters; gguf_arch stays the family's usual one
    gguf_arch_for: Callable[[dict], str] | None = None

    # Blocks the converter writes past the layer count (GLM-4.5's next-token-prediction layers, which it keeps
    # unless --no-mtp): counted in block_count, their tensors under blk.{n}... as stored after the trunk
    extra_blocks: Callable[[dict], int] = lambda h: 0
    # Whether the config's per-layer lists (layer_types, ...) may also list those extra blocks (Step-3.5's releases
    # do; transformers' Step3p7TextConfig splits them off): else they must list the trunk's layers exactly
    layer_lists_over_extra_blocks: bool = False
    # What the converter reads into its hyperparameters from the stored tensors' names (Qwen3-Next's MTP layer
    # count, which its config does not state): gets the checked hparams and the stored tensors, returns hparams
    stored_hparams: Callable[[dict, dict[str, StoredTensor]], dict] = lambda h, stored: h
    # The converter's renames of a stored name (after converter_name) before its tensor map (Qwen3-Next's
    # mtp.layers.{i}.* read as model.layers.{num_hidden_layers + i}.*): rules match the renamed name
    rename: Callable[[str, dict], str] = lambda name, h: name
    # A family the pinned converter has no class for (TeleChat2): why no converter file is its byte oracle. It is
    # presented under an existing llama.cpp architecture (gguf_arch) with hfview's own mapping; its logits are
    # checked against transformers' class, or an equivalent one over the same weights. Empty: the converter's
    # class is the specification and the bytes oracle applies
    no_converter: str = ""
    # Matrices the converter's tensor_force_quant keeps in F32 beyond the common list, by GGUF name and the
    # hyperparameters (Hy4's iHC mixing matrices, and its lm_head where enable_lm_head_fp32 says)
    kept_f32: Callable[[str, dict], bool] = lambda name, h: False
    # The reverse: matrices of that common list the converter writes at the outtype, as it matches the list at the
    # block id it read off the stored name, before its modify_tensors renames the tensor into another block
    # (Nemotron-H's MTP router, stored under mtp.layers.1 and written as blk.{num_hidden_layers})
    f32_list_missed: Callable[[str, dict], bool] = lambda name, h: False
    # Whether the converter's NVFP4 path regroups q_proj / k_proj rows (and their block scales) into rotation pairs:
    # LlamaModel's _repack_nvfp4 under undo_permute, which its subclasses inherit whatever their own BF16 path does
    nvfp4_qk_pairs: Callable[[dict], bool] = lambda h: False
    # Endings of stored names the converter's tensor map does not know (its modify_tensors renames them first): its
    # NVFP4 path maps each NVFP4 weight by the stored name, bypassing modify_tensors, and fails on such a weight
    nvfp4_unmapped: tuple[str, ...] = ()
    # What the runner must do beside reading the file (load-time overrides, the window llama.cpp applies or not)
    runner: "RunnerFacts" = field(default_factory=lambda: RunnerFacts())
    # One-key refusals as data: the engine refuses a value no rule allows, before `check` runs
    refuse: tuple["Refuse", ...] = ()

    def arch_of(self, h: dict) -> str:
        return self.gguf_arch_for(h) if self.gguf_arch_for is not None else self.gguf_arch

    def __post_init__(self) -> None:
        if not isinstance(self.harmless, Mapping) or any(
                off is not ANY and not isinstance(off, tuple) for off in self.harmless.values()):
            raise TypeError(f"family {self.name}: harmless must map each key to ANY or to the tuple of values at "
                            f"which it changes nothing (see hfview.config.COMMON_HARMLESS)")

    def validate(self, h: dict, path: Path) -> None:
        """Refuse what the family cannot honour: another converter class (architectures[0], by which the converter
        picks its class), a value its `refuse` table does not allow, then whatever its `check` refuses across keys."""
        stated = h.get("architectures")
        if self.architectures and stated and stated[0] not in self.architectures:  # absent: model_type decides
            raise ConfigError(f"{path}: architectures[0] is {stated[0]!r}; the {self.name} family reads "
                              f"{', '.join(self.architectures)} only")
        for rule in self.refuse:
            rule.apply(h, path)
        self.check(h, path)

    @property
    def model_types(self) -> tuple[str, ...]:
        return tuple(self.defaults)

    def canonical(self, config: dict) -> dict:
        """`config` with each alias read as the key it stands for (the key itself wins where both are stated)."""
        out = dict(config)
        for alias, name in self.aliases.items():
            if alias in out:
                out.setdefault(name, out.pop(alias))
        return out


# The converter's own drops and renames, before any family sees a name.
_DROPPED_SUFFIXES = (".attention.masked_bias", ".attention.bias", ".rotary_emb.inv_freq")


def converter_name(name: str) -> str:
    return name.replace("language_model.", "") if "language_model." in name else name


# ---------------------------------------------------------------- the tensor list
def plan_tensors(family: Family, stored_tensors: dict[str, StoredTensor], h: dict, block_count: int,
                 type_for: Callable[[str, tuple[int, ...]], GGMLType]) -> list[Presented]:
    """The converter's tensor list: generated tensors first, then each stored tensor in order, mapped by
    the family's rules; experts are stacked and emitted when a block's last expert arrives."""
    compiled = [(rule, _regex(rule.hf)) for rule in family.tensors]
    out: list[Presented] = []

    def present(name: str, view: View, steps=()) -> None:
        for src in view.sources:  # what no view can turn into a GGUF tensor llama.cpp takes
            if 0 in src.shape or src.dtype.startswith("F8_"):
                what = "has no elements" if 0 in src.shape else f"is stored as {src.dtype}, which hfview does not read"
                raise CheckpointError(f"{src.path.name}: tensor {src.name!r} (shape {list(src.shape)}) {what}; "
                                      f"the checkpoint cannot be presented as {name}")
        out.append(Presented(name, view, type_for(name, tuple(view.shape)), tuple(steps)))

    for name, values in family.generated(h):
        present(name, Generated(values, "computed from config"))

    # (rule, or group, block) -> {(rule's place in its group, index): stored part}
    pending: dict[tuple[str, int | None], dict[tuple[int, int], StoredTensor]] = {}
    stack_groups = {g: [r for r in family.tensors if isinstance(r, Stacked) and r.group == g]
                    for g in {r.group for r in family.tensors if isinstance(r, Stacked) and r.group}}
    seen: set[str] = set()
    for hf_name, tensor in stored_tensors.items():
        name = family.rename(converter_name(hf_name).removeprefix(family.optional_prefix), h)
        if name.endswith(_DROPPED_SUFFIXES):
            continue
        for rule, rx in compiled:
            m = rx.match(name)
            if m and (rule.drops(h, m) if isinstance(rule, Skip) else rule_applies(rule, h)):
                break
        else:
            raise CheckpointError(f"{tensor.path.name}: tensor {hf_name!r} is not one the {family.name} family "
                                  f"knows; the checkpoint may be of another architecture than its config says")
        if isinstance(rule, Skip):
            continue
        groups = m.groupdict()
        bid = int(groups["bid"]) if groups.get("bid") is not None else None
        if bid is not None and bid >= block_count:
            raise CheckpointError(f"{tensor.path.name}: tensor {hf_name!r} belongs to block {bid}, but the config "
                                  f"has {block_count} blocks (num_hidden_layers)")
        if isinstance(rule, Split):
            seen.add(rule.hf.format(bid=bid, wb=groups.get("wb"), x="{x}"))
            for part_name, make in rule.parts:
                present(part_name.format(bid=bid, wb=groups.get("wb")), make([tensor], h))
            continue
        gguf_name = rule.gguf.format(bid=bid, wb=groups.get("wb"))
        seen.add(rule.hf.format(bid=bid, wb=groups.get("wb"), x="{x}", rest=groups.get("rest")))
        if isinstance(rule, Tensor):
            present(gguf_name, rule.view([tensor], h), rule.steps(h) if callable(rule.steps) else rule.steps)
            continue
        n, x = h[rule.count_key], int(groups["x"])
        if x >= n:
            raise CheckpointError(f"tensor {hf_name!r}: index {x}, but {rule.count_key} = {n}")
        members = stack_groups[rule.group] if rule.group else [rule]
        key = (rule.group or rule.hf, bid)
        parts = pending.setdefault(key, {})
        parts[(members.index(rule), x)] = tensor
        if len(parts) == n * len(members):
            for i, r in enumerate(members):
                make = r.view or stack
                present(r.gguf.format(bid=bid, wb=groups.get("wb")), make([parts[(i, e)] for e in range(n)], h))
            del pending[key]
    if pending:
        (what, bid), parts = next(iter(pending.items()))
        members = stack_groups.get(what) or [r for r in family.tensors if isinstance(r, Stacked) and r.hf == what]
        names = " and ".join(repr(r.hf.format(bid=bid, x="{x}", wb="weight")) for r in members)
        raise CheckpointError(f"block {bid} has {len(parts)} of the tensors {names}; a complete block has "
                              f"{len(members) * h[members[0].count_key]}: a shard may be missing")
    _check_required(family, seen, block_count, h)
    return out


def _check_required(family: Family, seen: set[str], block_count: int, h: dict) -> None:
    for rule in family.tensors:
        if isinstance(rule, Skip):
            continue
        if not (rule.required(h) if callable(rule.required) else rule.required):
            continue
        if not rule_applies(rule, h):
            continue
        wbs = ["weight"] if "{wb}" in rule.hf else [None]
        # the extra blocks (MTP layers) are written as stored: a checkpoint saved without them still converts
        bids = range(block_count - family.extra_blocks(h)) if "{bid}" in rule.hf else [None]
        for bid in bids:
            for wb in wbs:
                key = rule.hf.format(bid=bid, wb=wb, x="{x}")
                if key not in seen:
                    raise CheckpointError(f"tensor {key.replace('{x}', '0')!r} is missing: the {family.name} family "
                                          f"needs it; a shard may be missing or incomplete")
