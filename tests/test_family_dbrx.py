"""DBRX (fused Wqkv with its clamp, experts stored fused per layer, w2 inputs-first): converter bytes at every
outtype; logits under the ordinary bar on a fixture whose rope base transformers 5.24 reads, and against the
measured ceiling on one laid out as released (rope_theta in attn_config only, which transformers 5.24 no longer
reads: it rotates with 10000 where the converter writes 500000), with the cause shown; refusals."""
from pathlib import Path

import numpy as np
import pytest

from family_oracle import NMSE_BAR, OUTTYPES, nmse, oracle_tests, transformers_logits
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

test_export, _ = oracle_tests("dbrx", ["dbrx", "dbrx-f32"])
_, test_logits = oracle_tests("dbrx", ["dbrx-f32"])


# llama.cpp reading a GGUF file (the converter's own) as it reads the view, and its logits
from converter_ceiling import GGUFFile as _File, llama_cpp_logits as _logits  # noqa: E402


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_logits_released_layout_within_the_converter_files_measured_ceiling(outtype, checkpoint, converted,
                                                                            record_property):
    """The released layout: llama.cpp from the view vs transformers, held to what llama.cpp running the
    converter's own file scores (measured here: about 6e-2; it must stay above the ordinary bar)."""
    from hfview import HfCheckpoint

    record_property("family", "dbrx")
    record_property("oracle", "logits")
    path = checkpoint("dbrx")
    ids, ours = _logits(HfCheckpoint(path, outtype))
    _, theirs = _logits(_File(converted("dbrx", outtype)), ids)
    ref = transformers_logits(path, ids)
    ceiling = nmse(theirs, ref)
    assert ceiling > NMSE_BAR, f"the converter's file now meets the ordinary bar ({ceiling:.3e}): drop this ceiling"
    value = nmse(ours, ref)
    print(f"dbrx {outtype}: NMSE {value:.3e}, measured ceiling (converter's file) {ceiling:.3e}")
    assert value <= ceiling * (1 + 1e-6), f"view {value:.3e} > the converter's file {ceiling:.3e}"


def test_the_released_layouts_ceiling_is_transformers_rope_base(checkpoint):
    """transformers rotating with attn_config.rope_theta (the base the converter writes) agrees with llama.cpp fed
    from the view under the ordinary bar: the whole miss is the rope base transformers 5.24 reads."""
    import torch
    import transformers

    from hfview import HfCheckpoint

    path = checkpoint("dbrx")
    ids, ours = _logits(HfCheckpoint(path, "f32"))
    config = transformers.AutoConfig.from_pretrained(path)
    assert config.rope_parameters["rope_theta"] == 10000.0 and config.attn_config.rope_theta == 500000
    config.rope_parameters = {"rope_type": "default", "rope_theta": float(config.attn_config.rope_theta)}
    model = transformers.AutoModelForCausalLM.from_pretrained(path, config=config, dtype=torch.float32)
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].numpy()
    value = nmse(ours, ref)
    print(f"dbrx f32 vs transformers at rope_theta 500000: NMSE {value:.3e}")
    assert value < NMSE_BAR and np.isfinite(ours).all()


def test_defaults_match_transformers():
    """As check_defaults, with the sub-configs compared field by field (transformers' to_dict of a nested config
    also carries every config class's generic keys, which the family takes as harmless)."""
    from transformers import DbrxConfig

    from hfview.families.dbrx import ATTN_DEFAULTS, DEFAULTS, FFN_DEFAULTS

    theirs = DbrxConfig().to_dict()
    for key, value in DEFAULTS["dbrx"].items():
        if key not in ("attn_config", "ffn_config"):
            assert theirs[key] == value, key
    assert {k: theirs["attn_config"][k] for k in ATTN_DEFAULTS} == ATTN_DEFAULTS
    assert "rope_theta" not in theirs["attn_config"]
    assert {k: theirs["ffn_config"][k] for k in FFN_DEFAULTS} == FFN_DEFAULTS


def test_router_is_written_at_the_outtype(checkpoint):
    """DbrxModel.tensor_force_quant asks every matrix at the outtype: the router too (elsewhere kept F32)."""
    from hfview import HfCheckpoint
    from hfview.gguf_layout import GGMLType

    view = HfCheckpoint(checkpoint("dbrx"), "f16")
    types = {t.name: t.ggml_type for t in view.tensors}
    assert types["blk.0.ffn_gate_inp.weight"] == GGMLType.F16
    assert types["blk.0.attn_norm.weight"] == GGMLType.F32


