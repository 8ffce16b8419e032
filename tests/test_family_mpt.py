"""MPT (MPTForCausalLM -> llama.cpp mpt): both oracles on an mpt-7b-style fixture with a q/k/v clamp; the
attention variants llama.cpp's mpt does not compute are refused by name."""
import pytest

from family_oracle import oracle_tests
from family_variants import assert_refused

test_export, test_logits = oracle_tests("mpt", ["mpt"])


@pytest.mark.parametrize("change, message", [
    ({"attn_config": {"alibi": True, "qk_ln": True}}, "attn_config.qk_ln True"),
    ({"attn_config": {"alibi": False}}, "attn_config.alibi False"),
    ({"no_bias": False}, "no_bias False"),
])
def test_configs_that_would_run_wrong_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("mpt"), tmp_path, message, **change)


def test_defaults():
    """As check_defaults, with attn_config compared field by field: transformers' to_dict of the nested
    MptAttentionConfig also carries every config class's generic keys, which never reach the converter."""
    from transformers import MptConfig

    from hfview.families.mpt import ATTN_DEFAULTS, DEFAULTS

    theirs = MptConfig().to_dict()
    for key, value in DEFAULTS["mpt"].items():
        if key != "attn_config":
            assert theirs[key] == value, key
    assert {k: theirs["attn_config"][k] for k in ATTN_DEFAULTS} == ATTN_DEFAULTS
