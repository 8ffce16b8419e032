"""StarCoder2: both oracles over a starcoder2-3b-style fixture (biases, tied, bf16) and an untied f32 one;
use_bias false (which llama.cpp's starcoder2 cannot load) is refused."""
import json

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("starcoder2", ["starcoder2", "starcoder2-untied"])


def test_starcoder2_without_biases_is_refused_by_name(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    config = json.loads((checkpoint("starcoder2-untied") / "config.json").read_text())
    config["use_bias"] = False
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="use_bias False"):
        HfCheckpoint(tmp_path)


def test_starcoder2_defaults_are_transformers():
    check_defaults("starcoder2")
