"""gpt-oss, BF16 exports (sinks, biases, interleaved gate/up columns, experts stored inputs-first, alternating
sliding-window layers): converter bytes at every outtype, llama.cpp logits (one fixture crosses its window),
refusals of what llama.cpp's gpt-oss cannot run. The MXFP4 release: tests/test_mxfp4.py."""
import json
from pathlib import Path

import numpy as np
import pytest

from family_defaults import check_defaults
from family_oracle import NMSE_BAR, PROMPT, nmse, oracle_tests
from family_variants import assert_refused, variant
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("gpt_oss", ["gpt_oss", "gpt_oss-window"])


def test_defaults_match_transformers():
    check_defaults("gpt_oss")


def test_the_window_is_crossed_and_applied(checkpoint):
    """gpt_oss-window's 16 tokens cross its 6-token window: transformers without the window differs from llama.cpp
    fed from the view by far more than the bar (with it, test_logits holds), so llama.cpp applies the window, as
    the family declares (llama_cpp_applies_window)."""
    import torch
    import transformers

    from hfview import HfCheckpoint
    from hfview.families.gpt_oss import FAMILY
    from hfview.runner.stream import StreamModel

    path = checkpoint("gpt_oss-window")
    with StreamModel(HfCheckpoint(path, "f32"), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        ours = m.logits(ids)
    config = transformers.AutoConfig.from_pretrained(path)
    config.sliding_window = 128
    model = transformers.AutoModelForCausalLM.from_pretrained(path, config=config, dtype=torch.float32)
    with torch.no_grad():
        unwindowed = model(torch.tensor([ids])).logits[0].numpy()
    assert nmse(ours[:6], unwindowed[:6]) < NMSE_BAR  # inside the window both agree
    assert nmse(ours[8:], unwindowed[8:]) > 100 * NMSE_BAR
    assert FAMILY.runner.llama_cpp_applies_window


def test_gate_and_up_are_the_interleaved_columns_transposed(checkpoint):
    """ffn_gate_exps / ffn_up_exps are the even / odd columns of each expert's inputs-first gate_up_proj,
    transposed; their biases the same columns of gate_up_proj_bias; down_proj transposed expert by expert."""
    from safetensors.numpy import load_file

    from hfview import HfCheckpoint

    path = checkpoint("gpt_oss-window")
    stored = load_file(str(path / "model.safetensors"))
    view = HfCheckpoint(path, "f32")
    by = {t.name: t for t in view.tensors}
    gate_up = stored["model.layers.1.mlp.experts.gate_up_proj"]
    bias = stored["model.layers.1.mlp.experts.gate_up_proj_bias"]
    assert np.array_equal(by["blk.1.ffn_gate_exps.weight"].read(), gate_up[:, :, 0::2].transpose(0, 2, 1))
    assert np.array_equal(by["blk.1.ffn_up_exps.weight"].read(), gate_up[:, :, 1::2].transpose(0, 2, 1))
    assert np.array_equal(by["blk.1.ffn_gate_exps.bias"].read(), bias[:, 0::2])
    assert np.array_equal(by["blk.1.ffn_up_exps.bias"].read(), bias[:, 1::2])
    down = stored["model.layers.1.mlp.experts.down_proj"]
    assert np.array_equal(by["blk.1.ffn_down_exps.weight"].read(), down.transpose(0, 2, 1))


@pytest.mark.xfail(len(released_configs("gpt_oss")) < 2, strict=True,
                   reason="one byte copy reached (gpt-oss-120b, in tt-metal); gpt-oss-20b's only inside other files")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("gpt_oss")) >= 2, released_configs("gpt_oss")


@pytest.mark.parametrize("path", released_configs("gpt_oss"), ids=lambda p: p.stem)
def test_released_config_is_accepted_as_released(path: Path):
    """The released configs state MXFP4 (quantization_config quant_method mxfp4), which the view reads as the
    converter does (tests/test_mxfp4.py); the KV carries the released values."""
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["gpt-oss.expert_count"] == released["num_local_experts"]
    assert kv["gpt-oss.expert_used_count"] == released["num_experts_per_tok"]
    assert kv["gpt-oss.attention.sliding_window"] == released["sliding_window"]
    assert kv["gpt-oss.expert_feed_forward_length"] == released["intermediate_size"]
    assert kv["gpt-oss.rope.freq_base"] == released["rope_theta"]
    assert kv["gpt-oss.rope.scaling.factor"] == released["rope_scaling"]["factor"]
    assert kv["gpt-oss.attention.key_length"] == released["head_dim"]


@pytest.mark.parametrize("changes, reason", [
    (dict(layer_types=["full_attention", "sliding_attention"]), "even layers"),
    (dict(sliding_window=0), "sliding_window 0"),
    (dict(swiglu_limit=10.0), "swiglu_limit 10.0"),
    (dict(swiglu_alpha=1.0), "swiglu_alpha 1.0"),
    (dict(attention_bias=False), "attention_bias False"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 150000.0}), "rope_type 'linear'"),
    (dict(num_local_experts=0), "needs experts"),
], ids=["layer_kinds", "no_window", "limit", "alpha", "no_bias", "tied", "linear_rope", "no_experts"])
def test_refuses_what_gpt_oss_cannot_run(changes, reason, checkpoint, tmp_path):
    """Layer kinds other than llama.cpp's fixed alternation, no window, SwiGLU constants other than llama.cpp's,
    no output bias, a tied output, another rope scaling, no experts."""
    assert_refused(checkpoint("gpt_oss"), tmp_path, reason, **changes)
