"""Model resolution: turn `--model [--revision]` into a checkpoint directory hfview can run.

An existing directory is a local checkpoint and never touches the network. Anything else is a Hugging
Face Hub repository id, fetched through huggingface_hub's cache. On the Hub the config is fetched first
and the architecture gate and the quantized-checkpoint refusal run on it before anything else is
downloaded: a checkpoint this build cannot run costs its config, not its shards.

Public API: `resolve`, `local_dir`, `ResolvedModel`, `read_config`, `merge_text_config`, `gate`, `refuse_quantized`,
`torch_supports`. Every refusal is a `runner.errors.HfviewError` whose message says what to do.
"""
from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlparse

from hfview.config import merge_text_config, read_config  # noqa: F401 (public here too)
from hfview.quantized import refuse_quantized  # noqa: F401 (public here too)
from hfview.shards import is_candidate_weight, select_weights
from hfview.runner.errors import (
    HubError,
    NotInView,
    ModelDirectoryError,
    TokenizerError,
    UnsupportedArchitecture,
    WeightsError,
)

Format = Literal["transformers", "mistral", "gguf"]
Backend = Literal["view", "torch"]

# Files that sit beside a checkpoint's weights and matter to its tokenizer (the converter's vocab
# routines and SpecialVocab read these). A Hub download fetches those the repository publishes.
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "tokenizer.jsonl", "tiktoken.model",
    "qwen.tiktoken", "tekken.json", "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt",
    "chat_template.jinja", "chat_template.json",
)
# Small metadata files the converter reads besides config and tokenizer (model card, generation
# defaults, the shard index, ModelOpt's quantization record).
METADATA_FILES = ("generation_config.json", "README.md", "model.safetensors.index.json", "hf_quant_config.json")

_COMMIT_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class ResolvedModel:
    """A checkpoint found and checked, ready for the view (or the torch fallback)."""

    model: str                          # --model as given
    path: Path                          # the checkpoint directory (for the Hub: the cache snapshot)
    source: Literal["local", "hub"]
    repo_id: str | None                 # Hub repository id; None for a local directory
    revision_requested: str | None      # --revision as given
    model_revision: str | None          # Hub: resolved commit SHA; local: --revision verbatim, else None
    config_path: Path                   # config.json, or params.json for Mistral's own format
    config: dict[str, Any]              # parsed, text_config merged over the top level
    raw_config: dict[str, Any]          # parsed as the file states it (non-finite numbers unstated)
    format: Format
    weight_files: list[Path]            # sorted by name; for "gguf" the one .gguf file
    tokenizer_kind: str                 # huggingface | sentencepiece | tiktoken | plamo | tekken
    tokenizer_files: list[Path]         # every tokenizer-related file present
    backend: Backend                    # "view": llama.cpp (the view, or the .gguf itself); "torch"
    family: str | None = None           # the model_type (or architectures entry) the gate admitted


def resolve(model: str, *, revision: str | None = None, progress: bool = True,
            require: Backend | None = None) -> ResolvedModel:
    """Resolve `--model` (a directory or a Hub id) at `--revision`; raise an HfviewError to refuse.
    `require="view"`: refuse (NotInView) a family only transformers runs, before any weight download."""
    local = Path(model).expanduser()
    if local.is_dir():
        return _resolve_local(model, local.absolute(), revision, require)
    return _resolve_hub(model, revision, progress, require)


def local_dir(model: str, revision: str | None) -> tuple[Path, str | None]:
    """(directory, model revision) of MODEL for the commands that build a view: an existing directory as is,
    anything else resolved as a Hub id (the architecture gate and quantized refusal run before any weight is
    downloaded)."""
    if Path(model).is_dir():
        return Path(model), revision
    resolved = resolve(model, revision=revision)
    return resolved.path, resolved.model_revision


# ----------------------------------------------------------------------------------------------
# Config: reading, merging, the architecture gate, the quantized-checkpoint refusal


