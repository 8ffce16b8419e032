"""EXAONE 3 / 3.5 (ExaoneForCausalLM -> llama.cpp exaone).

transformers 5.24 has ExaoneConfig (no model of its own: AutoModelForCausalLM loads EXAONE 3 as Llama, renaming
its weights), so the logits oracle runs. The pinned converter fails on EXAONE 3 under transformers 5
(KeyError 'activation_function', which ExaoneConfig renames to hidden_act): the export test records that
failure, and test_exaone_export_equals_converter_past_the_rename checks the view's bytes against the converter
run on the config as transformers presents it with activation_function put back.
"""
import pytest

import oracle
from converter_variant import convert_as_read
from family_defaults import check_defaults
from family_oracle import OUTTYPES, oracle_tests

FIXTURES = ["exaone", "exaone-3.0"]

test_export, test_logits = oracle_tests(
    "exaone", FIXTURES,
    export_xfail="the pinned converter reads hparams['activation_function'], which transformers 5's "
                 "ExaoneConfig renames to hidden_act: KeyError")


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_exaone_export_equals_converter_past_the_rename(name, outtype, checkpoint, tmp_path, record_property):
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "exaone")
    record_property("oracle", "bytes")  # the bytes oracle: the README table shows it beside the converter's failure
    path = checkpoint(name)
    theirs = convert_as_read(path, outtype, tmp_path,
                             lambda stated, presented: {"activation_function": presented["hidden_act"]})
    ours = export(HfCheckpoint(path, outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


def test_converter_fails_on_the_renamed_key(checkpoint, tmp_path):
    # the reason recorded by test_export's expected failure, checked by its message
    with pytest.raises(oracle.ConverterFailed, match="KeyError: 'activation_function'"):
        oracle.convert(checkpoint("exaone"), tmp_path / "theirs.gguf", "f32")


def test_defaults():
    check_defaults("exaone")
