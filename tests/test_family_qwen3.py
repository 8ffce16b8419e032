"""Qwen3 (Q/K norms, head_dim != hidden/heads): converter bytes at every outtype, llama.cpp logits."""
from family_defaults import check_defaults
from family_oracle import oracle_tests

test_export, test_logits = oracle_tests("qwen3", ["qwen3", "qwen3-base"])


def test_defaults_match_transformers():
    check_defaults("qwen3")


def test_qwen3_refuses_a_reranker_by_name(checkpoint, tmp_path):
    """The converter turns a directory named like Qwen3-Reranker into a ranking model; the view says so."""
    import pytest
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="Qwen3 reranker"):
        HfCheckpoint(variant(checkpoint("qwen3"), tmp_path / "Qwen3-Reranker-0.6B"), "f32")


def test_qwen3_refuses_a_reranker_by_its_parent_directory(checkpoint, tmp_path):
    """AutoConfig's _name_or_path is the whole directory path, so the converter's hint matches an ancestor."""
    import pytest
    from family_variants import variant
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="Qwen3 reranker"):
        HfCheckpoint(variant(checkpoint("qwen3"), tmp_path / "Qwen3-Reranker-4B" / "snapshot"), "f32")
