"""GPT-NeoX / Pythia (GPTNeoXForCausalLM -> llama.cpp gptneox).

The pinned converter fails on GPT-NeoX under transformers 5.24 (KeyError 'rotary_pct': GPTNeoXConfig moves it
into rope_parameters): the export test records that failure, and test_export_equals_converter_past_the_rename
checks the view's bytes against the converter run on the config as transformers presents it with rotary_pct put
back. The logits oracle runs as for every family.
"""
import pytest

import oracle
from converter_variant import convert_as_read
from family_defaults import check_defaults
from family_oracle import OUTTYPES, oracle_tests
from family_variants import assert_refused

FIXTURES = ["pythia", "gpt-neox-saved"]

test_export, test_logits = oracle_tests(
    "gpt_neox", FIXTURES,
    export_xfail="the pinned converter reads hparams['rotary_pct'], which transformers 5's GPTNeoXConfig moves "
                 "into rope_parameters: KeyError")


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export_equals_converter_past_the_rename(name, outtype, checkpoint, tmp_path, record_property):
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "gpt_neox")
    record_property("oracle", "bytes")  # the bytes oracle: the README table shows it beside the converter's failure
    path = checkpoint(name)
    theirs = convert_as_read(path, outtype, tmp_path, lambda stated, presented: {
        "rotary_pct": presented["rope_parameters"]["partial_rotary_factor"]})
    ours = export(HfCheckpoint(path, outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


def test_converter_fails_on_the_moved_key(checkpoint, tmp_path):
    with pytest.raises(oracle.ConverterFailed, match="KeyError: 'rotary_pct'"):
        oracle.convert(checkpoint("pythia"), tmp_path / "theirs.gguf", "f32")


@pytest.mark.parametrize("change, message", [
    ({"rotary_emb_base": 500000}, "rope"),
    ({"tie_word_embeddings": True}, "tie_word_embeddings True"),
    ({"hidden_act": "relu"}, "hidden_act 'relu'"),
])
def test_configs_that_would_run_wrong_are_refused(checkpoint, tmp_path, change, message):
    assert_refused(checkpoint("pythia"), tmp_path, message, **change)


def test_defaults():
    check_defaults("gpt_neox")