def _family_key(config: dict[str, Any]) -> str | None:
    """model_type, or for a family whose config has none, its first architectures entry."""
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type:
        return model_type
    archs = config.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return None


def _mistral_format_family(params: dict[str, Any]) -> str:
    """The Transformers family a Mistral params.json is read as (vLLM's reading): a dense model is
    mistral; latent attention with experts (Mistral Large 3) is deepseek_v3."""
    return "deepseek_v3" if params.get("moe") is not None else "mistral"


def _view_families() -> list[str]:
    from hfview.families import supported_model_types

    return list(supported_model_types())


def _transformers_version() -> str | None:
    try:
        import transformers
    except Exception:  # noqa: BLE001 - any failure to import means "not available"
        return None
    return getattr(transformers, "__version__", "?")


def torch_supports(config: dict[str, Any]) -> bool:
    """Whether the torch backend can run this config: transformers is importable, its CONFIG_MAPPING
    knows the model_type, and architectures[0] is a text-generation class transformers ships.
    Remote code (auto_map) is never considered. transformers is imported only here, lazily."""
    try:
        import transformers
        from transformers.models.auto import modeling_auto
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    except Exception:  # noqa: BLE001 - the torch extra is optional
        return False
    model_type = config.get("model_type")
    archs = config.get("architectures")
    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        return False
    if not (isinstance(archs, list) and archs and isinstance(archs[0], str)):
        return False
    arch = archs[0]
    generative: set[str] = set()
    for mapping in ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"):
        for names in getattr(modeling_auto, mapping, {}).values():
            generative.update([names] if isinstance(names, str) else names)
    return arch in generative and arch in dir(transformers)


def gate(config: dict[str, Any], config_path: Path) -> Backend:
    """The architecture gate: the backend that runs this config, or UnsupportedArchitecture.

    `config` is the config as parsed (a multimodal config's text_config is merged here; an already
    merged config works too). Mistral's params.json (config_path named params.json) is gated as the
    family it is read as."""
    config_path = Path(config_path)
    if config_path.name == "params.json" and "model_type" not in config:
        candidates = [_mistral_format_family(config)]
    else:
        candidates = [_family_key(merge_text_config(config)), _family_key(config)]
    view = _view_families()
    for candidate in candidates:
        if candidate is not None and candidate in view:
            return "view"
    if config_path.name != "params.json" and torch_supports(config):
        return "torch"
    raise UnsupportedArchitecture(_unsupported_message(config, config_path, candidates[0], view))


def _gate_for(config: dict[str, Any], config_path: Path, require: Backend | None) -> Backend:
    """The gate, and a refusal where the caller needs llama.cpp and only transformers runs the family."""
    backend = gate(config, config_path)
    if require == "view" and backend != "view":
        family = _admitted_family(config, config_path)
        raise NotInView(f"{config_path}: family {family!r} is not covered by hfview's view, so llama.cpp cannot "
                        f"run it through hfview; transformers can (drop --backend llama.cpp, or pass --backend "
                        f"torch)", family=family, config_path=config_path)
    return backend


def _unsupported_message(config: dict[str, Any], config_path: Path, key: str | None, view: list[str]) -> str:
    version = _transformers_version()
    if version is None:
        torch_part = ("; or install the torch extra (pip install 'hfview[torch]') to run a family that "
                      "transformers implements")
    else:
        torch_part = f", or one that transformers {version} implements (run through torch, without remote code)"
    merged = merge_text_config(config)
    if isinstance(merged.get("model_type"), str) and merged.get("model_type"):
        stated = f'{config_path} states model_type "{merged["model_type"]}"'
    elif key is not None:
        stated = f'{config_path} states no model_type and architectures ["{key}"]'
    else:
        stated = f"{config_path} states neither model_type nor architectures"
    if config.get("auto_map"):
        stated += " and asks for remote code (auto_map), which hfview never runs"
    shown = "null" if key is None else key
    from hfview.families import NOT_COMPUTABLE
    why = f" {merged['model_type']}: {NOT_COMPUTABLE[merged['model_type']]}." \
        if isinstance(merged.get("model_type"), str) and merged["model_type"] in NOT_COMPUTABLE else ""
    return (f'model architecture "{shown}" is unsupported by this hfview build; use a Hugging Face checkpoint '
            f"whose model_type is one of {', '.join(view)} (read by llama.cpp){torch_part}. ({stated})" + why)


