"""Every model type of the design has a route, and each route is what this build does.

The view's model types are proven family by family in tests/test_family_*.py. Here: every design model type that
the view does not present but transformers has a class for runs through `hfview generate`'s torch fallback on a
tiny random model of that class (a smoke test: it runs, its backend is torch, its text comes back — not a parity
claim, since transformers is the only backend on that route); and docs/families.md, which tools/family_table.py
writes, lists every design model type with the route this build takes and is what the tool writes from the
registry and the tests as they are now.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hfview.cli import main
from hfview.coverage import DESIGN_MODEL_TYPES, route_for

ROOT = Path(__file__).resolve().parent.parent

# The sizes every tiny model takes where its config class has the key; GPT-2's tokenizer files stand in.
_SMALL = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=8, vocab_size=50257, moe_intermediate_size=32,
              max_position_embeddings=128, pad_token_id=0, num_experts=4, n_routed_experts=4, num_local_experts=4,
              moe_num_experts=4, num_experts_per_tok=2, ffn_hidden_size=64, expert_ffn_hidden_size=32,
              vocab_size_per_layer_input=50257, num_experts_per_token=2, n_group=1, topk_group=1, bos_token_id=50256, eos_token_id=50256)
_LATENT = dict(num_key_value_heads=4, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, kv_lora_rank=16,
               q_lora_rank=16)
# What a config class needs beyond the sizes: its layer lists at two layers, one of each kind.
_OWN = {
    "lfm2_moe": dict(layer_types=["conv", "full_attention"], num_dense_layers=1),
    "kimi_linear": dict(layer_types=["linear_attention", "full_attention"], mlp_layer_types=["dense", "sparse"],
                        linear_num_heads=4, num_key_value_heads=4),
    "zamba2": dict(layers_block_type=["mamba", "hybrid"], hybrid_layer_ids=[1], n_mamba_heads=4,
                   num_key_value_heads=4),
    "bailing_hybrid": dict(layer_types=["linear_attention", "full_attention"], mlp_layer_types=["dense", "sparse"],
                           layer_group_size=2, linear_num_heads=4, num_expert_group=1, num_key_value_heads=4, num_nextn_predict_layers=0),
    "gemma3n_text": dict(layer_types=["sliding_attention", "full_attention"], hidden_size_per_layer_input=8,
                         num_kv_shared_layers=0, activation_sparsity_pattern=[0.0, 0.0]),
    "gemma4_text": dict(hidden_size_per_layer_input=8, global_head_dim=16),
    "dots3_note": dict(text_config=dict(hidden_size=32, intermediate_size=64, moe_intermediate_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, n_routed_experts=4,
                                        num_experts_per_tok=2, n_group=1, topk_group=1, vocab_size=50257,
                                        index_n_heads=2, index_head_dim=16, mlp_layer_types=["dense", "sparse"],
                                        pad_token_id=0, bos_token_id=50256, eos_token_id=50256, **_LATENT),
                       vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                          num_attention_heads=4, moe_intermediate_size=32, num_local_experts=4,
                                          num_experts_per_tok=2, adapter_in_dim=32, adapter_out_dim=32, per_layer_config={}),
                       audio_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                         num_attention_heads=4, num_key_value_heads=4, head_dim=8,
                                         adapter_input_size=32, adapter_out_dim=32)),
    "qwen3_next": dict(num_hidden_layers=4), "qwen3_5_text": dict(num_hidden_layers=4),
    "qwen3_5_moe_text": dict(num_hidden_layers=4),
    **{t: _LATENT for t in ("deepseek_v32", "glm_moe_dsa", "sarvam_mla", "axk1", "longcat_flash")},
}
# The torch route's families with tests of their own (tests/conftest.py, tests/test_family_flex_olmo.py).
_TESTED_ELSEWHERE = {"opt", "gptj", "flex_olmo"}
TORCH_ROUTE = [t for t in DESIGN_MODEL_TYPES if route_for(t).kind == "torch" and t not in _TESTED_ELSEWHERE]


def _tiny(model_type: str, out: Path) -> Path:
    import shutil

    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    config_class = CONFIG_MAPPING[model_type]
    stated = config_class().to_dict()
    config = config_class(**{**{k: v for k, v in _SMALL.items() if k in stated}, **_OWN.get(model_type, {})})
    torch.manual_seed(0)
    model = getattr(transformers, route_for(model_type).detail.split(";")[0])(config)
    assert sum(p.numel() for p in model.parameters()) < 20_000_000, f"{model_type}: the tiny model is not tiny"
    model.save_pretrained(out)
    for file in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(ROOT / "fixtures" / "tokenizers" / "gpt-2" / file, out / file)
    return out


@pytest.mark.parametrize("model_type", TORCH_ROUTE)
def test_torch_route_generates(model_type, tmp_path, record_property):
    pytest.importorskip("transformers")
    record_property("family", model_type)  # docs/families.md's coverage table reads the outcome
    record_property("oracle", "torch")
    ckpt = _tiny(model_type, tmp_path / model_type)
    res = CliRunner().invoke(main, ["generate", "--model", str(ckpt), "--prompt", "Hello", "--max-tokens", "3",
                                    "--temperature", "0", "--json", "--no-progress"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["backend"] == "torch" and isinstance(out["text"], str)


def test_every_design_model_type_has_a_route():
    assert len(DESIGN_MODEL_TYPES) == len(set(DESIGN_MODEL_TYPES)) == 131
    for model_type in DESIGN_MODEL_TYPES:
        route = route_for(model_type)
        assert route.kind in ("view", "torch", "none") and route.detail, model_type


FAMILIES_DOC = ROOT / "docs" / "families.md"
REGENERATE = "regenerate docs/families.md: python tools/family_table.py"


def _family_table():
    sys.path.insert(0, str(ROOT / "tools"))
    import family_table
    return family_table


def test_families_doc_lists_every_design_model_type_with_its_route():
    text = FAMILIES_DOC.read_text(encoding="utf-8")
    table = text[text.index("<!-- coverage:start -->"):text.index("<!-- coverage:end -->")]
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| model_type")}
    assert set(rows) == set(DESIGN_MODEL_TYPES), REGENERATE
    for model_type, shown in rows.items():
        assert shown.startswith(route_for(model_type).kind), \
            f"{model_type}: docs/families.md says {shown!r}, this build routes it {route_for(model_type)}; " \
            f"{REGENERATE}"


def test_families_doc_is_what_the_tool_writes():
    """The generated file is reproducible: from the registry, the family modules and tests as they are now, and the
    marks the file itself shows (no test outcome of this machine is read), the tool writes the file unchanged."""
    pytest.importorskip("transformers")  # the torch route's classes are transformers'
    family_table = _family_table()
    text = FAMILIES_DOC.read_text(encoding="utf-8")
    assert family_table.render(status={}, before=text) == text, REGENERATE


def test_readme_links_the_docs_and_stays_short():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    for doc in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / doc).is_file(), f"README links {doc}, which does not exist"
    assert "docs/families.md" in readme
    # the two commands of a fresh machine, exactly
    assert 'python3 -m pip install -e . && hfview generate --prompt "Once upon a time"' in readme
    assert 'python3 -m pip install -e ".[test]" && python3 -m pytest -q' in readme


# Words of how the work was organised, not of what hfview does
PROCESS_WORDS = re.compile(r"\bissues?\s*#?\d+|\bseed\s+#?\d{3}\b|\bthis session\b", re.IGNORECASE)


@pytest.mark.parametrize("doc", ["README.md", *sorted(p.relative_to(ROOT).as_posix()
                                                       for p in (ROOT / "docs").glob("*.md"))])
def test_docs_name_no_process_words(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    found = sorted({m.group(0) for m in PROCESS_WORDS.finditer(text)})
    assert not found, f"{doc}: {found} (generated parts come from the docstrings tools/family_table.py names)"
