"""Falcon (FalconForCausalLM -> llama.cpp falcon): both oracles on Falcon-7B- and Falcon-40B-style fixtures.

The pinned converter fails on Falcon-7B's multi-query layout under transformers 5.24 (FalconConfig fills
num_kv_heads with the query head count, which the converter takes as the KV head count): that export is a strict
expected failure, and its bytes are checked against the converter run with num_kv_heads restored to the one KV
head transformers' model uses. Falcon-40B's layout converts as it is.
"""
import pytest

import oracle
from converter_variant import convert_as_read
from family_defaults import check_defaults
from family_oracle import OUTTYPES, check_export, oracle_tests
from family_variants import assert_refused

_, test_logits = oracle_tests("falcon", ["falcon-7b", "falcon-40b"])


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_export_falcon_40b(outtype, checkpoint, converted, tmp_path, record_property):
    record_property("family", "falcon")
    record_property("oracle", "bytes")
    check_export("falcon-40b", outtype, checkpoint, converted, tmp_path)


@pytest.mark.xfail(raises=oracle.ConverterFailed, strict=True,
                   reason="transformers 5's FalconConfig sets num_kv_heads to the query head count; the converter "
                          "reshapes Falcon-7B's multi-query tensor by it and fails")
def test_converter_fails_on_falcon_7b(converted, record_property):
    record_property("family", "falcon")
    record_property("oracle", "bytes")
    converted("falcon-7b", "f32")


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_falcon_7b_export_equals_converter_with_its_kv_heads(outtype, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.export import export

    path = checkpoint("falcon-7b")
    theirs = convert_as_read(path, outtype, tmp_path, lambda stated, presented: {"num_kv_heads": 1})
    ours = export(HfCheckpoint(path, outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"falcon-7b --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


@pytest.mark.parametrize("change, message", [
    ({"alibi": True}, "alibi True"),
    ({"parallel_attn": False}, "parallel_attn False"),
    ({"rope_theta": 500000.0}, "rope"),
])
def test_configs_that_would_run_wrong_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("falcon-7b"), tmp_path, message, **change)


def test_defaults():
    check_defaults("falcon")
