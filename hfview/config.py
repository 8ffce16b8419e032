"""config.json as the converter sees it.

The converter reads the config through transformers' AutoConfig, so an absent key reads as that config
class's default and legacy rope keys are folded into `rope_parameters`. hfview does the same from plain
data (each family lists its config class's defaults) without importing transformers.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from . import config_values
from .errors import ConfigError, shown


class _AnyValue:
    def __repr__(self) -> str:
        return "ANY"


# In a harmless table: the key changes nothing whatever its value. Otherwise a table lists, as a tuple, the
# values at which the key changes nothing (a flag in its off position); at any other value it is refused.
ANY = _AnyValue()
Harmless = Mapping[str, Any]  # key -> ANY, or the tuple of values that leave the computation unchanged

# Keys that never change a forward pass, whatever the family: what every transformers config carries, and
# what released config.json files add beside it.
COMMON_HARMLESS: Harmless = {
    **dict.fromkeys((
        "architectures", "model_type", "transformers_version", "_name_or_path", "torch_dtype", "dtype",
        "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
        "use_cache", "initializer_range", "attention_dropout", "hidden_dropout", "dropout",
        "output_attentions", "output_hidden_states", "return_dict", "id2label", "label2id", "problem_type",
        "chunk_size_feed_forward", "is_encoder_decoder", "tokenizer_class", "auto_map", "_attn_implementation",
        "_attn_implementation_autoset", "tie_encoder_decoder", "is_decoder", "add_cross_attention",
        "prefix", "task_specific_params", "finetuning_task", "use_bfloat16", "pruned_heads",
        "torchscript", "cross_attention_hidden_size", "tf_legacy_loss", "max_length", "min_length",
        "do_sample", "early_stopping", "num_beams", "temperature", "top_k", "top_p", "typical_p",
        "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "bad_words_ids",
        "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
        "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
        "suppress_tokens", "begin_suppress_tokens", "diversity_penalty", "num_beam_groups",
        "encoder_no_repeat_ngram_size", "output_router_logits", "router_aux_loss_coef", "router_jitter_noise",
        "quantization_config",  # refused separately, with the method named
    ), ANY),
    "internal_version": ANY,  # a training tool's stamp (ALLaM): no config class or modeling code reads it
    # a context-length alias some releases carry (Megrez): no modeling code reads it, and the converter takes it
    # only where max_position_embeddings is absent, as the view's KV does (params.text_model_parameters)
    "max_sequence_length": ANY,
    # Llama's tensor-parallel slicing factor, which Llama-derived configs carry: in transformers 5.24 only
    # BLOOM reads it, to sum the same products in slices
    "pretraining_tp": ANY,
    # configs saved by transformers 2-4 carry these: a training switch (activation checkpointing), the old name
    # of use_cache, and pipeline registration metadata (Dolly): no forward pass reads them
    "gradient_checkpointing": ANY, "output_past": ANY, "custom_pipelines": ANY,
    # flags in their off position: the family computes as if they were false, so false changes nothing;
    # set, each would ask for a computation the view does not present (refused by name with its value)
    "use_mrope": (False,),  # Qwen2.5 text configs: M-RoPE is Qwen2-VL's, which no text family here has
}


class _NonFinite:
    """Stands for Python's Infinity, -Infinity and NaN in a config; such a value is read as unstated."""


_NON_FINITE = _NonFinite()


def _unstate_non_finite(value: Any) -> tuple[Any, bool]:
    """(value without non-finite numbers, whether it is stated at all). A key whose value is or holds
    a non-finite number is dropped, so the config class's default applies (e.g. Mamba-2's
    time_step_limit [0.0, Infinity])."""
    if value is _NON_FINITE:
        return None, False
    if isinstance(value, dict) and set(value) == {"__float__"}:
        # transformers 5 writes a non-finite float as {"__float__": "Infinity"} (e.g. Mamba-2's time_step_limit)
        if value["__float__"] in ("Infinity", "-Infinity", "NaN"):
            return None, False
        try:
            return float(value["__float__"]), True
        except (TypeError, ValueError):
            return value, True
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            clean, stated = _unstate_non_finite(item)
            if stated:
                kept[key] = clean
        return kept, True
    if isinstance(value, list):
        items = [_unstate_non_finite(item) for item in value]
        if not all(stated for _, stated in items):
            return None, False
        return [clean for clean, _ in items], True
    return value, True


