"""OLMo 2 and OLMo 3 (one converter class): both oracles over an OLMo-2-style fixture (post-norms, q/k
norms, grouped KV, bf16) and an OLMo-3-style one whose 4-token sliding window is crossed by the prompt."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("olmo2", ["olmo2", "olmo3"])


def test_olmo2_defaults_are_transformers():
    check_defaults("olmo2")


def test_olmo3_released_config_layout_export_equals_converter(checkpoint, tmp_path):
    """Olmo-3 as released states rope_theta at the top level, not nested rope_parameters: Olmo3Config nests
    it into the full-attention entry and gives the sliding entry its own default theta. The view must read
    that layout as the converter does (bytes equal)."""
    import json
    import shutil

    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export

    src = checkpoint("olmo3")
    model = tmp_path / "olmo3-released"
    shutil.copytree(src, model)
    config = json.loads((model / "config.json").read_text())
    config.pop("rope_parameters")
    config.update(rope_theta=500000.0, rope_scaling=None)
    (model / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
    theirs = oracle.convert(model, tmp_path / "theirs.gguf", "f32")
    ours = export(HfCheckpoint(model, "f32"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)