def test_expert_blocks_transpose_one_expert_at_a_time(tmp_path):
    """Reading w2 presented [experts, d_model, ffn] holds the result and one expert's block (and its transpose)
    at a time, never the stack twice (8 experts of 512 KiB: the peak stays under the stack plus three experts)."""
    import tracemalloc

    from safetensors.numpy import save_file

    from hfview.shards import index_shards
    from hfview.views import Transposed

    rng = np.random.default_rng(0)
    w2 = rng.standard_normal((8 * 256, 512), dtype=np.float32)
    save_file({"w2": w2}, str(tmp_path / "model.safetensors"))
    view = Transposed(index_shards(tmp_path)["w2"], blocks=8)
    assert view.shape == (8, 512, 256)
    one = w2.nbytes // 8
    tracemalloc.start()
    try:
        got = view.rows(0, view.n_rows)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.array_equal(got.reshape(8, 512, 256), w2.reshape(8, 256, 512).transpose(0, 2, 1))
    assert peak < w2.nbytes + 3 * one, f"peak {peak} bytes reading a {w2.nbytes}-byte stack of {one}-byte experts"
    # reads in pieces that straddle experts give the same rows
    parts = np.concatenate([view.rows(i, min(i + 300, view.n_rows)) for i in range(0, view.n_rows, 300)])
    assert np.array_equal(parts, got)


@pytest.mark.xfail(len(released_configs("dbrx")) < 2, strict=True,
                   reason="no byte copy of a released DBRX config.json in the repositories the search reaches (the "
                          "copies found are edited: tests' dicts, an MLX 4-bit conversion's config)")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("dbrx")) >= 2, released_configs("dbrx")


@pytest.mark.parametrize("path", released_configs("dbrx"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path: Path):
    """Each released config passes the key checks (its sub-configs' too) and the family's, and its KV carries the
    released sub-config values (rope_theta from attn_config, not transformers' default)."""
    import json
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    attn, ffn = released["attn_config"], released["ffn_config"]
    assert kv["dbrx.rope.freq_base"] == attn["rope_theta"]
    assert kv["dbrx.attention.clamp_kqv"] == attn["clip_qkv"]
    assert kv["dbrx.attention.head_count_kv"] == attn["kv_n_heads"]
    assert kv["dbrx.expert_count"] == ffn["moe_num_experts"]
    assert kv["dbrx.expert_used_count"] == ffn["moe_top_k"]
    assert kv["dbrx.feed_forward_length"] == ffn["ffn_hidden_size"]
    assert kv["dbrx.context_length"] == released["max_seq_len"]


_ATTN = {"clip_qkv": 8, "kv_n_heads": 2, "model_type": "", "rope_theta": 500000}
_FFN = {"ffn_hidden_size": 56, "model_type": "", "moe_jitter_eps": 0.01, "moe_loss_weight": 0.05,
        "moe_num_experts": 4, "moe_top_k": 2}


@pytest.mark.parametrize("changes, reason", [
    (dict(attn_config=dict(_ATTN, clip_qkv=None)), "clip_qkv None"),
    (dict(attn_config={k: v for k, v in _ATTN.items() if k != "rope_theta"}), "rope_theta None"),
    (dict(attn_config=dict(_ATTN, qk_ln=True)), "attn_config.qk_ln"),
    (dict(ffn_config=dict(_FFN, moe_normalize_expert_weights=2.0)), "moe_normalize_expert_weights 2.0"),
    (dict(ffn_config=dict(_FFN, ffn_act_fn={"name": "gelu"})), "ffn_act_fn"),
    (dict(ffn_config=dict(_FFN, moe_top_k=5)), "more than the 4 experts"),
    (dict(ffn_config=dict(_FFN, moe_num_experts="4")), "moe_num_experts '4'"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(rope_scaling={"type": "linear", "factor": 2.0}), "rope_type 'linear'"),
    (dict(ffn_config=dict(_FFN, uniform_expert_assignment=True)), "uniform_expert_assignment True"),
    (dict(ffn_config=dict(_FFN, moe_normalize_expert_weights=1)), "weights 1: an integer: transformers 5.24"),
], ids=["no_clip", "no_rope_theta", "unknown_attn_key", "p_norm_2", "gelu", "top_k", "count_type", "tied", "scaled",
        "uniform_assignment", "int_normalisation"])
def test_refuses_what_dbrx_cannot_run(changes, reason, checkpoint, tmp_path):
    """What the converter fails on (no clamp, no rope base), sub-config keys the family does not know, routing or
    activations llama.cpp's dbrx does not compute, a tied output, scaled rope, the release's benchmarking switch on,
    and an integer where transformers 5.24's strict DbrxFFNConfig takes a float (it then refuses the config, and the
    converter reads the raw file) are refused by name."""
    assert_refused(checkpoint("dbrx"), tmp_path, reason, **changes)