# quant_method -> how users know the method
# ----------------------------------------------------------------------------------------------
# What a checkpoint directory holds: weights and tokenizer


def _find_tokenizer(names: set[str], fmt: Format) -> tuple[str, str] | None:
    """(kind, primary file) of the tokenizer the converter would read, judged by file names only;
    a tokenizer.model's kind is settled later by _check_tokenizer."""
    if fmt == "mistral":
        if "tekken.json" in names:
            return "tekken", "tekken.json"
        spm = sorted(n for n in names if n == "tokenizer.model" or n.startswith("tokenizer.model.v"))
        return ("sentencepiece", spm[-1]) if spm else None
    for name, kind in (("tokenizer.json", "huggingface"), ("tokenizer.jsonl", "plamo"),
                       ("tokenizer.model", "sentencepiece"), ("tiktoken.model", "tiktoken"),
                       ("qwen.tiktoken", "tiktoken")):  # Qwen-1's ranks
        if name in names:
            return kind, name
    return None


def _tokenizer_related(names: set[str]) -> list[str]:
    return sorted(n for n in names if n in TOKENIZER_FILES or n.startswith("tokenizer.model.v"))


_TOKENIZER_HELP = ("the directory needs tokenizer.json (or tokenizer.model: SentencePiece, or tiktoken "
                   "named by tokenizer_config.json's ChatGLM4Tokenizer/TikTokenTokenizer; or tiktoken.model, "
                   "Qwen-1's qwen.tiktoken, PLaMo's tokenizer.jsonl) beside config.json; copy the base model's "
                   "tokenizer files there")


def _check_tokenizer(directory: Path, kind: str, primary: str) -> str:
    """Load-check the tokenizer file; return its settled kind or raise TokenizerError."""
    path = directory / primary
    try:
        if kind == "huggingface":
            from tokenizers import Tokenizer

            Tokenizer.from_file(str(path))
        elif kind == "plamo":
            with open(path, encoding="utf-8") as lines:
                for number, line in enumerate(lines, 1):
                    if line.strip() and not isinstance(json.loads(line), list):
                        raise ValueError(f"line {number} is not a JSON array")
        elif kind == "tekken":
            if not isinstance(json.loads(path.read_text(encoding="utf-8")), dict):
                raise ValueError("not a JSON object")
        elif kind == "tiktoken":
            _check_tiktoken(path)
        else:  # tokenizer.model: tiktoken when tokenizer_config.json names such a class, else SentencePiece
            tokenizer_class = _tokenizer_class(directory)
            if tokenizer_class in ("ChatGLM4Tokenizer", "TikTokenTokenizer"):
                _check_tiktoken(path)
                return "tiktoken"
            import sentencepiece

            processor = sentencepiece.SentencePieceProcessor()
            try:
                processor.LoadFromFile(str(path))
            except Exception as err:  # noqa: BLE001 - sentencepiece raises bare RuntimeError/OSError
                raise ValueError(f"not a SentencePiece model ({err}); a tiktoken tokenizer.model needs "
                                 "tokenizer_config.json to name ChatGLM4Tokenizer or TikTokenTokenizer") from err
    except TokenizerError:
        raise
    except Exception as err:  # noqa: BLE001 - every loader failure becomes one refusal naming the file
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise TokenizerError(f"failed to load tokenizer {path}: {detail}; re-download it or copy the base "
                             "model's tokenizer files") from err
    return kind


