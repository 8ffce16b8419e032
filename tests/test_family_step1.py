"""Step1 (Step1ForCausalLM, model_type step1, remote code): refused by name. transformers 5.24 has no class for it
and no llama.cpp architecture computes it: its attention adds ALiBi over the square root of the distance (the
release's modeling code builds `-sqrt(i - j) * slope` in build_alibi_cache; vLLM's port, vllm/model_executor/models/
step1.py, passes use_alibi_sqrt=True), while llama.cpp's ALiBi adds `-slope * |i - j|` (src/llama-graph.cpp fills
the mask with -abs(p0 - p1) where use_alibi). Its block is otherwise Llama's without rotary, which no llama.cpp
architecture computes with a square-root bias."""
import json

import pytest

# Step1's config as its modeling code's Step1Config names the keys (num_attention_groups: its KV head count)
CONFIG = {"architectures": ["Step1ForCausalLM"], "model_type": "step1", "hidden_size": 64, "intermediate_size": 96,
          "num_attention_heads": 4, "num_attention_groups": 2, "num_hidden_layers": 2, "max_seq_len": 4096,
          "vocab_size": 32000, "rms_norm_eps": 1e-5, "auto_map": {"AutoModelForCausalLM": "modeling_step1.Step1ForCausalLM"}}


def test_the_gate_names_the_square_root_alibi(tmp_path):
    from hfview.runner.resolve import UnsupportedArchitecture, gate

    with pytest.raises(UnsupportedArchitecture, match=r"step1: .*square root of the distance.*linear"):
        gate(CONFIG, tmp_path / "config.json")


def test_hfcheckpoint_refuses_it_by_name(tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    with pytest.raises(ConfigError, match="cannot be presented as a GGUF: .*ALiBi over the square root"):
        HfCheckpoint(tmp_path)


def test_coverage_says_why_nothing_runs_it():
    from hfview.coverage import route_for

    route = route_for("step1")
    assert route.kind == "none" and "square root" in route.detail
