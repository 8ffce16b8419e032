"""Qwen3.5-MoE text (Qwen3.5's hybrid with a mixture and shared expert in every layer): converter bytes at every
outtype (the converter run with --no-mtp on the fixtures transformers writes; without it on qwen3_5_moe-mm-mtp, which
carries the released MTP layer), llama.cpp logits, refusals, the image-text wrapper read as its text model, the
released configs (the Qwen3.5 / 3.6 wrappers and the text-only Qwen3.8-2.4T-A95B) through the view's config path."""
import pytest

from converter_ceiling import check_within_ceiling
from family_defaults import check_defaults
from family_oracle import oracle_tests, transformers_logits
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

FIXTURES = ["qwen3_5_moe_text", "qwen3_5_moe-mm"]
test_export, _ = oracle_tests("qwen3_5_moe_text", [*FIXTURES, "qwen3_5_moe-mm-mtp"])
_, test_logits = oracle_tests("qwen3_5_moe_text", FIXTURES, outtypes=["f32", "f16", "auto"])
_, test_logits_mtp = oracle_tests("qwen3_5_moe_text", ["qwen3_5_moe-mm-mtp"], outtypes=["f32"])


def test_mtp_layer_is_written_as_an_extra_block(checkpoint):
    """The wrapper's top-level mtp.layers.0.* is block 4 with its mixture and shared expert, its nextn tensors,
    block_count 5 and nextn_predict_layers 1."""
    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("qwen3_5_moe-mm-mtp"), "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["qwen35moe.block_count"] == 5 and kv["qwen35moe.nextn_predict_layers"] == 1
    assert kv["qwen35moe.attention.recurrent_layers"] == [True, True, True, False, False]
    names = {t.name for t in view.tensors}
    for name in ("blk.4.nextn.eh_proj.weight", "blk.4.nextn.shared_head_norm.weight", "blk.4.attn_q.weight",
                 "blk.4.ffn_gate_inp.weight", "blk.4.ffn_down_exps.weight", "blk.4.ffn_gate_inp_shexp.weight"):
        assert name in names, name


@pytest.mark.parametrize("outtype", ["f16", "bf16"])
def test_mtp_routers_stay_f32_as_the_converter_keeps_them(outtype, checkpoint, converted):
    """Unlike Nemotron-H's and MiMo-V2-Flash's MTP renames (inside modify_tensors, after the block id is read off the
    stored name), Qwen's (mtp.layers.0 -> model.layers.4) is the converter's filter_tensors, before prepare_tensors
    reads it: its F32 list sees block 4, so the MTP layer's router and shared-expert gate stay F32 at a 16-bit outtype,
    as the trunk's do; the view's too (test_export has the bytes)."""
    from family_oracle import check_types_as_converter

    check_types_as_converter("qwen3_5_moe-mm-mtp", outtype, checkpoint, converted, {
        "blk.4.ffn_gate_inp.weight": "F32", "blk.4.ffn_gate_inp_shexp.weight": "F32",
        "blk.4.ffn_gate_exps.weight": "OUT"})


def test_defaults_match_transformers():
    check_defaults("qwen3_5_moe_text")


@pytest.mark.parametrize("changes, reason", [
    (dict(linear_value_head_dim=16), "ssm.state_size"),
    (dict(layer_types=["linear_attention", "full_attention"]), "layer_types"),
    (dict(norm_topk_prob=False), "norm_topk_prob"),
    (dict(num_experts_per_tok=8), "num_experts_per_tok"),
], ids=["value_head_width", "layer_types_length", "norm_topk_prob", "too_many_chosen"])
def test_refuses_what_qwen35moe_cannot_run(changes, reason, checkpoint, tmp_path):
    assert_refused(checkpoint("qwen3_5_moe_text"), tmp_path, reason, **changes)


@pytest.mark.parametrize("name", FIXTURES)
def test_logits_bf16_within_the_converter_files_measured_ceiling(name, checkpoint, converted, record_property):
    """At bf16 llama.cpp running the converter's own file misses transformers by more than the bar (measured:
    1.6e-3; the recurrent DeltaNet state carries bf16's rounding through every
    position); the view, byte-identical to that file, is held to it."""
    record_property("family", "qwen3_5_moe_text")
    record_property("oracle", "logits")
    check_within_ceiling(name, "bf16", checkpoint, converted, transformers_logits)


@pytest.mark.parametrize("path", released_configs("qwen3_5_moe_text"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path):
    """The released config's text model (a wrapper's text_config, or a text-only release's top level): its widths,
    attention every 4th layer, its M-RoPE sections (the converter's [11, 11, 10] where none is stated)."""
    import json

    from hfview.families.qwen3_5_text import DEFAULT_MROPE_SECTION
    config = json.loads(path.read_text(encoding="utf-8"))
    text = config.get("text_config") or config
    kv = config_path_kv(path)
    n = text["num_hidden_layers"]
    assert kv["qwen35moe.block_count"] == n
    assert kv["qwen35moe.attention.recurrent_layers"] == [t == "linear_attention" for t in text["layer_types"]]
    assert kv["qwen35moe.expert_count"] == text["num_experts"]
    assert kv["qwen35moe.expert_used_count"] == text["num_experts_per_tok"]
    assert kv["qwen35moe.ssm.time_step_rank"] == text["linear_num_value_heads"]
    sections = text["rope_parameters"].get("mrope_section")
    assert kv["qwen35moe.rope.dimension_sections"] == (sections + [0] if sections else DEFAULT_MROPE_SECTION)
    assert kv["qwen35moe.rope.dimension_count"] == 64