def _tokenizer_class(directory: Path) -> str | None:
    path = directory / "tokenizer_config.json"
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("tokenizer_class")
    except (OSError, ValueError, AttributeError) as err:
        raise TokenizerError(f"failed to load tokenizer {path}: {err}; fix or re-download "
                             "tokenizer_config.json") from err
    return value if isinstance(value, str) else None


def _check_tiktoken(path: Path) -> None:
    """A tiktoken rank file: one `<base64 token> <rank>` per line."""
    with open(path, "rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                raise ValueError(f"line {number} is not '<base64 token> <rank>'")
            base64.b64decode(parts[0], validate=True)


def _mapping_problem(path: Path) -> str | None:
    """Why a weight file cannot be mapped (a light header check; the view does the full one)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            if path.suffix == ".gguf":
                return None if handle.read(4) == b"GGUF" else "not a GGUF file (no GGUF magic)"
            head = handle.read(8)
            if len(head) < 8:
                return f"{size} bytes, shorter than a safetensors header"
            length = int.from_bytes(head, "little")
            if length > size - 8:
                return f"header length {length} runs past the end of the file ({size} bytes): truncated"
            header = json.loads(handle.read(length))
    except OSError as err:
        return err.strerror or str(err)
    except ValueError as err:
        return f"header is not JSON ({err})"
    if not isinstance(header, dict):
        return "header is not a JSON object"
    data = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__" or not isinstance(entry, dict):
            continue
        offsets = entry.get("data_offsets")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            return f"tensor {name} has no valid data_offsets"
        if offsets[1] > data:
            return f"tensor {name} ends at byte {offsets[1]} of {data} data bytes: truncated"
    return None


def _check_mappable(files: list[Path]) -> None:
    problems = [f"{p.name}: {why}" for p in files if (why := _mapping_problem(p)) is not None]
    if problems:
        raise WeightsError(f"failed to map {len(files)} model weight files: {'; '.join(problems)}; "
                           "re-download or re-export the damaged files")


# ----------------------------------------------------------------------------------------------
# Local directory


def _resolve_local(model: str, directory: Path, revision: str | None, require: Backend | None) -> ResolvedModel:
    try:
        with os.scandir(directory) as entries:
            names = {entry.name for entry in entries if entry.is_file()}
    except OSError as err:
        raise ModelDirectoryError(f"failed to list {directory}: {err.strerror or err}; check that the "
                                  "directory exists and is readable") from err

    if "config.json" in names:
        fmt: Format = "transformers"
        config_path = directory / "config.json"
    elif "params.json" in names:
        fmt, config_path = "mistral", directory / "params.json"
    else:
        config_path = directory / "config.json"
        if config_path.exists():  # present but not a regular file: reading it says why
            read_config(config_path)
        raise ModelDirectoryError(f"model config is missing: {config_path}; put the checkpoint's config.json "
                                  "(or Mistral's params.json) in that directory")

    found = _find_tokenizer(names, fmt)
    if found is None:
        primary = "tekken.json" if fmt == "mistral" else "tokenizer.json"
        raise TokenizerError(f"tokenizer is missing: {directory / primary}; {_TOKENIZER_HELP}")

    weights = select_weights(names, fmt)
    if not weights:
        ggufs = sorted(n for n in names if n.endswith(".gguf"))
        if len(ggufs) > 1:
            raise ModelDirectoryError(
                f"model directory contains no safetensors weights and {len(ggufs)} .gguf files "
                f"({', '.join(ggufs)}) in {directory}; keep exactly one .gguf (the fine-tune to run) beside "
                "the base model's config and tokenizer")
        if ggufs:
            fmt = "gguf"
            weights = ggufs
        else:
            raise ModelDirectoryError(f"model directory contains no safetensors weights: {directory}"
                                      f"{_no_weights_hint(names, fmt)}")

    raw = read_config(config_path)
    if fmt == "gguf":
        backend: Backend = "view"  # llama.cpp runs the .gguf itself; the family gate is its business
    else:
        backend = _gate_for(raw, config_path, require)
        refuse_quantized(raw, config_path)
    kind = _check_tokenizer(directory, *found)
    weight_paths = [directory / n for n in weights]
    _check_mappable(weight_paths)
    return ResolvedModel(
        model=model, path=directory, source="local", repo_id=None, revision_requested=revision,
        model_revision=revision, config_path=config_path, config=merge_text_config(raw), raw_config=raw,
        format=fmt, weight_files=weight_paths, tokenizer_kind=kind,
        tokenizer_files=[directory / n for n in _tokenizer_related(names)], backend=backend,
        family=_admitted_family(raw, config_path))


def _no_weights_hint(names: set[str], fmt: Format) -> str:
    bins = sorted(n for n in names if n.endswith((".bin", ".pt", ".pth")))
    if bins:
        return (f" (it has {', '.join(bins[:3])}{'…' if len(bins) > 3 else ''}: hfview reads safetensors only; "
                "use a safetensors upload of the model)")
    other = [n for n in names if is_candidate_weight(n) and n not in select_weights(names, fmt)]
    if other and fmt == "transformers":
        return (" (consolidated*.safetensors are Mistral's own format, read only with params.json and no "
                "config.json beside them)")
    return "; add the model's top-level *.safetensors files, or exactly one .gguf file"


def _admitted_family(raw: dict[str, Any], config_path: Path) -> str | None:
    if config_path.name == "params.json" and "model_type" not in raw:
        return _mistral_format_family(raw)
    return _family_key(merge_text_config(raw))


# ----------------------------------------------------------------------------------------------
# Hugging Face Hub


def _env_true(name: str) -> bool:
    return (os.environ.get(name) or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


@dataclass(frozen=True)
class _HubSettings:
    endpoint: str
    cache_dir: Path
    offline: bool


def _hub_settings() -> _HubSettings:
    """Read HF_ENDPOINT, HF_HUB_CACHE/HF_HOME and HF_HUB_OFFLINE now (huggingface_hub reads them once,
    at import), so the values in force when resolution runs are the ones honoured."""
    try:
        from huggingface_hub import constants
    except Exception as err:  # noqa: BLE001
        raise HubError(f"failed to initialize Hugging Face Hub client: huggingface_hub cannot be imported ({err}); "
                       "reinstall hfview's dependencies") from err
    endpoint = (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
    parsed = urlparse(endpoint)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise HubError(f"failed to initialize Hugging Face Hub client: HF_ENDPOINT={endpoint!r} is not an "
                       "http(s) URL; unset it or set it to the Hub's address (https://huggingface.co)")
    if os.environ.get("HF_HUB_CACHE"):
        cache = Path(os.environ["HF_HUB_CACHE"])
    elif os.environ.get("HF_HOME"):
        cache = Path(os.environ["HF_HOME"]) / "hub"
    else:
        cache = Path(constants.HF_HUB_CACHE)
    cache = cache.expanduser()
    offline = _env_true("HF_HUB_OFFLINE") or _env_true("TRANSFORMERS_OFFLINE") or bool(constants.HF_HUB_OFFLINE)
    if not offline:
        try:
            cache.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise HubError(f"failed to initialize Hugging Face Hub client: cannot create the cache directory "
                           f"{cache} ({err.strerror or err}); set HF_HOME to a writable directory") from err
        if not os.access(cache, os.W_OK):
            raise HubError(f"failed to initialize Hugging Face Hub client: the cache directory {cache} is not "
                           "writable; set HF_HOME to a writable directory")
    return _HubSettings(endpoint=endpoint, cache_dir=cache, offline=offline)


def _storage(settings: _HubSettings, repo_id: str) -> Path:
    # huggingface_hub's documented cache layout: models--{namespace}--{name}/{refs,blobs,snapshots}
    return settings.cache_dir / ("models--" + repo_id.replace("/", "--"))


def _cached_commit(storage: Path, revision: str) -> str | None:
    if _COMMIT_SHA.fullmatch(revision):
        return revision if (storage / "snapshots" / revision).is_dir() else None
    ref = storage / "refs" / revision
    try:
        sha = ref.read_text().strip()
    except OSError:
        return None
    return sha if (storage / "snapshots" / sha).is_dir() else None


def _remember_ref(storage: Path, revision: str, sha: str) -> None:
    """Record revision -> commit in the cache (as huggingface_hub does), so HF_HUB_OFFLINE=1 finds it."""
    if revision == sha:
        return
    try:
        ref = storage / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        if not ref.is_file() or ref.read_text() != sha:
            ref.write_text(sha)
    except OSError:
        pass  # a read-only cache only costs the offline fallback


def _repository_listing(model: str, revision: str, settings: _HubSettings) -> tuple[str, list[str]]:
    """(commit SHA, top-level file names) of the repository at a revision: from the Hub, or from the
    cached snapshot when offline."""
    storage = _storage(settings, model)
    if settings.offline:
        sha = _cached_commit(storage, revision)
        if sha is None:
            raise HubError(f"failed to read model repository {model}: HF_HUB_OFFLINE=1 and the cache "
                           f"{settings.cache_dir} holds no snapshot of revision {revision}; run once online "
                           "(unset HF_HUB_OFFLINE) to download it, or pass a local directory")
        snapshot = storage / "snapshots" / sha
        return sha, sorted(p.name for p in snapshot.iterdir() if p.is_file())

    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        info = HfApi(endpoint=settings.endpoint).model_info(model, revision=revision)
    except GatedRepoError as err:
        raise HubError(f"failed to read model repository {model}: the repository is gated; accept its terms "
                       "on the Hub and set HF_TOKEN to a token of that account") from err
    except RepositoryNotFoundError as err:
        raise HubError(f"failed to read model repository {model}: no such repository on {settings.endpoint} "
                       "(or it is private: set HF_TOKEN); if you meant a local directory, no directory exists "
                       f"at {model}, so fix the path") from err
    except RevisionNotFoundError as err:
        raise HubError(f"failed to read model repository {model}: it has no revision {revision!r}; pass an "
                       "existing branch, tag or commit SHA to --revision") from err
    except Exception as err:  # noqa: BLE001 - network failures come as several httpx/OS error types
        cached = _cached_commit(storage, revision)
        fallback = (f", or set HF_HUB_OFFLINE=1 to run the cached snapshot {cached}" if cached
                    else ", or pass a local directory")
        raise HubError(f"failed to read model repository {model}: cannot reach the Hub at {settings.endpoint} "
                       f"({type(err).__name__}: {_first_line(err)}); check the network connection and HF_ENDPOINT"
                       f"{fallback}") from err
    if not info.sha:
        raise HubError(f"failed to read model repository {model}: the Hub answered without a commit SHA; "
                       "check that HF_ENDPOINT points to a Hugging Face Hub")
    _remember_ref(storage, revision, info.sha)
    names = sorted(s.rfilename for s in (info.siblings or []) if "/" not in s.rfilename)
    return info.sha, names


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _quiet_tqdm():
    from tqdm.auto import tqdm

    class Quiet(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

    return Quiet


def _resolve_hub(model: str, revision: str | None, progress: bool, require: Backend | None) -> ResolvedModel:
    if Path(model).expanduser().exists():
        raise HubError(f"failed to read model repository {model}: {model} is a file, not a model directory; "
                       "pass the directory that holds config.json, the tokenizer and the weights")
    settings = _hub_settings()
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError as err:
        raise HubError(f"failed to read model repository {model}: no directory exists at {model!r} and it is "
                       f"not a valid Hub repository id ({_first_line(err)}); fix the path or the id") from err

    requested = revision or "main"
    sha, names = _repository_listing(model, requested, settings)
    name_set = set(names)
    where = f"{model}@{sha}"

    if "config.json" in name_set:
        fmt: Format = "transformers"
    elif "params.json" in name_set:
        fmt = "mistral"
    else:
        raise ModelDirectoryError(f"model config is missing: {where}/config.json; the repository publishes "
                                  "neither config.json nor Mistral's params.json — use a Transformers checkpoint")
    weights = select_weights(names, fmt)
    if not weights:
        hint = _no_weights_hint(name_set, fmt).replace("it has", "it publishes")
        if any(n.endswith(".gguf") for n in names):
            hint = (" (it publishes .gguf files: download the one you want beside the base model's config and "
                    "tokenizer into a directory and pass that directory)")
        offline = (" in the cached snapshot (HF_HUB_OFFLINE=1: only cached files are visible)"
                   if settings.offline else "")
        raise HubError(f"model {model} publishes no safetensors weights{offline} at {sha}{hint}")
    found = _find_tokenizer(name_set, fmt)
    if found is None:
        primary = "tekken.json" if fmt == "mistral" else "tokenizer.json"
        raise TokenizerError(f"tokenizer is missing: {where}/{primary}; the repository publishes no tokenizer "
                             "the converter can read (tokenizer.json, tokenizer.model, tiktoken.model, "
                             "qwen.tiktoken, tokenizer.jsonl); use a repository that does")

    quiet = _quiet_tqdm()

    def fetch(name: str, bars: bool = False) -> Path:
        try:
            return Path(hf_hub_download(model, name, revision=sha, cache_dir=settings.cache_dir,
                                        endpoint=settings.endpoint, local_files_only=settings.offline,
                                        tqdm_class=None if bars else quiet))
        except Exception as err:  # noqa: BLE001 - HTTP, network and cache errors alike
            if settings.offline:
                why = "it is not in the cache and HF_HUB_OFFLINE=1 forbids downloading; run once online"
            else:
                why = (f"{type(err).__name__}: {_first_line(err)}; retry, and check the network, HF_ENDPOINT "
                       "and HF_TOKEN")
            raise HubError(f"failed to download {name} from {where}: {why}") from err

    # The gate and the quantized-checkpoint refusal run on the config before any other download.
    config_path = fetch("config.json" if fmt == "transformers" else "params.json")
    for record in ("hf_quant_config.json", "quantize_config.json"):  # quantization stated beside the config
        if record in name_set:
            fetch(record)
    raw = read_config(config_path)
    backend = _gate_for(raw, config_path, require)
    refuse_quantized(raw, config_path)

    # the release's own code (top-level *.py) too: the key check reads it as text, never runs it
    small = [n for n in names if n in TOKENIZER_FILES or n.startswith("tokenizer.model.v")
             or (n in METADATA_FILES and not (fmt == "mistral" and n.endswith(".index.json")))
             or (n.endswith(".py") and "/" not in n)]
    for name in small:
        fetch(name)
    snapshot = config_path.parent
    kind = _check_tokenizer(snapshot, *found)

    if settings.offline and "model.safetensors.index.json" in name_set and fmt == "transformers":
        _require_indexed_shards(snapshot / "model.safetensors.index.json", name_set, where)
    weight_paths = [fetch(name, bars=progress) for name in weights]
    _check_mappable(weight_paths)
    return ResolvedModel(
        model=model, path=snapshot, source="hub", repo_id=model, revision_requested=revision,
        model_revision=sha, config_path=config_path, config=merge_text_config(raw), raw_config=raw,
        format=fmt, weight_files=weight_paths, tokenizer_kind=kind,
        tokenizer_files=[snapshot / n for n in _tokenizer_related(name_set)], backend=backend,
        family=_admitted_family(raw, config_path))


def _require_indexed_shards(index: Path, cached: set[str], where: str) -> None:
    """Offline, the snapshot lists only cached files: a shard the index names but the cache lacks was
    never downloaded, and running without it would be a partial model."""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map") or {}
        shards = sorted(set(weight_map.values()))
    except (OSError, ValueError, AttributeError):
        return
    for shard in shards:
        if shard not in cached:
            raise HubError(f"failed to download {shard} from {where}: it is not in the cache and HF_HUB_OFFLINE=1 "
                           "forbids downloading; run once online")
