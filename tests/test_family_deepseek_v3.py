"""DeepSeek-V3 (latent attention; sigmoid, group-limited router with a selection bias): converter bytes at every
outtype, llama.cpp logits against transformers, the next-token-prediction layers skipped as the converter skips
them, released configs through the view's config path, refusals by name (a config without scoring_func); FP8 releases read dequantized."""
import json
from pathlib import Path

import pytest

from family_defaults import check_defaults
from family_oracle import oracle_tests
from family_variants import DROP, variant
from released_config import config_path_kv, released_configs

test_export, _ = oracle_tests("deepseek_v3", ["deepseek_v3"])
_, test_logits = oracle_tests("deepseek_v3", ["deepseek_v3"], outtypes=["f32", "f16"])


@pytest.mark.parametrize("outtype", ["bf16", "auto"])
def test_logits_bf16_within_the_converter_files_measured_ceiling(outtype, checkpoint, converted, record_property):
    """At bf16 (auto is bf16 here) llama.cpp rounds the activations to bf16 before each matmul, which flips
    sigmoid router choices (top-1 agreement 0.875): running the converter's own file it misses transformers'
    f32 pass by NMSE ~4.1e-3 (measured each run; at f32 and f16 the view meets the ordinary bar)."""
    from converter_ceiling import check_within_ceiling
    from family_oracle import transformers_logits

    record_property("family", "deepseek_v3")
    record_property("oracle", "logits")
    check_within_ceiling("deepseek_v3", outtype, checkpoint, converted, transformers_logits)


def test_defaults_match_transformers():
    check_defaults("deepseek_v3")


def test_selection_bias_and_gating_function_reach_the_file(checkpoint):
    """exp_probs_b carries the stored (nonzero) selection bias; the KV says sigmoid, the groups and the scale."""
    import numpy as np

    from hfview import HfCheckpoint

    view = HfCheckpoint(checkpoint("deepseek_v3"), "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["deepseek2.expert_gating_func"] == 2  # sigmoid
    assert kv["deepseek2.expert_group_count"] == 2 and kv["deepseek2.expert_group_used_count"] == 1
    assert kv["deepseek2.expert_weights_norm"] is True
    assert abs(kv["deepseek2.expert_weights_scale"] - 2.5) < 1e-6
    bias = view.read_tensor("blk.1.exp_probs_b.bias")
    assert bias.shape == (8,) and np.abs(bias).max() > 0.01
    assert "blk.0.exp_probs_b.bias" not in {t.name for t in view.tensors}  # the dense layer has no router


def test_next_token_prediction_layers_are_skipped(checkpoint, tmp_path):
    """A BF16 export stores DeepSeek-V3's MTP layer as model.layers.61 (after num_hidden_layers); the converter
    skips it, and so does the view."""
    import torch
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint

    src = checkpoint("deepseek_v3")
    dst = tmp_path / "with_mtp"
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "model.safetensors":
            (dst / f.name).symlink_to(f)
    tensors = load_file(str(src / "model.safetensors"))
    for name in [n for n in tensors if n.startswith("model.layers.2.")]:
        tensors[name.replace("model.layers.2.", "model.layers.3.")] = tensors[name].clone()
    tensors["model.layers.3.eh_proj.weight"] = torch.zeros((32, 64), dtype=torch.bfloat16)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    with_mtp, without = HfCheckpoint(dst, "f32"), HfCheckpoint(src, "f32")
    assert [t.name for t in with_mtp.tensors] == [t.name for t in without.tensors]
    not_named = lambda view: [kv for kv in view.kv if not kv.key.startswith("general.")]  # noqa: E731 (dir names)
    assert not_named(with_mtp) == not_named(without)


@pytest.mark.parametrize("changes, reason", [
    (dict(scoring_func=DROP), "no scoring_func"),
    (dict(scoring_func="softmax"), "scoring_func 'softmax'"),
    (dict(topk_method="greedy"), "topk_method"),
    (dict(rope_interleave=False), "rope_interleave"),
    (dict(n_group=3), "n_group 3"),
    (dict(n_group=8, topk_group=4), "n_group 8"),
    (dict(num_key_value_heads=2), "num_key_value_heads 2"),
    (dict(attention_bias=True), "attention_bias"),
], ids=["no_scoring_func", "softmax", "greedy", "rope_not_interleaved", "uneven_groups", "groups_of_one", "kv_heads", "bias"])
def test_refuses_what_deepseek2_cannot_run_as_transformers_does(changes, reason, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("deepseek_v3"), tmp_path / "v", **changes))


