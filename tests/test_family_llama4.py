"""Llama 4 (Llama4ForCausalLM -> llama.cpp llama4): converter bytes at every outtype, llama.cpp logits, defaults vs
transformers, refusals by name of what llama.cpp's llama4 fixes otherwise."""
import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import variant

test_export, test_logits = oracle_tests("llama4", ["llama4", "llama4-scout", "llama4-image-text"])


def test_defaults_match_transformers():
    check_defaults("llama4")


@pytest.mark.parametrize("changes, reason", [
    (dict(moe_layers=[0, 1, 2, 3]), "moe_layers"),
    (dict(no_rope_layers=[1, 1, 1, 1]), "no_rope_layers"),
    (dict(layer_types=["full_attention"] * 4), "layer_types"),
    (dict(attention_chunk_size=4096), "attention_chunk_size 4096"),
    (dict(attn_temperature_tuning=False), "attn_temperature_tuning False"),
    (dict(floor_scale=4096), "floor_scale 4096"),
    (dict(attn_scale=0.2), "attn_scale 0.2"),
    (dict(use_qk_norm=False), "use_qk_norm False with 4 experts"),
    (dict(attention_bias=True), "attention_bias"),
    (dict(hidden_act="gelu"), "hidden_act"),
], ids=["moe_layers", "nope_layers", "layer_types", "chunk", "no_temperature", "floor", "scale", "qk_norm", "bias",
        "gelu"])
def test_refuses_what_llama4_fixes_otherwise(changes, reason, checkpoint, tmp_path):
    """Each per-layer list and each constant llama.cpp's llama4 computes whatever the file says is read, and a value
    that differs from it is refused by name before any weight is read."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("llama4"), tmp_path / "v", **changes), "f32")


def test_the_wrapper_is_read_as_its_text_model(checkpoint):
    """Llama4ForConditionalGeneration: the text model's tensors only (no vision or projector tensor presented),
    the text config's hyperparameters."""
    from hfview import HfCheckpoint

    ck = HfCheckpoint(checkpoint("llama4-image-text"), "f32")
    names = [t.name for t in ck.tensors]
    assert not [n for n in names if "vision" in n or "mm" in n.split(".")[0]]
    assert "blk.1.ffn_gate_exps.weight" in names and "blk.0.ffn_gate.weight" in names
    kv = {k.key: k.value for k in ck.kv}
    assert kv["llama4.interleave_moe_layer_step"] == 2 and kv["llama4.expert_feed_forward_length"] == 16
    assert kv["llama4.feed_forward_length"] == 48


def test_expert_columns_stream_one_expert_at_a_time(tmp_path):
    """Reading a fused, inputs-first expert stack's gate half holds the destination and one expert's columns at a
    time, never the stack (8 experts of 512 KiB: the peak stays under the half-stack plus two experts)."""
    import tracemalloc

    import numpy as np
    from safetensors.numpy import save_file

    from hfview.shards import index_shards
    from hfview.views import ExpertColumns

    rng = np.random.default_rng(0)
    fused = rng.standard_normal((8, 256, 512), dtype=np.float32)  # [experts, in, 2 x ff]
    save_file({"e": fused}, str(tmp_path / "model.safetensors"))
    view = ExpertColumns(index_shards(tmp_path)["e"], 0, 256, "gate half")
    one = fused[0].nbytes
    tracemalloc.start()
    try:
        got = view.rows(0, view.n_rows)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(got.reshape(8, 256, 256), fused[:, :, :256].transpose(0, 2, 1))
    assert peak < fused.nbytes // 2 + 2 * one, f"peak {peak} bytes for a {fused.nbytes}-byte stack"
    # rows asked for in pieces across experts give the same
    parts = np.concatenate([view.rows(a, min(a + 100, view.n_rows)) for a in range(0, view.n_rows, 100)])
    assert np.array_equal(parts, got)
