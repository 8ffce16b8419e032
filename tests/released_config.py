"""A released config.json through the view's config path, without weights: the steps HfCheckpoint takes
before it reads a shard (quantization refusal, family, key check, defaults, normalise, the family's checks)
and the hyperparameter KV the family writes from it."""
from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "released_configs"


def released_configs(family: str) -> list[Path]:
    """The family's released config.json files (tests/data/released_configs/<family>/*.json)."""
    return sorted((DATA / family).glob("*.json"))


def config_path_kv(path: Path, file_type: int = 32) -> dict:
    """{key: value} of the family's hyperparameter KV for the config at `path`; raises what HfCheckpoint
    would raise on it (ConfigError, QuantizedCheckpoint)."""
    from hfview import families
    from hfview.config import check_keys, merge_text_config, read_config, refuse_quantized, with_defaults
    from hfview.errors import ConfigError
    from hfview.params import first

    config = merge_text_config(read_config(path))
    refuse_quantized(config, path)
    family = families.family_for(config.get("model_type"))
    if family is None:
        raise ConfigError(f"{path}: model_type {config.get('model_type')!r} is unsupported")
    check_keys(config, path, family.name, family.reads, family.harmless)
    h = family.normalise(with_defaults(config, family.defaults[config["model_type"]]))
    family.check(h, path)
    block_count = first(h, ["n_layers", "num_hidden_layers", "n_layer", "num_layers"])
    return {kv.key: kv.value for kv in family.parameters(h, block_count, file_type)}
