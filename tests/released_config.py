"""A released config.json through the view's config path, without weights: the steps HfCheckpoint takes
before it reads a shard (the architecture gate, the directory's config, the quantization refusal, the family,
hfview.config.read_as) and the hyperparameter KV the family writes from it.

tests/data/released_configs/<family>/<org>__<model>.json, sources in that directory's SOURCES.md; a ModelOpt
checkpoint's quantization record, which sits beside its config.json, as <org>__<model>.hf_quant_config.json."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "released_configs"
QUANT_RECORD = ".hf_quant_config.json"


def released_configs(family: str) -> list[Path]:
    """The family's released config.json files."""
    return sorted(p for p in (DATA / family).glob("*.json") if not p.name.endswith(QUANT_RECORD))


def config_path_kv(path: Path, file_type: int = 32) -> dict:
    """{key: value} of the family's hyperparameter KV for the released config at `path`, read from a checkpoint
    directory holding it (under the name its family reads) and its quantization record; raises what
    HfCheckpoint would raise on it (ConfigError, QuantizedCheckpoint)."""
    from hfview import families
    from hfview.checkpoint import _read_config  # the directory -> config step HfCheckpoint takes
    from hfview.config import read_as, read_config
    from hfview.quantized import refuse_quantized
    from hfview.config_values import layer_count
    from hfview.runner.resolve import gate

    family = {f.name: f for f in families.FAMILIES}[path.parent.name]
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp)
        shutil.copyfile(path, model / family.config_file)
        record = path.with_name(path.name.removesuffix(".json") + QUANT_RECORD)
        if record.is_file():
            shutil.copyfile(record, model / "hf_quant_config.json")
        assert gate(read_config(model / family.config_file), model / family.config_file) == "view"
        config, config_path = _read_config(model)
        refuse_quantized(config, config_path)
        read_by = families.family_for(config.get("model_type"), config.get("architectures"))
        assert read_by is family, f"{path} is read by {read_by and read_by.name}, not {family.name}"
        hparams = read_as(family, config, config_path)
        return {kv.key: kv.value for kv in family.parameters(hparams, layer_count(hparams) + family.extra_blocks(hparams), file_type)}
