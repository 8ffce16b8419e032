"""ERNIE 4.5 MoE (a dense first layer, routed experts with a selection bias, shared experts): converter bytes at
every outtype, llama.cpp logits, refusals of layer layouts and widths llama.cpp's ernie4_5-moe cannot run."""
from pathlib import Path

import numpy as np
import pytest

from family_defaults import check_defaults
from family_oracle import NMSE_BAR, PROMPT, nmse, oracle_tests
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("ernie4_5_moe", ["ernie4_5_moe", "ernie4_5_moe-f32"])


def test_defaults_match_transformers():
    check_defaults("ernie4_5_moe")


def test_the_selection_bias_changes_the_choice(checkpoint):
    """e_score_correction_bias (exp_probs_b) decides which experts are chosen: transformers without it misses
    llama.cpp fed from the view by far more than the bar (with it, test_logits holds)."""
    import torch
    import transformers

    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    path = checkpoint("ernie4_5_moe-f32")
    with StreamModel(HfCheckpoint(path, "f32"), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        ours = m.logits(ids)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("e_score_correction_bias"):
                p.zero_()
        unbiased = model(torch.tensor([ids])).logits[0].numpy()
    assert nmse(ours, unbiased) > 10 * NMSE_BAR and np.isfinite(ours).all()


def test_a_missing_dense_ffn_is_named(checkpoint, tmp_path):
    """Layer 0 is dense by moe_layer_start_index: a checkpoint whose layer 0 stores no dense FFN is refused naming
    the tensor, before llama.cpp would fail to load it."""
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    src = checkpoint("ernie4_5_moe")
    dst = tmp_path / "broken"
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "model.safetensors":
            (dst / f.name).symlink_to(f)
    tensors = load_file(str(src / "model.safetensors"))
    save_file({k: v for k, v in tensors.items() if not k.startswith("model.layers.0.mlp.")},
              str(dst / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"model\.layers\.0\.mlp\.gate_proj\.weight.*layer 0 is dense"):
        HfCheckpoint(dst)


@pytest.mark.xfail(len(released_configs("ernie4_5_moe")) < 2, strict=True,
                   reason="no byte copy of a released ERNIE 4.5 MoE config.json in the repositories the search "
                          "reaches (the copies found are tests' trimmed dicts)")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("ernie4_5_moe")) >= 2, released_configs("ernie4_5_moe")


@pytest.mark.parametrize("path", released_configs("ernie4_5_moe"), ids=lambda p: p.stem)
def test_released_config_is_accepted(path: Path):
    import json
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["ernie4_5-moe.expert_count"] == released["moe_num_experts"]
    assert kv["ernie4_5-moe.expert_used_count"] == released["moe_k"]
    assert kv["ernie4_5-moe.leading_dense_block_count"] == released["moe_layer_start_index"]


@pytest.mark.parametrize("changes, reason", [
    (dict(moe_layer_interval=2), "moe_layer_interval 2"),
    (dict(moe_layer_end_index=1), "moe_layer_end_index 1"),
    (dict(moe_layer_start_index=3), "no layer holds a mixture"),
    (dict(intermediate_size=64), "shared experts' width"),
    (dict(moe_num_experts=0), "without experts"),
    (dict(moe_k=5), "more than the 4 experts"),
    (dict(moe_norm_min=0.6), "moe_norm_min 0.6"),
    (dict(use_bias=True), "use_bias"),
    (dict(hidden_act="gelu"), "hidden_act"),
], ids=["interval", "end_index", "start_index", "shared_width", "no_experts", "top_k", "norm_min", "bias", "gelu"])
def test_refuses_what_ernie4_5_moe_cannot_run(changes, reason, checkpoint, tmp_path):
    """Dense layers between or after the mixtures (llama.cpp loads experts in every layer from
    moe_layer_start_index on), a shared width other than the converter's intermediate_size / KV heads, no experts,
    a clamp the chosen weights can reach, biases, another activation."""
    assert_refused(checkpoint("ernie4_5_moe"), tmp_path, reason, **changes)
