"""The general.* entries: what llama.cpp's converter writes about a model's identity.

The pinned converter (convert_hf_to_gguf.py with its own gguf-py `Metadata`) gathers a name, basename,
finetune, version, size label, licence, base models, datasets, tags and languages from README.md's YAML
front matter, config.json's `_name_or_path` and the directory name, and recommended sampling settings
from generation_config.json. This module applies the same rules so the virtual GGUF carries the same
general.* entries, in the same order, with the same types.

Precedence, as in the converter: front matter first, then `_name_or_path`, then the directory name; a
field keeps the first value it gets. A size label found in a name is kept only when it is plausible for
the real parameter count (otherwise "8B" in a tiny model's name is taken for a context length and goes
to the finetune). Without one, the label is computed from the parameter counts ("1.0M", "8x7.2B").
"""
from __future__ import annotations

import json
import logging
import math
import re
import struct
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from .errors import CheckpointError, shown
from .gguf_layout import KV, ValueType, inferred_type

logger = logging.getLogger(__name__)


class MetadataError(CheckpointError, ValueError):
    """A model card, config.json or generation_config.json value the converter cannot write either."""


# --------------------------------------------------------------------------------------------------
# Parameter counts and the size label


def parameter_counts(tensors: Iterable[tuple[str, tuple[int, ...]]]) -> tuple[int, int, int, int]:
    """(total, shared, expert, expert_count) over the GGUF tensors, as GGUFWriter counts them.

    `tensors` are (GGUF name, element shape in numpy order, outermost first). A tensor is an expert
    stack when its name holds "_exps." and it has at least 3 dims; its expert count is the dim before
    the last two (before the last one for a ".bias"), and `expert` counts one expert's share.
    `expert_count` is the mean count over expert stacks (0 without any). LoRA pairs are not handled.
    """
    total = shared = expert = 0
    expert_sum = expert_tensors = 0
    for name, shape in tensors:
        size = math.prod(shape)
        if "_exps." in name and len(shape) >= 3:
            count = shape[-2] if ".bias" in name else shape[-3]
            if count <= 0:
                raise ValueError(f"tensor {name!r} of shape {tuple(shape)} has no experts to count")
            expert += size // count
            expert_sum += count
            expert_tensors += 1
        else:
            shared += size
        total += size
    return total, shared, expert, (expert_sum // expert_tensors if expert_tensors else 0)


def _rounded_count(count: int) -> str:
    """A parameter count with at least two significant digits and a K/M/B/T suffix."""
    # The converter scales by multiplying with 1e-N (not dividing): keep that for identical rounding.
    for limit, scale, suffix in ((1e12, 1e-12, "T"), (1e9, 1e-9, "B"), (1e6, 1e-6, "M")):
        if count > limit:
            break
    else:
        scale, suffix = 1e-3, "K"
    scaled = count * scale
    decimals = max(2 - len(str(round(scaled)).lstrip("0")), 0)
    return f"{scaled:.{decimals}f}{suffix}"


def size_label(total_params: int, shared_params: int, expert_params: int, expert_count: int) -> str:
    """"1.0M", "8B", or for mixtures of experts "<count>x<shared + one expert>" ("8x7.2B")."""
    if expert_count > 0:
        return f"{expert_count}x{_rounded_count(abs(shared_params) + abs(expert_params))}"
    return _rounded_count(abs(total_params))


# --------------------------------------------------------------------------------------------------
# Model ids ("org/Name-Size-Finetune-Version") split into their parts


class IdParts(NamedTuple):
    name: str | None          # the id without its organisation, as written
    organization: str | None
    basename: str | None
    finetune: str | None
    version: str | None
    size_label: str | None


_VERSION = re.compile(r"(v|iter)?\d+(\.\d+)*", re.IGNORECASE)
_QUANT_TYPE = re.compile(r"i?q\d(_\w)*|b?fp?(16|32)", re.IGNORECASE)
_SIZE = re.compile(r"(([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl)", re.IGNORECASE)
_FINETUNE_WORD = re.compile(r"chat|instruct|vision|lora", re.IGNORECASE)
_KEEP_CASE = re.compile(r"^(v\d+(?:\.\d+)*|\d.*)$")


def _normalized_size(part: str, total_params: int, kinds: set[str]) -> str:
    part = part.replace("_", ".")
    if part[-1].isdecimal():  # bloom's "7b1" means 7.1B
        part = part[:-2] + "." + part[-1] + part[-2]
    if len(part) > 1 and part[-2].isdecimal() and part[-1] in "kmbt":
        part = part[:-1] + part[-1].upper()
    if total_params != 0:
        try:
            label_params = float(part[:-1]) * 1000 ** " KMBT".find(part[-1])
        except ValueError:
            label_params = None  # "8x7B", "small": kept as a label as they are
        if label_params is not None and (
                (total_params < 0 and label_params < abs(total_params) // 8)
                or (total_params > 0 and abs(label_params - total_params) > 7 * total_params // 8)):
            # Far from the real size: the converter reads it as a context length ("32k").
            kinds.add("finetune")
            part = part[:-1] + part[-1].lower()
    if not kinds:
        kinds.add("size_label")
    return part


def model_id_components(model_id: str | None, total_params: int = 0) -> IdParts:
    """Split a Hugging Face style id or directory name into the converter's name parts."""
    if model_id is None:
        return IdParts(None, None, None, None, None, None)
    if " " in model_id:  # a plain human name, not an id
        return IdParts(model_id, None, None, None, None, None)
    org: str | None
    if "/" in model_id:
        org, full_name = model_id.split("/", 1)
        if org.startswith("."):  # "./model", "../model" are paths, not organisations
            org = None
    else:
        org, full_name = None, model_id

    parts = [p for p in full_name.split("-") if p]
    kinds: list[set[str]] = [set() for _ in parts]
    for i, part in enumerate(parts):
        if _VERSION.fullmatch(part):
            kinds[i].add("version")
        elif _QUANT_TYPE.fullmatch(part):
            kinds[i].add("type")
            parts[i] = part.upper()
        elif i > 0 and _SIZE.fullmatch(part):
            parts[i] = _normalized_size(part, total_params, kinds[i])
        elif i > 0 and _FINETUNE_WORD.fullmatch(part):
            kinds[i].add("type" if total_params < 0 and part.lower() == "lora" else "finetune")

    # Word sizes ("small", "xl") give way to a numeric size when there is one.
    if any(ch.isdecimal() for p, k in zip(parts, kinds) if "size_label" in k for ch in p):
        for p, k in zip(parts, kinds):
            if "size_label" in k and p.isalpha():
                k.discard("size_label")

    # The basename is the leading run of plain words and versions; later plain words are finetunes.
    leading = True
    for p, k in zip(parts, kinds):
        if leading and ((not k and p[0].isalpha()) or "version" in k):
            k.add("basename")
        else:
            leading = False
            if not k:
                k.add("finetune")
    # A version that ends the whole id is a version, not part of the basename.
    for k in reversed(kinds):
        if "basename" in k and len(k) > 1:
            k.discard("basename")
        else:
            break

    def joined(keep) -> str | None:
        return "-".join(p for p, k in zip(parts, kinds) if keep(k)) or None

    basename = joined(lambda k: "basename" in k)
    size = "-".join(dict.fromkeys(p for p, k in zip(parts, kinds) if "size_label" in k)) or None
    finetune = joined(lambda k: "finetune" in k)
    version = joined(lambda k: "version" in k and "basename" not in k)
    if size is None and finetune is None and version is None:
        basename = None  # nothing else recognised: too ambiguous to call it a basename
    return IdParts(full_name, org, basename, finetune, version, size)


def title_case(name: str) -> str:
    """"meta-llama" -> "Meta Llama"; all-lowercase words are capitalised except versions and sizes."""
    return " ".join(w.title() if w.islower() and not _KEEP_CASE.match(w) else w
                    for w in name.strip().replace("-", " ").split())


# --------------------------------------------------------------------------------------------------
# Reading the directory


def read_model_card(model_dir: Path) -> dict[str, Any]:
    """README.md's YAML front matter as a dict ({} without one), read as the converter reads it."""
    path = model_dir / "README.md"
    if not model_dir.is_dir() or not path.is_file():
        return {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise MetadataError(f"{path}: cannot be read as UTF-8 text ({e}); the converter fails on it too. "
                            "Fix or remove the file.") from e
    # Front matter: a first line that is exactly "---", up to the next "---" line (or the end).
    if not lines or lines[0] != "---":
        return {}
    body: list[str] = []
    for line in lines[1:]:
        if line == "---":
            break
        body.append(line)
    text = "\n".join(body) + "\n"
    # The converter's two fix-ups before parsing: the language code "no" must stay a string (YAML 1.1
    # reads a bare `no` as false), and tabs are taken for two-space indentation.
    text = text.replace("- no\n", '- "no"\n').replace("\t", "  ")
    try:
        import yaml  # PyYAML: the converter's parser; installed with huggingface_hub and gguf
    except ImportError as e:
        raise MetadataError(f"{path} has YAML front matter and reading it needs PyYAML (pip install pyyaml)") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise MetadataError(f"{path}: the YAML front matter does not parse ({e}); llama.cpp's converter fails "
                            "on it too. Fix the front matter between the '---' lines.") from e
    if not isinstance(data, dict):
        logger.warning("%s: the front matter is a %s, not a mapping; ignored as the converter ignores it",
                       path, type(data).__name__)
        return {}
    return data


def _read_json(path: Path, *, tolerate_invalid: bool) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, OSError) as e:
        if tolerate_invalid:  # the converter skips an unreadable generation_config.json
            logger.warning("%s: not valid JSON (%s); ignored as the converter ignores it", path, e)
            return {}
        raise MetadataError(f"{path}: not valid JSON ({e})") from e
    except UnicodeDecodeError as e:
        raise MetadataError(f"{path}: not UTF-8 text ({e}); the converter fails on it too") from e
    except (ValueError, RecursionError) as e:  # a number past Python's 4300 digits, nesting past its stack
        raise MetadataError(f"{path}: not JSON Python can read ({str(e)[:100]}); the converter fails on it too") from e
    if not isinstance(data, dict):
        if tolerate_invalid and not data:
            return {}
        raise MetadataError(f"{path}: expected a JSON object, found {type(data).__name__}; "
                            "the converter fails on it too")
    return data


# --------------------------------------------------------------------------------------------------
# Gathering the fields


class _Field(NamedTuple):
    value: Any
    origin: str  # where the value came from, for error messages


# (field, README.md front-matter keys in the order the converter tries them: the first non-null wins)
_CARD_FIELDS = (
    ("name", ("name", "model_name")),
    ("author", ("author", "model_author", "model_creator")),
    ("version", ("version", "model_version")),
    ("organization", ("organization", "model_organization")),
    ("description", ("description", "model_description")),
    ("finetune", ("finetune", "model_finetune")),
    ("basename", ("basename", "model_basename", "model_type")),
    ("size_label", ("size_label", "model_size_label")),
    ("source_url", ("url", "model_url")),
    ("source_doi", ("doi", "model_doi")),
    ("source_uuid", ("uuid", "model_uuid")),
    ("source_repo_url", ("repo_url", "model_repo_url")),
    ("license", ("license",)),
    ("license_name", ("license_name",)),
    ("license_link", ("license_link",)),
)
# (field, front-matter keys appended in order: a string adds one item, a list adds its items)
_CARD_LISTS = (("tags", ("tags", "pipeline_tag")), ("languages", ("languages", "language")))
# (field, front-matter keys: the first one present is the list of sources, ids or URLs)
_CARD_SOURCES = (("base_models", ("base_model", "base_models", "base_model_sources")),
                 ("datasets", ("datasets", "dataset", "dataset_sources")))

_HF_URL = re.compile(r"https?://huggingface.co/([^/]+/[^/]+)$")
_URL_PREFIXES = ("http://", "https://", "ssh://")


def _source_entry(item: Any, total_params: int, origin: str) -> dict[str, Any]:
    """One base model or dataset: an id ("org/Name-7B"), a URL, or a mapping taken as it is."""
    if isinstance(item, dict):
        return item
    if not isinstance(item, str):
        logger.warning("%s: entry %r is neither an id, a URL nor a mapping; written as an empty entry, "
                       "as the converter does", origin, item)
        return {}
    entry: dict[str, Any] = {}
    if item.startswith(_URL_PREFIXES):
        entry["repo_url"] = item
        match = _HF_URL.match(item) if "huggingface.co" in item else None
        if match is None:
            return entry
        parts = model_id_components(match.group(1), total_params)
    else:
        parts = model_id_components(item, total_params)
    if parts.name is not None:
        entry["name"] = title_case(parts.name)
    if parts.organization is not None:
        entry["organization"] = title_case(parts.organization)
    if parts.version is not None:
        entry["version"] = parts.version
    if not item.startswith(_URL_PREFIXES) and parts.organization is not None and parts.name is not None:
        entry["repo_url"] = f"https://huggingface.co/{parts.organization}/{parts.name}"
    return entry


def _gather(model_dir: Path, card: dict[str, Any], hf_params: dict[str, Any],
            total_params: int) -> dict[str, _Field]:
    fields: dict[str, _Field] = {}

    def set_if_unset(field: str, value: Any, origin: str) -> None:
        if fields.get(field, _Field(None, "")).value is None:
            fields[field] = _Field(value, origin)

    card_origin = f"{model_dir / 'README.md'} front matter"
    for field, keys in _CARD_FIELDS:
        for key in keys:
            if key in card:
                set_if_unset(field, card[key], f"{card_origin} key {key!r}")

    for field, keys in _CARD_SOURCES:
        present = [k for k in keys if k in card]
        if not present:
            continue
        origin = f"{card_origin} key {present[0]!r}"
        value = card[present[0]]
        items = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []
        fields[field] = _Field([_source_entry(item, total_params, origin) for item in items], origin)

    for field, keys in _CARD_LISTS:
        for key in keys:
            value = card.get(key)
            if value is None:
                continue
            items = fields[field].value if field in fields else []
            if isinstance(value, str):
                items.append(value)
            elif isinstance(value, list):
                items.extend(value)
            if field not in fields:
                fields[field] = _Field(items, f"{card_origin} key {key!r}")

    # Then config.json's `_name_or_path` (when it looks like an id, not a local path), then the directory
    # name: each fills only what is still unset.
    name_or_path = hf_params.get("_name_or_path")
    if name_or_path is not None and not isinstance(name_or_path, str):
        raise MetadataError(f"{model_dir / 'config.json'}: '_name_or_path' is {shown(name_or_path)}, not a string; "
                            "the converter fails on it too")
    ids = []
    if name_or_path is not None and name_or_path.count("/") <= 1:
        ids.append((name_or_path, "config.json _name_or_path"))
    ids.append((model_dir.name, "the directory name"))
    for model_id, origin in ids:
        parts = model_id_components(model_id, total_params)
        if parts.name is not None:
            set_if_unset("name", title_case(parts.name), origin)
        if parts.organization is not None:
            set_if_unset("organization", title_case(parts.organization), origin)
        for field in ("basename", "finetune", "version", "size_label"):
            if getattr(parts, field) is not None:
                set_if_unset(field, getattr(parts, field), origin)
    return fields


# --------------------------------------------------------------------------------------------------
# Writing the entries

_SAMPLING = (  # (generation_config.json keys, the first present wins even when null; key suffix; type)
    (("sequence",), "sequence", ValueType.STRING),
    (("top_k",), "top_k", ValueType.INT32),
    (("top_p",), "top_p", ValueType.FLOAT32),
    (("min_p",), "min_p", ValueType.FLOAT32),
    (("xtc_probability",), "xtc_probability", ValueType.FLOAT32),
    (("xtc_threshold",), "xtc_threshold", ValueType.FLOAT32),
    (("temperature",), "temp", ValueType.FLOAT32),
    (("penalty_last_n",), "penalty_last_n", ValueType.INT32),
    (("penalty_repeat", "repetition_penalty"), "penalty_repeat", ValueType.FLOAT32),
    (("mirostat",), "mirostat", ValueType.INT32),
    (("mirostat_tau",), "mirostat_tau", ValueType.FLOAT32),
    (("mirostat_eta",), "mirostat_eta", ValueType.FLOAT32),
)
_AUTHORSHIP = (  # (field, key), after general.name, in the converter's order
    ("author", "general.author"), ("version", "general.version"), ("organization", "general.organization"),
    ("finetune", "general.finetune"), ("basename", "general.basename"),
    ("description", "general.description"), ("size_label", "general.size_label"),
    ("license", "general.license"), ("license_name", "general.license.name"),
    ("license_link", "general.license.link"),
    ("source_url", "general.source.url"), ("source_doi", "general.source.doi"),
    ("source_uuid", "general.source.uuid"), ("source_repo_url", "general.source.repo_url"),
)
_ENTRY_KEYS = ("name", "author", "version", "organization", "description", "url", "doi", "uuid", "repo_url")
_NUMBER_FORMAT = {ValueType.INT32: "<i", ValueType.FLOAT32: "<f"}


def _string_kv(key: str, value: Any, origin: str) -> KV | None:
    if not value:  # gguf-py's add_string drops empty (and any falsy) values
        return None
    if not isinstance(value, (str, bytes)):
        raise MetadataError(f"{origin} is {type(value).__name__} {shown(value)}, not a string, so it cannot become "
                            f"{key}; llama.cpp's converter fails on it too. Quote the value.")
    return KV(key, ValueType.STRING, value)


def _number_kv(key: str, vtype: ValueType, value: Any, origin: str) -> KV:
    try:
        struct.pack(_NUMBER_FORMAT[vtype], value)
    except (struct.error, TypeError, OverflowError) as e:
        raise MetadataError(f"{origin} is {shown(value)}: cannot be written as {vtype.name} {key} ({e}); "
                            "llama.cpp's converter fails on it too") from e
    # bools pass as ints, ints as floats, exactly as struct packs them: store the packed value's type
    return KV(key, vtype, int(value) if vtype == ValueType.INT32 else float(value))


def _array_kv(key: str, items: list, origin: str) -> KV | None:
    if not items:  # gguf-py's add_array drops empty arrays
        return None
    try:
        item_types = {inferred_type(item) for item in items}
    except TypeError as e:
        raise MetadataError(f"{origin}: {e}; {key} can only hold strings or numbers") from e
    if len(item_types) > 1:
        raise MetadataError(f"{origin}: items of mixed types {shown(items)} cannot form the array {key}; "
                            "llama.cpp's converter fails on it too. Quote the items.")
    (item_type,) = item_types
    if item_type == ValueType.ARRAY:
        # The converter would write an array of arrays, which llama.cpp's GGUF reader refuses.
        raise MetadataError(f"{origin}: nested lists {shown(items)} cannot form the array {key}")
    if item_type in _NUMBER_FORMAT:
        for item in items:
            _number_kv(key, item_type, item, origin)
    return KV(key, ValueType.ARRAY, list(items), item_type)


def _source_kvs(kind: str, entries: list[dict[str, Any]], origin: str) -> list[KV]:
    kvs = [KV(f"general.{kind}.count", ValueType.UINT32, len(entries))]
    for i, entry in enumerate(entries):
        for field in _ENTRY_KEYS:
            if field in entry:
                kv = _string_kv(f"general.{kind}.{i}.{field}", entry[field], f"{origin} entry {i} {field!r}")
                if kv is not None:
                    kvs.append(kv)
    return kvs


def general_kv(model_dir: Path, *, total_params: int, shared_params: int, expert_params: int,
               expert_count: int, model_name: str | None = None) -> list[KV]:
    """The general.* entries the converter writes after general.architecture and general.type.

    `model_dir` is the directory as the converter would be given it: its last component is the name
    of last resort. The counts are `parameter_counts` over the GGUF tensors. `model_name` mirrors the
    converter's --model-name. Order: general.sampling.*, name, author, version, organization, finetune,
    basename, description, size_label, license…, source.*, base_model.*, dataset.*, tags, languages.
    """
    model_dir = Path(model_dir)
    card = read_model_card(model_dir)
    hf_params = _read_json(model_dir / "config.json", tolerate_invalid=False) if model_dir.is_dir() else {}
    gen_path = model_dir / "generation_config.json"
    gen_config = _read_json(gen_path, tolerate_invalid=True) if model_dir.is_dir() else {}

    fields = _gather(model_dir, card, hf_params, total_params)
    if model_name is not None:
        fields["name"] = _Field(model_name, "the model name given")
    if fields.get("name", _Field(None, "")).value is None:
        fields["name"] = _Field(model_dir.name, "the directory name")
    if fields.get("size_label", _Field(None, "")).value is None and total_params > 0:
        fields["size_label"] = _Field(size_label(total_params, shared_params, expert_params, expert_count),
                                      "the parameter count")

    kvs: list[KV | None] = []
    for keys, suffix, vtype in _SAMPLING:
        present = next((k for k in keys if k in gen_config), None)
        value = gen_config[present] if present is not None else None
        if value is None:
            continue
        key, origin = f"general.sampling.{suffix}", f"{gen_path} key {present!r}"
        kvs.append(_string_kv(key, value, origin) if vtype == ValueType.STRING
                   else _number_kv(key, vtype, value, origin))

    kvs.append(_string_kv("general.name", fields["name"].value, fields["name"].origin))
    for field, key in _AUTHORSHIP:
        value, origin = fields.get(field, _Field(None, ""))
        if value is None:
            continue
        if field == "license" and isinstance(value, list):  # several licences: comma-joined
            if not all(isinstance(v, str) for v in value):
                raise MetadataError(f"{origin}: licences {shown(value)} must all be strings")
            value = ",".join(value)
        kvs.append(_string_kv(key, value, origin))

    for field, kind in (("base_models", "base_model"), ("datasets", "dataset")):
        if field in fields:
            kvs.extend(_source_kvs(kind, fields[field].value, fields[field].origin))
    for field, key in (("tags", "general.tags"), ("languages", "general.languages")):
        if field in fields:
            kvs.append(_array_kv(key, fields[field].value, fields[field].origin))
    return [kv for kv in kvs if kv is not None]
