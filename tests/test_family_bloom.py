"""BLOOM (BloomForCausalLM -> llama.cpp bloom): both oracles on a bloom-560m-style fixture whose config
carries the release's Megatron-DeepSpeed keys; the post-norm residual llama.cpp lacks is refused by name."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("bloom", ["bloom"])


def test_post_layernorm_residual_is_refused(checkpoint, tmp_path):
    from family_variants import variant

    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="apply_residual_connection_post_layernorm True"):
        HfCheckpoint(variant(checkpoint("bloom"), tmp_path / "v", apply_residual_connection_post_layernorm=True))


def test_defaults():
    check_defaults("bloom")