def read_config(path: Path) -> dict[str, Any]:
    """Parse config.json (or params.json) into a dict, refusing unreadable or malformed files."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"failed to read {path}: {err.strerror or err}; check that the file is a readable "
                          "regular file, or re-download it") from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"invalid model config {path}: not UTF-8 text (bad byte at offset {err.start}); "
                          "re-download the file") from err
    try:
        parsed = json.loads(text, parse_constant=lambda _name: _NON_FINITE)
    except json.JSONDecodeError as err:
        raise ConfigError(f"invalid model config {path}: line {err.lineno} column {err.colno}: {err.msg}; "
                          "fix the JSON or re-download the file") from err
    except (ValueError, RecursionError) as err:  # a number past Python's 4300 digits, nesting past its stack
        raise ConfigError(f"invalid model config {path}: {str(err)[:100]}; fix the JSON or re-download the file") from err
    if not isinstance(parsed, dict):
        raise ConfigError(f"invalid model config {path}: expected a JSON object, found "
                          f"{type(parsed).__name__}; re-download the file")
    config, _ = _unstate_non_finite(parsed)
    _check_config_shape(config, path)
    return config


def _check_config_shape(config: dict[str, Any], path: Path) -> None:
    """The keys resolution relies on must have the JSON types Transformers writes."""
    for holder, where in ((config, ""), (config.get("text_config"), "text_config.")):
        if not isinstance(holder, dict):
            continue
        model_type = holder.get("model_type")
        if model_type is not None and not isinstance(model_type, str):
            raise ConfigError(f"invalid model config {path}: {where}model_type must be a string, found "
                              f"{shown(model_type)}; fix the config")
        archs = holder.get("architectures")
        if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
            raise ConfigError(f"invalid model config {path}: {where}architectures must be a list of class "
                              f"names, found {shown(archs)}; fix the config")
    text_config = config.get("text_config")
    if text_config is not None and not isinstance(text_config, dict):
        raise ConfigError(f"invalid model config {path}: text_config must be a JSON object; fix the config")
    quant = config.get("quantization_config")
    if quant is not None and not isinstance(quant, dict):
        raise ConfigError(f"invalid model config {path}: quantization_config must be a JSON object; fix the config")


# Wrapper config classes of transformers 5.24 that read their text_config as another model type, as the converter's
# AutoConfig then gives it: (wrapper model_type, text model_type) -> the model_type its text_config is read as
# (Kimi_K25Config reads Kimi-K2's kimi_k2 text_config as deepseek_v3, with DeepseekV3Config's defaults)
# Kimi-K3's kimi_linear text_config is read as Kimi-K3 itself: the converter picks KimiK3Model (llama.cpp kimi-k3) by
# its architectures, not Kimi-Linear's class, whose graph lacks K3's additions (hfview/families/kimi_k3.py)
TEXT_READ_AS = {("kimi_k25", "kimi_k2"): "deepseek_v3", ("kimi_k3", "kimi_linear"): "kimi_k3"}


def merge_text_config(config: dict[str, Any]) -> dict[str, Any]:
    """A multimodal config's text_config merged over its top level (as the converter reads it)."""
    text_config = config.get("text_config")
    if isinstance(text_config, dict):
        merged = {**config, **text_config}
        read_as = TEXT_READ_AS.get((config.get("model_type"), text_config.get("model_type")))
        return {**merged, "model_type": read_as} if read_as else merged
    return dict(config)


def read_checkpoint_config(model_dir: Path) -> tuple[dict, Path]:
    """A checkpoint directory's config.json, read as the converter reads it: a multimodal config's
    `text_config` merged over the top level."""
    path = model_dir / "config.json"
    if not path.is_file():
        raise ConfigError(f"model config is missing: {path}; a Hugging Face checkpoint needs its config.json")
    return merge_text_config(read_config(path)), path


def with_defaults(config: dict, defaults: dict) -> dict:
    """The config as transformers' config class presents it: defaults under the stated keys, rope folded."""
    h = {**defaults, **{k: v for k, v in config.items() if k != "text_config"}}
    # transformers folds legacy `rope_scaling` and `rope_theta` into `rope_parameters`
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    if "type" in rope and "rope_type" not in rope:
        rope["rope_type"] = rope["type"]
    rope.setdefault("rope_type", "default")
    theta = config.get("rope_theta", rope.get("rope_theta", defaults.get("rope_parameters", {}).get("rope_theta")))
    if theta is not None:
        rope["rope_theta"] = theta
    h["rope_parameters"] = rope
    h.pop("rope_scaling", None)
    h.pop("rope_theta", None)
    return h


