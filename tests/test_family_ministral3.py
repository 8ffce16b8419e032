"""Ministral 3 (llama.cpp mistral3: Llama's decoder, yarn rope, Llama 4's query temperature): converter bytes
at every outtype and llama.cpp logits on the text model and on the Mistral 3 image-text model read as its
text model (Pixtral tower and projector left out); defaults; refusals of what llama.cpp's mistral3 runs
otherwise."""
from __future__ import annotations

import pytest

from family_defaults import check_defaults
from family_oracle import OUTTYPES, PROMPT, nmse, oracle_tests
from family_variants import variant

test_export, test_logits = oracle_tests("ministral3", ["ministral3"])
test_export_image_text, _ = oracle_tests("ministral3", ["ministral3-mm"])


def test_defaults_match_transformers():
    check_defaults("ministral3")


test_export_mistral_small_layout, _ = oracle_tests("llama", ["mistral3-mm"])


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name, family", [("ministral3-mm", "ministral3"), ("mistral3-mm", "llama")])
def test_logits_image_text(name, family, outtype, checkpoint, record_property):
    """llama.cpp fed from the view of the image-text model == Mistral3ForConditionalGeneration's forward over
    text alone (no AutoModelForCausalLM maps mistral3, so the class is named)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    record_property("family", family)
    record_property("oracle", "logits")
    path = checkpoint(name)
    with StreamModel(HfCheckpoint(path, outtype), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        assert len(ids) == 16
        ours = m.logits(ids)
    model = transformers.Mistral3ForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        ref = model(input_ids=torch.tensor([ids])).logits[0].float().numpy()
    value = nmse(ours, ref)
    print(f"{name} {outtype}: NMSE {value:.3e}")
    assert value < 1e-4, f"{name} {outtype}: NMSE {value:.3e}"


def test_image_text_model_presents_no_vision_tensor(checkpoint):
    from hfview import HfCheckpoint
    view = HfCheckpoint(checkpoint("ministral3-mm"), "f32")
    assert view.family.name == "ministral3"
    assert not [t.name for t in view.tensors if "vision" in t.name or "mm" in t.name or "patch" in t.name]
    assert "output.weight" not in {t.name for t in view.tensors}  # tied, as the 3B


def test_query_temperature_reaches_llama_cpp(checkpoint, tmp_path):
    """Llama 4's beta is computed, not just written: with beta 0 the positions past the original context
    (8-15 in the fixture) give other logits, the first 8 the same."""
    import numpy as np

    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    def logits(path):
        with StreamModel(HfCheckpoint(path, "f32"), n_ctx=64) as m:
            ids = m.tokenize(PROMPT)[:16]
            return m.logits(ids)

    path = checkpoint("ministral3")
    rope = dict(_fixture_rope(path), llama_4_scaling_beta=0.0)
    base, flat = logits(path), logits(variant(path, tmp_path / "v", rope_parameters=rope))
    assert np.allclose(base[:8], flat[:8], atol=1e-5)
    assert nmse(flat[8:], base[8:]) > 1e-6


def _fixture_rope(path):
    import json
    return json.loads((path / "config.json").read_text())["rope_parameters"]


@pytest.mark.parametrize("changes, words", [
    (dict(rope_parameters={"rope_type": "default", "rope_theta": 1e6}), "yarn"),
    (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0, "beta_fast": 32.0,
                           "beta_slow": 1.0, "original_max_position_embeddings": 8, "mscale": 1.0,
                           "mscale_all_dim": 1.0}), "llama_4_scaling_beta"),
    (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0, "beta_fast": 32.0,
                           "beta_slow": 1.0, "original_max_position_embeddings": 8, "mscale": 0.707,
                           "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1}), "mscale"),
    (dict(rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0, "beta_fast": 32.0,
                           "beta_slow": 1.0, "original_max_position_embeddings": 8, "mscale": 1.0,
                           "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1, "attention_factor": 1.2}),
     "attention_factor"),
    (dict(hidden_act="gelu"), "hidden_act"),
], ids=["rope_default", "no_beta", "mscale", "attention_factor", "gelu"])
def test_refuses_what_mistral3_runs_otherwise(changes, words, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=words):
        HfCheckpoint(variant(checkpoint("ministral3"), tmp_path / "v", **changes), "f32")


def test_fp8_quantization_config_is_read_not_refused(checkpoint, tmp_path):
    """Ministral 3's Instruct uploads are per-tensor FP8 (quant_method fp8, no weight_block_size, static activation
    scales), the form the view reads as the converter does (tests/test_fp8.py's qwen3-fp8-tensor); over weights with
    no scales beside them it reads them as stored."""
    from hfview import HfCheckpoint

    quant = {"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": None}
    view = HfCheckpoint(variant(checkpoint("ministral3"), tmp_path / "v", quantization_config=quant), "f32")
    plain = HfCheckpoint(checkpoint("ministral3"), "f32")
    assert [(t.name, t.shape) for t in view.tensors] == [(t.name, t.shape) for t in plain.tensors]


def _wrapper_config(tmp_path, **top):
    """A Mistral 3 image-text config.json whose text_config is Ministral3Config's defaults (the class's
    docstring: those of Ministral-3-8B), as transformers 5 writes it; no released copy was reachable."""
    import json

    import transformers
    text = transformers.Ministral3Config().to_dict()
    text = {k: text[k] for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                 "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act",
                                 "max_position_embeddings", "rms_norm_eps", "rope_parameters", "sliding_window",
                                 "tie_word_embeddings", "model_type")}
    cfg = {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
           "text_config": text, "vision_config": {"model_type": "pixtral"}, "image_token_index": 10,
           "spatial_merge_size": 2, "projector_hidden_act": "gelu", "multimodal_projector_bias": False,
           "vision_feature_layer": -1, **top}
    path = tmp_path / "ministral3" / "mistralai__Ministral-3-8B-like.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(cfg))
    return path


def test_wrapper_config_kv_carries_yarn_and_temperature(tmp_path):
    from released_config import config_path_kv
    kv = config_path_kv(_wrapper_config(tmp_path))
    assert kv["mistral3.block_count"] == 34 and kv["mistral3.context_length"] == 262144
    assert kv["mistral3.rope.scaling.type"] == "yarn" and kv["mistral3.rope.scaling.factor"] == 16.0
    assert kv["mistral3.rope.scaling.original_context_length"] == 16384
    assert kv["mistral3.rope.scaling.yarn_log_multiplier"] == 1.0
    assert kv["mistral3.attention.temperature_scale"] == pytest.approx(0.1)
    assert kv["mistral3.attention.key_length"] == 128


def test_fp8_wrapper_config_is_accepted(tmp_path):
    """The Instruct uploads' FP8 quantization_config, at the wrapper's top level: the converter's per-tensor fp8
    form, read (the config path accepts it)."""
    from released_config import config_path_kv
    quant = {"activation_scheme": "static", "quant_method": "fp8", "weight_block_size": None,
             "modules_to_not_convert": ["model.vision_tower", "model.multi_modal_projector", "lm_head"]}
    assert config_path_kv(_wrapper_config(tmp_path, quantization_config=quant))


def _windowed(checkpoint, tmp_path, window):
    """The image-text fixture with a sliding window in its text_config, as Devstral Small 2 states one (4096)."""
    import json
    src = checkpoint("ministral3-mm")
    text = json.loads((src / "config.json").read_text())["text_config"]
    return variant(src, tmp_path / f"ministral3-mm-window{window}", text_config=dict(text, sliding_window=window))


def test_sliding_window_is_accepted_with_the_converters_bytes(checkpoint, tmp_path):
    """The converter converts a windowed Mistral 3 (it does not write the window): the view's file is its file."""
    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export

    path = _windowed(checkpoint, tmp_path, 8)
    ours = export(HfCheckpoint(path, "f32"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(oracle.convert_cached(path, "f32"))


def test_sliding_window_caps_the_context_and_within_it_llama_cpp_computes_transformers(checkpoint, tmp_path):
    """Devstral Small 2's layout (window 4096; 8 here): the runner caps the context at the window and says so, and
    within it llama.cpp from the view equals Mistral3ForConditionalGeneration; past it (a context asked for
    explicitly) transformers attends within the window and llama.cpp's mistral3 to the whole context, so they
    differ, which is why the cap is there."""
    from family_oracle import wrapper_logits

    from hfview.runner.api import load

    path = _windowed(checkpoint, tmp_path, 8)
    with load(path, precision="f32") as r:
        assert r.n_ctx == 8 and r.unapplied_window == 8
        assert any("context limited to the sliding window: 8 tokens" in n for n in r.notes)
    with load(path, precision="f32", n_ctx=64) as r:
        assert any("beyond 8 tokens llama.cpp attends to the whole context" in n for n in r.notes)
        ids = r.tokenize(PROMPT)[:24]
        assert len(ids) == 24
        ours = r.logits(ids)
    ref = wrapper_logits("Mistral3ForConditionalGeneration")(path, ids)
    within, past = nmse(ours[:8], ref[:8]), nmse(ours[8:], ref[8:])
    print(f"window 8: NMSE {within:.3e} within, {past:.3e} past it")
    assert within < 1e-4
    assert past > 1e-3


def test_devstral_release_runs_with_its_window_unapplied_by_llama_cpp(tmp_path):
    """The released Devstral-Small-2-24B-Instruct-2512 config (tests/data/released_quantized/fp8/): read by this
    family, its window of 4096 is one llama.cpp does not apply, so the runner caps the context there."""
    import shutil
    from pathlib import Path

    from hfview import families
    from hfview.checkpoint import _read_config
    from hfview.config import read_as
    from hfview.runner.api import unapplied_window

    released = Path(__file__).parent / "data/released_quantized/fp8/unsloth__Devstral-Small-2-24B-Instruct-2512.json"
    shutil.copyfile(released, tmp_path / "config.json")
    config, path = _read_config(tmp_path)
    family = families.family_for(config.get("model_type"), config.get("architectures"))
    assert family.name == "ministral3"
    assert unapplied_window(family, read_as(family, config, path)) == 4096


def test_inspect_says_the_context_is_capped_at_the_window(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.inspect import describe, render

    info = describe(HfCheckpoint(_windowed(checkpoint, tmp_path, 8), "f32"))
    assert info["unapplied_window"] == 8
    assert "sliding window 8: llama.cpp's mistral3 attends to the whole context" in render(info)
    assert "unapplied_window" not in describe(HfCheckpoint(checkpoint("ministral3-mm"), "f32"))
