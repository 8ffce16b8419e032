"""Granite MoE SWA (GraniteMoeSWAForCausalLM -> llama.cpp granite_swa: fused experts and shared expert kept fused,
sliding-window layers with attention sinks): converter bytes at every outtype, llama.cpp logits, defaults vs
transformers, refusals."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import variant

test_export, test_logits = oracle_tests("granitemoe_swa", ["granitemoe_swa", "granitemoe_swa-shared"])


def test_defaults_match_transformers():
    check_defaults("granitemoe_swa")


@pytest.mark.parametrize("changes, reason", [
    (dict(layer_rope_theta=[10000.0, 0, 10000.0, 10000.0]), "layer_rope_theta"),
    (dict(no_rope_layers=[1, 1, 0, 1]), "no_rope_layers"),
    (dict(layer_types=["full_attention"] * 3), "layer_types lists 3 layers"),
    (dict(num_local_experts=0), "without experts"),
    (dict(hidden_act="gelu"), "hidden_act"),
], ids=["nope_by_theta", "no_rope_layers", "short_layer_types", "no_experts", "gelu"])
def test_refuses_what_granite_swa_cannot_run(changes, reason, checkpoint, tmp_path):
    """NoPE layers (transformers reads them from layer_rope_theta, the converter writes llama.cpp's from
    no_rope_layers, which GraniteMoeSWAConfig does not define), a layer list of the wrong length, a mixture without
    experts: refused by name before any weight is read."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("granitemoe_swa"), tmp_path / "v", **changes), "f32")