def _same(value: Any, harmless: Any) -> bool:
    """JSON equality: 0 and 0.0 are one number, but true is not 1."""
    if isinstance(value, bool) or isinstance(harmless, bool):
        return value is harmless
    return value == harmless


# Sub-configs of the towers beside a text decoder (an image-text or audio-text wrapper's): hfview presents the decoder,
# whose forward never runs them.
_OTHER_TOWERS = ("vision_config", "audio_config", "speech_config", "whisper_config", "vision_tower_config",
                 "audio_tower_config", "perceiver_config")


# A release's own Python files past this size are not read (a key is then refused as unread, as before).
_CODE_BYTES = 8 << 20


@dataclass(frozen=True)
class ReleaseCode:
    """The words of a checkpoint's own Python files (its remote code: configuration_*.py, modeling_*.py ...), read as
    text and never run. Where a family's forward is that code (transformers has no class for its model type), a key
    the code never names cannot change the forward."""
    files: tuple[str, ...]
    names: frozenset[str]


def release_code(directory: Path) -> ReleaseCode | None:
    """The checkpoint's top-level *.py files as words, or None where it has none (or too much to read)."""
    try:
        files = sorted(p for p in directory.glob("*.py") if p.is_file())
        if not files or sum(p.stat().st_size for p in files) > _CODE_BYTES:
            return None
        text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files)
    except OSError:
        return None
    # every identifier and every word inside a string (kwargs.pop("key"), getattr(config, "key")) counts as named
    return ReleaseCode(tuple(p.name for p in files), frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)))


def _forward_code(config: dict, family: str, directory: Path) -> ReleaseCode | None:
    """The release's own code where it is the forward: never where transformers has a class for the model type
    (hfview's reference, which runs no *.py beside it)."""
    return None if config.get("model_type") in _references(family)[0] else release_code(directory)


def _references(family: str) -> tuple[dict[str, str], tuple[str, ...]]:
    """({model type: transformers folder}, the converter's text class chain) read for `family`
    (hfview/references_read.py, written by tools/key_policy.py)."""
    from . import references_read as R  # on the first key it does not know: ~100 KB of data
    return R.FAMILIES.get(family, ({}, ()))


def readers(family: str, key: str, code: ReleaseCode | None = None) -> list[str]:
    """Which of the references' code reads `key` for `family`: transformers' model folders or shared code (which
    runs under a release's own code too), the release's own code, the converter's classes."""
    from . import references_read as R
    types, chain = _references(family)
    found = [f"transformers' {folder} code" for folder in sorted(set(types.values())) if key in R.TRANSFORMERS[folder]]
    if (types or code is not None) and key in R.SHARED:
        found.append("transformers' shared code (PreTrainedConfig, rope, masks, caches)")
    if code is not None and key in code.names:
        found.append(f"the checkpoint's own code ({', '.join(code.files)})")
    return found + [f"the converter's {cls}" for cls in chain if key in R.CONVERTER[cls]]


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, dict, str)) and not value)


def _why_ignored(config: dict, family: str, key: str, value: Any, defaults: Mapping[str, Any],
                 code: ReleaseCode | None) -> str | None:
    """Why a key hfview neither reads nor knows as harmless changes nothing, or None where it may."""
    if ("dropout" in key or key.endswith("_pdrop")) and not isinstance(value, bool) and value == 0:
        return f"a dropout of {value} drops nothing"
    if key in _OTHER_TOWERS and isinstance(value, dict):
        return f"the {key.removesuffix('_config')} tower's configuration: hfview presents the text decoder, which " \
               f"never runs that tower"
    if _empty(value) and _empty(defaults.get(key)):
        return f"{json.dumps(value)} asks for nothing, as the config class's default " \
               f"({json.dumps(defaults.get(key))}) does"
    types, chain = _references(family)
    # Only where both references exist to be read: a family without a converter class, or with remote code that is
    # not beside the config, keeps every key it does not know refused.
    if not chain or readers(family, key, code):
        return None
    if config.get("model_type") in types:
        folders = ", ".join(sorted(set(types.values())))
        return f"neither transformers' {folders} code nor the converter's {chain[0]} reads it"
    if code is not None:
        return f"neither the checkpoint's own code ({', '.join(code.files)}, read as text) nor the converter's " \
               f"{chain[0]} names it"
    return None