def test_fp8_release_is_read_as_the_same_tensors(checkpoint):
    """DeepSeek-V3 / R1 as released (block-wise FP8, quantization_config fp8): read dequantized, it presents the
    tensors the BF16 checkpoint presents (names, shapes, types), no scale among them; its bytes and logits are
    tests/test_fp8.py's (deepseek_v3-fp8)."""
    from hfview import HfCheckpoint

    fp8 = HfCheckpoint(checkpoint("deepseek_v3-fp8"), "auto")
    bf16 = HfCheckpoint(checkpoint("deepseek_v3"), "auto")
    assert [(t.name, t.shape, t.ggml_type) for t in fp8.tensors] == [(t.name, t.shape, t.ggml_type) for t in bf16.tensors]


@pytest.mark.parametrize("path", released_configs("deepseek_v3"), ids=lambda p: p.stem)
def test_released_config(path: Path):
    """Each released config, FP8 (read dequantized) or BF16: accepted with its values in the KV."""
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["deepseek2.expert_gating_func"] == 2
    assert kv["deepseek2.expert_count"] == released["n_routed_experts"]
    assert kv["deepseek2.expert_group_count"] == released["n_group"]
    assert kv["deepseek2.expert_group_used_count"] == released["topk_group"]
    assert kv["deepseek2.attention.q_lora_rank"] == released["q_lora_rank"]
    assert kv["deepseek2.block_count"] == released["num_hidden_layers"]
    assert abs(kv["deepseek2.expert_weights_scale"] - released["routed_scaling_factor"]) < 1e-6


def test_logits_four_groups_keeping_two_within_the_converter_files_measured_ceiling(checkpoint, tmp_path,
                                                                                    record_property):
    """The fixture with n_group 4, topk_group 2 (groups of two experts, half of them kept): llama.cpp running the
    converter's own file of it misses transformers by NMSE ~5e-2 (measured each run), while keeping 1 or 3 of
    the 4 groups, or 1 of 2, it meets the ordinary bar. transformers' choices there agree with a numpy reading of
    DeepSeek-V3's rule, so llama.cpp's group-limited selection is what differs at this shape (its cause is not
    found yet). Measured by hand on the same spec with 16 experts in 8 groups keeping 4 (DeepSeek-V3's group
    ratio), top-4 and top-2: NMSE 9.8e-7, so the miss is not group limits as such."""
    import oracle
    from converter_ceiling import GGUFFile, llama_cpp_logits
    from family_oracle import NMSE_BAR, nmse, transformers_logits
    from hfview import HfCheckpoint

    record_property("family", "deepseek_v3")
    record_property("oracle", "logits")
    path = variant(checkpoint("deepseek_v3"), tmp_path / "groups", n_group=4, topk_group=2)
    ids, ours = llama_cpp_logits(HfCheckpoint(path, "f32"))
    _, theirs = llama_cpp_logits(GGUFFile(oracle.convert_cached(path, "f32")), ids)
    ref = transformers_logits(path, ids)
    ceiling, value = nmse(theirs, ref), nmse(ours, ref)
    print(f"deepseek_v3 n_group 4 topk_group 2 f32: NMSE {value:.3e}, measured ceiling {ceiling:.3e}")
    assert ceiling > NMSE_BAR, f"the converter's file now meets the ordinary bar ({ceiling:.3e}): drop this ceiling"
    assert value <= ceiling * (1 + 1e-6)


def test_fp8_release_on_the_hub_is_resolved(checkpoint, tmp_path, monkeypatch):
    """DeepSeek-V3 / R1 as published (FP8): the quantization the view reads does not stop resolution (the fake Hub
    of tests/test_resolve_hub.py); the shards are fetched as for a BF16 upload."""
    from hub_server import FakeHub, tiny_checkpoint
    from hfview.runner.resolve import resolve

    server = FakeHub().start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.chdir(tmp_path)
        from huggingface_hub import constants
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
        config = json.loads((checkpoint("deepseek_v3") / "config.json").read_text())
        config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                         "weight_block_size": [128, 128]}
        server.add_repo("acme/tiny-deepseek-v3-fp8", tiny_checkpoint(config, shards=2))
        resolved = resolve("acme/tiny-deepseek-v3-fp8", progress=False)
        assert resolved.raw_config["quantization_config"]["quant_method"] == "fp8"
        assert server.weight_requests() != []
    finally:
        server.stop()
