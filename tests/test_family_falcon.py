"""Falcon (FalconForCausalLM -> llama.cpp falcon): both oracles on Falcon-7B- and Falcon-40B-style fixtures.

The pinned converter fails on Falcon-7B's multi-query layout under transformers 5.24 (FalconConfig fills
num_kv_heads with the query head count, which the converter takes as the KV head count): that export is a strict
expected failure, and its bytes are checked against the converter run with num_kv_heads restored to the one KV
head transformers' model uses. Falcon-40B's layout converts as it is.

Falcon's first revisions (model_type RefinedWebModel for Falcon-7B, RefinedWeb for Falcon-40B, RWForCausalLM, remote
code: configuration_RW.py / modelling_RW.py, read as text from copies of the release, tests/data/released_configs/
falcon/SOURCES.md): fixtures falcon-rw-7b and falcon-rw-40b hold each one's structure under its config.json's own
keys (n_head, n_layer, n_head_kv). transformers 5.24 has no config class for them, so the converter reads that
config.json as written (both name sets, conversion/falcon.py) and converts both as they are: bytes against it.
transformers has no RefinedWeb model either; its FalconForCausalLM is the port of that remote code (the same module
and weight names, transformer.h.N.self_attention.query_key_value ...; RefinedWeb's always-grouped, two-LayerNorm
block is FalconConfig's new_decoder_architecture), so the logits reference is a Falcon twin: the same weights with
the config read as FalconConfig. The release's code rounds its rotary tables to bfloat16 (the twin so rounded is
measured below, still under the bar) and fixes Falcon-40B's head width at 64, which the port reads from the config:
the same function at the released width.
"""
import json
import shutil
from pathlib import Path

import pytest

import oracle
from converter_variant import convert_as_read
from family_defaults import check_defaults
from family_oracle import OUTTYPES, check_export, oracle_tests, twin_logits_test
from family_variants import assert_refused

_, test_logits = oracle_tests("falcon", ["falcon-7b", "falcon-40b"])

FIRST_REVISIONS = ["falcon-rw-7b", "falcon-rw-40b"]


def falcon_twin(src: Path, out: Path) -> Path:
    """A first-revision Falcon checkpoint `src` as a falcon one in `out`: its config.json read as FalconConfig (what
    modelling_RW.py computes: RefinedWeb is the new decoder architecture with n_head_kv groups; RefinedWebModel reads
    multi_query), the same weight files."""
    from transformers import FalconConfig

    c = json.loads((src / "config.json").read_text(encoding="utf-8"))
    assert c["model_type"] in ("RefinedWebModel", "RefinedWeb")
    new = c["model_type"] == "RefinedWeb"
    FalconConfig(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], num_hidden_layers=c["n_layer"],
                 num_attention_heads=c["n_head"], num_kv_heads=c["n_head_kv"] if new else None,
                 new_decoder_architecture=new, multi_query=True if new else c["multi_query"], parallel_attn=True,
                 alibi=c["alibi"], bias=c["bias"], layer_norm_epsilon=c["layer_norm_epsilon"],
                 bos_token_id=c["bos_token_id"], eos_token_id=c["eos_token_id"]).save_pretrained(out)
    shutil.copyfile(src / "model.safetensors", out / "model.safetensors")
    return out


test_first_revision_logits = twin_logits_test("falcon", FIRST_REVISIONS, falcon_twin, "Falcon")


@pytest.mark.parametrize("name", FIRST_REVISIONS)
def test_first_revision_logits_within_the_bar_of_its_bfloat16_rotary_tables(name, checkpoint, tmp_path):
    """modelling_RW.py's RotaryEmbedding.cos_sin casts its cos/sin tables to bfloat16 (its default dtype) before q and
    k are rotated; transformers' port and llama.cpp keep them in float32. The twin with its tables so rounded still
    agrees with llama.cpp fed from the view under the bar: the rounding is the release's arithmetic, not another
    function (measured: NMSE 2.4e-7 for falcon-rw-7b, 3.3e-7 for falcon-rw-40b, against 1.2e-7 / 1.3e-7 unrounded)."""
    import torch
    import transformers

    from family_oracle import NMSE_BAR, PROMPT, nmse
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    path = checkpoint(name)
    with StreamModel(HfCheckpoint(path, "f32"), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        ours = m.logits(ids)
    model = transformers.AutoModelForCausalLM.from_pretrained(falcon_twin(path, tmp_path / "twin"),
                                                              dtype=torch.float32)
    rotary = model.transformer.rotary_emb
    plain = rotary.forward
    rotary.forward = lambda x, position_ids: tuple(t.to(torch.bfloat16).float() for t in plain(x, position_ids))
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].numpy()
    value = nmse(ours, ref)
    print(f"{name} f32 vs the Falcon twin with bfloat16 rotary tables: NMSE {value:.3e}")
    assert value < NMSE_BAR


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIRST_REVISIONS)
def test_export_first_revision(name, outtype, checkpoint, converted, tmp_path, record_property):
    """The converter reads a RefinedWeb(Model) config.json as written and converts it; the view's file is its."""
    record_property("family", "falcon")
    record_property("oracle", "bytes")
    check_export(name, outtype, checkpoint, converted, tmp_path)


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


@pytest.mark.parametrize("name, changes, message", [
    # the converter reads one KV head where n_head_kv is absent; Falcon-40B's RWConfig takes n_head
    ("falcon-rw-40b", dict(n_head_kv=None), "RefinedWeb without n_head_kv"),
    ("falcon-rw-7b", dict(layer_norm_epsilon=None), "RefinedWebModel without layer_norm_epsilon"),
    # Falcon-7B's code with multi_query off runs n_head KV heads; the converter, reading no n_head_kv, one
    ("falcon-rw-7b", dict(multi_query=False), "multi_query False"),
    ("falcon-rw-7b", dict(n_head_kv=4), "n_head_kv 4"),
    ("falcon-rw-7b", dict(multi_query="yes"), "multi_query is 'yes'"),
    ("falcon-rw-7b", dict(num_attention_heads=4), "'n_head' and 'num_attention_heads' are both stated"),
    ("falcon-rw-7b", dict(parallel_attn=False), "parallel_attn False"),
    ("falcon-rw-40b", dict(alibi=True), "alibi True"),
    # FalconConfig does not read RWConfig's names: a falcon config stating one would run with FalconConfig's default
    ("falcon-40b", dict(n_head_kv=2), "'n_head_kv' is RWConfig's name"),
])
def test_first_revision_configs_that_would_run_wrong_are_refused(name, changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint(name), tmp_path, message, **changes)


def test_first_revisions_are_read_as_falcon(checkpoint):
    """RefinedWeb is FalconConfig's new decoder architecture (n_head_kv groups, ln_attn / ln_mlp), RefinedWebModel
    multi-query with one LayerNorm: the KV and tensor table the converter writes for each."""
    from hfview import HfCheckpoint

    for name, kv_heads, norm2 in (("falcon-rw-7b", 1, False), ("falcon-rw-40b", 2, True)):
        ckpt = HfCheckpoint(checkpoint(name), "f32")
        kv = {k.key: k.value for k in ckpt.kv}
        assert kv["general.architecture"] == "falcon"
        assert kv["falcon.attention.head_count"] == 4 and kv["falcon.attention.head_count_kv"] == kv_heads
        assert kv["falcon.block_count"] == 2
        names = {t.name for t in ckpt.tensors}
        assert ("blk.0.attn_norm_2.weight" in names) is norm2
        assert ("output.weight" in names) is norm2  # Falcon-40B's first revision stores lm_head, tied


def test_defaults():
    check_defaults("falcon")
