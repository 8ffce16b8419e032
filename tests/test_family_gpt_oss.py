"""gpt-oss, BF16 exports (sinks, biases, interleaved gate/up columns, experts stored inputs-first, alternating
sliding-window layers): converter bytes at every outtype, llama.cpp logits (one fixture crosses its window),
the MXFP4 release refused before any weight is read or downloaded, refusals of what llama.cpp's gpt-oss cannot
run."""
import json
from pathlib import Path

import numpy as np
import pytest

from family_defaults import check_defaults
from family_oracle import NMSE_BAR, PROMPT, nmse, oracle_tests
from family_variants import assert_refused, variant
from released_config import config_path_kv, released_configs

test_export, test_logits = oracle_tests("gpt_oss", ["gpt_oss", "gpt_oss-window"])

# gpt-oss-20b's quantization_config as released
MXFP4 = {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                                    "lm_head"], "quant_method": "mxfp4"}


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


def test_mxfp4_checkpoint_is_refused_before_any_weight_is_read(checkpoint, tmp_path):
    """The release as published (quantization_config quant_method mxfp4) is refused naming the method, by the
    view and by the runner's resolution, before a shard is opened."""
    from hfview import HfCheckpoint
    from hfview.errors import QuantizedCheckpoint
    from hfview.runner.resolve import resolve

    model = variant(checkpoint("gpt_oss"), tmp_path / "mxfp4", quantization_config=MXFP4)
    (model / "model.safetensors").unlink()
    (model / "model.safetensors").write_bytes(b"not read")  # a shard that cannot be parsed: never opened
    with pytest.raises(QuantizedCheckpoint, match=r'\(MXFP4, quant_method "mxfp4"\).*BF16 export'):
        HfCheckpoint(model)
    with pytest.raises(QuantizedCheckpoint, match="MXFP4"):
        resolve(str(model), progress=False)


def test_mxfp4_repository_is_refused_before_any_weight_download(tmp_path, monkeypatch):
    """From the Hub: the config is all that is fetched (the fake Hub's log shows no weight request)."""
    from hub_server import FakeHub, tiny_checkpoint
    from hfview.runner.errors import QuantizedCheckpoint
    from hfview.runner.resolve import resolve
    from huggingface_hub import constants

    server = FakeHub().start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
        config = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_hidden_layers": 2,
                  "hidden_size": 32, "quantization_config": MXFP4}
        server.add_repo("acme/tiny-gpt-oss-mxfp4", tiny_checkpoint(config, shards=2))
        with pytest.raises(QuantizedCheckpoint, match="MXFP4"):
            resolve("acme/tiny-gpt-oss-mxfp4", progress=False)
        assert server.weight_requests() == []
        assert server.files_requested() == ["config.json"]
    finally:
        server.stop()


@pytest.mark.xfail(len(released_configs("gpt_oss")) < 2, strict=True,
                   reason="one byte copy reached (gpt-oss-120b, in tt-metal); gpt-oss-20b's only inside other files")
def test_at_least_two_released_configs_collected():
    assert len(released_configs("gpt_oss")) >= 2, released_configs("gpt_oss")


@pytest.mark.parametrize("path", released_configs("gpt_oss"), ids=lambda p: p.stem)
def test_released_config_is_refused_as_mxfp4_and_accepted_as_its_bf16_export(path: Path, tmp_path):
    """The released configs state MXFP4 (refused by name); the same config without it, as a BF16 export states it,
    is accepted and its KV carries the released values."""
    from hfview.errors import QuantizedCheckpoint

    released = json.loads(path.read_text(encoding="utf-8"))
    if (released.get("quantization_config") or {}).get("quant_method") == "mxfp4":
        with pytest.raises(QuantizedCheckpoint, match="MXFP4"):
            config_path_kv(path)
        # its BF16 export states the same config without the quantization
        bf16 = tmp_path / path.parent.name / path.name
        bf16.parent.mkdir()
        bf16.write_text(json.dumps({k: v for k, v in released.items() if k != "quantization_config"}))
        path = bf16
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
