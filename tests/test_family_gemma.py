"""Gemma (1): both oracles (converter bytes at every outtype, llama.cpp-from-the-view logits against
transformers), the config-class defaults the view assumes, and its refusals."""
from __future__ import annotations

import pytest

from config_defaults import defaults_match_transformers, with_config
from family_oracle import oracle_tests
from hfview import HfCheckpoint
from hfview.errors import ConfigError

test_export, test_logits = oracle_tests("gemma", ["gemma", "gemma-f16"])


def test_defaults_are_transformers():
    from hfview.families.gemma import DEFAULTS
    defaults_match_transformers("gemma", DEFAULTS["gemma"])


@pytest.mark.parametrize("changes, words", [
    (dict(tie_word_embeddings=False), "tie_word_embeddings"),
    (dict(hidden_act="silu"), "hidden_act"),
    (dict(rope_theta=500000.0), "rope"),
    (dict(use_bidirectional_attention=True), "use_bidirectional_attention"),
])
def test_refuses_what_llama_cpp_gemma_cannot_run(changes, words, checkpoint, tmp_path):
    with pytest.raises(ConfigError, match=words):
        HfCheckpoint(with_config(checkpoint("gemma"), tmp_path, **changes))


def test_norms_are_one_plus_stored(checkpoint):
    """The +1 is applied in the working dtype: float16 storage gives float16 sums (the converter's bits)."""
    import numpy as np
    from safetensors.numpy import load_file
    path = checkpoint("gemma-f16")
    stored = load_file(path / "model.safetensors")["model.layers.1.post_attention_layernorm.weight"]
    presented = HfCheckpoint(path, "f32").read_tensor("blk.1.ffn_norm.weight")
    assert np.array_equal(presented, (stored + np.float16(1)).astype(np.float32))


def test_legacy_gelu_config_reads_as_the_converter_reads_it(checkpoint, tmp_path):
    """Released Gemma configs say hidden_act "gelu" (transformers reads it as the tanh GELU llama.cpp runs):
    accepted, and the file is still the converter's."""
    import oracle
    from hfview.export import export
    path = with_config(checkpoint("gemma"), tmp_path, hidden_act="gelu", hidden_activation="gelu_pytorch_tanh")
    theirs = oracle.convert_cached(path, "bf16")
    ours = export(HfCheckpoint(path, "bf16"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)