def _sort_keys(config: dict, family: str, reads: frozenset[str], harmless: Harmless,
               defaults: Mapping[str, Any], code: ReleaseCode | None = None):
    """(ignored {key: why}, refused keys, keys at a value that changes the computation), in the key check's order:
    read by hfview, known harmless (at any value or at the values listed), ignored with a reason, refused."""
    known = {**COMMON_HARMLESS, **harmless}
    ignored, refused, changing = {}, [], []
    for key, value in config.items():
        if key in reads or key == "text_config":
            continue
        if key in known:
            if known[key] is not ANY and not any(_same(value, off) for off in known[key]):
                changing.append(key)
        elif (why := _why_ignored(config, family, key, value, defaults, code)) is not None:
            ignored[key] = why
        else:
            refused.append(key)
    return ignored, sorted(refused), changing


def ignored_keys(config: dict, family, directory: Path | None = None) -> dict[str, str]:  # a hfview.family.Family
    """The config keys the key check accepts without reading them, each with why it changes nothing (what
    `hfview inspect` lists); `directory`: the checkpoint's, whose own code is read as text."""
    code = _forward_code(config, family.name, directory) if directory is not None else None
    return _sort_keys(config, family.name, family.reads, family.harmless, class_defaults(family, config), code)[0]


def class_defaults(family, config: dict) -> Mapping[str, Any]:  # family: a hfview.family.Family
    """The config class's defaults for the config's model_type (empty for a model_type the family does not list)."""
    model_type = config.get("model_type")
    return family.defaults.get(model_type, {}) if isinstance(model_type, str) else {}


def check_keys(config: dict, path: Path, family: str, reads: frozenset[str], harmless: Harmless,
               defaults: Mapping[str, Any] | None = None) -> None:
    """Every key is read, known to leave the computation unchanged at its value, ignored because it changes nothing
    (hfview.config.ignored_keys; `defaults`: the config class's, against which an empty value asks for nothing;
    the checkpoint's own code beside `path`, read as text), or refused by name, with the reference that reads it."""
    code = _forward_code(config, family, Path(path).parent)
    _ignored, refused, changing = _sort_keys(config, family, reads, harmless, defaults or {}, code)
    if refused:
        key = refused[0]
        by = readers(family, key, code)
        what = (f"is read by {' and '.join(by)}, and the {family} family does not read it" if by else
                f"is not one the {family} family knows")
        raise ConfigError(f"{path}: config key {key!r} (= {shown(config[key])}) {what}; hfview will not guess "
                          f"whether it changes the model"
                          + (f" (also unknown: {', '.join(refused[1:])})" if len(refused) > 1 else ""))
    if changing:
        known = {**COMMON_HARMLESS, **harmless}
        key = changing[0]
        offs = " or ".join(json.dumps(off) for off in known[key])
        stated = json.dumps(config[key])
        stated = stated if len(stated) <= 200 else stated[:200] + "…"  # a hostile value may be megabytes
        raise ConfigError(f"{path}: config key {key!r} is {stated}; the {family} family does not "
                          f"read it and computes as if it were {offs}, so this checkpoint would run as a model it "
                          f"is not; use a checkpoint whose config has {key} {offs}, or run it through transformers")


def read_as(family, config: dict, path: Path) -> dict:  # family: a hfview.family.Family (which imports this module)
    """The config as `family` reads it, checked as HfCheckpoint checks a config before it knows the shards: the
    key check, the values' types and ranges, the config class's defaults under the stated keys, the counts
    against each other and against any model's, what the class's constructor computes, and the family's
    refusal of values it cannot honour."""
    check_keys(config, path, family.name, family.reads, family.harmless, class_defaults(family, config))
    defaults = family.defaults[config["model_type"]]
    config_values.check_values(family.name, defaults, config, path)
    hparams = with_defaults(family.canonical(config), defaults)
    config_values.check_shapes(hparams, path,
                                family.extra_blocks(hparams) if family.layer_lists_over_extra_blocks else 0)
    config_values.check_against_tensors(config, None, path)
    hparams = family.normalise(hparams)
    family.validate(hparams, path)
    return hparams
