"""OLMo 2 and OLMo 3 (one converter class): both oracles over an OLMo-2-style fixture (post-norms, q/k
norms, grouped KV, bf16), an OLMo-3-style one whose 4-token sliding window is crossed by the prompt, and an
OLMo-3.1-style one with YaRN on its full-attention layers (OLMo 3.1 32B Instruct's rope_scaling verbatim)."""
import json
from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("olmo2", ["olmo2", "olmo3", "olmo3-yarn"])

OLMO31 = Path(__file__).resolve().parent / "data" / "released_configs" / "olmo2" / "allenai__Olmo-3.1-32B-Instruct.json"


def test_olmo2_defaults_are_transformers():
    check_defaults("olmo2")


def test_yarn_fixture_states_olmo31_rope_scaling(builder):
    released = json.loads(OLMO31.read_text())
    spec = builder.SPECS["olmo3-yarn"].config
    assert spec["rope_scaling"] == released["rope_scaling"] and spec["rope_theta"] == released["rope_theta"]


@pytest.mark.parametrize("name, rope_scaling", [
    ("olmo3", None),
    ("olmo3-yarn", json.loads(OLMO31.read_text())["rope_scaling"]),
])
def test_olmo3_released_config_layout_export_equals_converter(name, rope_scaling, checkpoint, tmp_path):
    """Olmo-3 as released states rope_theta and rope_scaling at the top level, not nested rope_parameters:
    Olmo3Config nests them into the full-attention entry and gives the sliding entry its own default theta.
    The view must read that layout as the converter does (bytes equal)."""
    import shutil

    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export

    model = tmp_path / f"{name}-released"
    shutil.copytree(checkpoint(name), model)
    config = json.loads((model / "config.json").read_text())
    config.pop("rope_parameters")
    config.update(rope_theta=500000.0, rope_scaling=rope_scaling)
    (model / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    theirs = oracle.convert_cached(model, "f32")
    ours = export(HfCheckpoint(model, "f32"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


def test_sliding_rope_llama_cpp_cannot_run_is_refused(checkpoint, tmp_path):
    """llama.cpp's olmo2 rotates sliding layers with plain rope at the full-attention theta: a config whose
    sliding entry differs is refused by name, not run wrong."""
    import shutil

    from hfview import ConfigError, HfCheckpoint

    model = tmp_path / "olmo3-swa-theta"
    shutil.copytree(checkpoint("olmo3-yarn"), model)
    config = json.loads((model / "config.json").read_text())
    config["rope_parameters"]["sliding_attention"]["rope_theta"] = 10000.0
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="sliding-window layers' rope"):
        HfCheckpoint(model)


def test_olmo2_yarn_is_not_presented(checkpoint, tmp_path):
    """OLMo 2 has no sliding layers: YaRN there is not what was checked, so it stays refused."""
    import shutil

    from hfview import ConfigError, HfCheckpoint

    model = tmp_path / "olmo2-yarn"
    shutil.copytree(checkpoint("olmo2"), model)
    config = json.loads((model / "config.json").read_text())
    config["rope_scaling"] = json.loads(OLMO31.read_text())["rope_scaling"]
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="rope type 'yarn'.*olmo2 with default rope only"):
        HfCheckpoint(model)
