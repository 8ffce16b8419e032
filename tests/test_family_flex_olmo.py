"""FlexOlmo (FlexOlmoForCausalLM): neither the pinned converter (no class registers FlexOlmoForCausalLM) nor llama.cpp
(no FlexOlmo architecture in src/llama-arch.cpp) has it, so it goes to the torch fallback: `hfview generate` runs
it with transformers, and inspect, export and parity refuse it naming why."""
import json

import pytest
from click.testing import CliRunner

from hfview.cli import main


@pytest.fixture(scope="module")
def flex_olmo_dir(tmp_path_factory):
    """A tiny random FlexOlmo (4 experts, 2 per token), GPT-2's tokenizer files standing in for OLMo's."""
    from conftest import _torch_only_model
    return _torch_only_model(tmp_path_factory, "flex_olmo", lambda t: t.FlexOlmoForCausalLM(t.FlexOlmoConfig(
        vocab_size=50257, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, num_experts=4, num_experts_per_tok=2, max_position_embeddings=128,
        bos_token_id=None, eos_token_id=50256, pad_token_id=50256)))


def test_the_pinned_converter_and_llama_cpp_have_no_flex_olmo():
    """Checked against the sdist when it is unpacked: no converter class names FlexOlmo, no llama.cpp
    architecture either."""
    from pathlib import Path
    root = Path("/tmp/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp")
    if not root.is_dir():
        pytest.skip("the pinned llama.cpp sources are not unpacked")
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in
             [*(root / "conversion").glob("*.py"), root / "src" / "llama-arch.cpp"]]
    assert not any("flexolmo" in t.lower().replace("_", "") for t in texts)


def test_generate_runs_it_with_transformers(flex_olmo_dir, record_property):
    record_property("family", "flex_olmo")  # the coverage table (docs/families.md) reads the outcome
    record_property("oracle", "torch")
    gen = CliRunner().invoke(main, ["generate", "--model", str(flex_olmo_dir), "--prompt", "Hello", "--max-tokens",
                                    "3", "--temperature", "0", "--json", "--no-progress"])
    assert gen.exit_code == 0, gen.output
    assert json.loads(gen.stdout)["backend"] == "torch" and "'flex_olmo'" in gen.stderr


@pytest.mark.parametrize("command", [["inspect"], ["export"]])
def test_inspect_and_export_refuse_it_naming_why(flex_olmo_dir, tmp_path, command):
    args = [*command, str(flex_olmo_dir)] + ([str(tmp_path / "out.gguf")] if command == ["export"] else [])
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "cannot be presented as a GGUF: llama.cpp has no FlexOlmo architecture" in res.stderr
    assert "hfview generate` runs it with transformers" in res.stderr
    assert not (tmp_path / "out.gguf").exists() and not (tmp_path / "out.gguf.partial").exists()


def test_parity_refuses_it_naming_why(flex_olmo_dir):
    res = CliRunner().invoke(main, ["parity", "--model", str(flex_olmo_dir)])
    assert res.exit_code == 1 and "family 'flex_olmo'" in res.stderr
    assert "no class for FlexOlmoForCausalLM" in res.stderr
