"""MiMo-7B (MiMoForCausalLM, remote code -> llama.cpp qwen2 under hfview's own mapping, MTP layers dropped).

The release's modeling_mimo.py (github.com/XiaomiMiMo/MiMo, and the checkpoints' own) subclasses transformers'
Qwen2: MiMoForCausalLM is Qwen2ForCausalLM whose Qwen2Model also holds `mtp_layers`, which its forward (Qwen2Model's,
inherited) never calls. So:

* logits oracle: a Qwen2ForCausalLM twin of the fixture (the same files, architectures and model_type renamed, the
  MTP tensors removed) run by transformers 5.24 is the reference for llama.cpp fed from the view;
* bytes oracle: the pinned converter has no class for MiMoForCausalLM (checked below), but its Qwen2 class converts
  that same twin; the view of the MiMo fixture must be byte-identical to the converter's file of its Qwen2 variant
  (the directory name kept: general.name comes from it). The comparison is honest in that the variant differs from
  the fixture only in what the MiMo function does not depend on (the two names and the unread MTP tensors).
"""
import json
import shutil
from pathlib import Path

import pytest

import oracle
from family_oracle import OUTTYPES, assert_converter_has_no_class, twin_logits_test
from family_variants import assert_refused
from released_config import config_path_kv, released_configs

FIXTURES = ["mimo"]


def qwen2_variant(src: Path, out: Path) -> Path:
    """The MiMo checkpoint `src` as a Qwen2ForCausalLM checkpoint in `out`: config.json with architectures and
    model_type renamed (every other key kept), model.safetensors without model.mtp_layers.*, the rest copied."""
    from safetensors.torch import load_file, save_file

    out.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name not in ("config.json", "model.safetensors"):
            shutil.copyfile(f, out / f.name)
    config = json.loads((src / "config.json").read_text(encoding="utf-8"))
    config.update(architectures=["Qwen2ForCausalLM"], model_type="qwen2")
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
    tensors = {k: v for k, v in load_file(str(src / "model.safetensors")).items()
               if not k.startswith("model.mtp_layers.")}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


test_logits = twin_logits_test("mimo", FIXTURES, qwen2_variant, "Qwen2")


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", FIXTURES)
def test_export_matches_the_converters_qwen2_class_on_its_qwen2_variant(name, outtype, checkpoint, tmp_path,
                                                                        record_property):
    """`hfview export` of the MiMo fixture == the pinned converter's Qwen2 file of its Qwen2ForCausalLM variant."""
    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "mimo")
    record_property("oracle", "bytes")
    path = checkpoint(name)
    theirs = oracle.convert_cached(qwen2_variant(path, tmp_path / "variant" / path.name), outtype)
    ours = export(HfCheckpoint(path, outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


def test_the_pinned_converter_has_no_class_for_mimo():
    """The premise of the variant byte oracle: no converter module registers MiMoForCausalLM."""
    assert_converter_has_no_class("mimo")


def test_mtp_layers_are_dropped(checkpoint):
    """The stored MTP layer is in the checkpoint but not in the view; the trunk's blocks are."""
    from safetensors import safe_open

    from hfview import HfCheckpoint

    path = checkpoint("mimo")
    with safe_open(str(path / "model.safetensors"), "pt") as f:
        assert any(k.startswith("model.mtp_layers.0.") for k in f.keys())
    view = HfCheckpoint(path, "f32")
    kv = {k.key: k.value for k in view.kv}
    assert kv["general.architecture"] == "qwen2" and kv["qwen2.block_count"] == 2
    names = [t.name for t in view.tensors]
    assert not any("mtp" in n or n.startswith("blk.2.") for n in names)


def test_defaults_are_qwen2_configs():
    """transformers has no MiMo config class; the release's MiMoConfig subclasses Qwen2Config (adding
    num_nextn_predict_layers): the family's defaults are transformers 5.24's Qwen2Config defaults."""
    transformers = pytest.importorskip("transformers")
    from hfview.families.mimo import DEFAULTS
    theirs = transformers.Qwen2Config().to_dict()
    ours = {k: v for k, v in DEFAULTS["mimo"].items() if k != "num_nextn_predict_layers"}
    for key, value in ours.items():
        assert theirs[key] == value, f"default {key}: Qwen2Config says {theirs[key]!r}, the family {value!r}"


@pytest.mark.parametrize("changes, reason", [
    (dict(use_sliding_window=True), "sliding-window"),
    (dict(hidden_act="gelu"), "hidden_act"),
    (dict(attention_bias=False), "attention_bias"),
    (dict(architectures=["MiMoModel"]), "architectures"),
], ids=["sliding", "gelu", "no-bias", "bare-model"])
def test_refuses_what_qwen2_cannot_run_as_mimo_does(changes, reason, checkpoint, tmp_path):
    assert_refused(checkpoint("mimo"), tmp_path, reason, **changes)


@pytest.mark.parametrize("path", released_configs("mimo"), ids=lambda p: p.stem)
def test_released_config(path):
    """Each released MiMo-7B config: the KV carries its stated values."""
    stated = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["qwen2.block_count"] == stated["num_hidden_layers"]
    assert kv["qwen2.embedding_length"] == stated["hidden_size"]
    assert kv["qwen2.attention.head_count_kv"] == stated["num_key_value_heads"]
    assert kv["qwen2.rope.freq_base"] == stated["rope_theta"]
    assert kv["qwen2.context_length"] == stated["max_position_embeddings"]


def test_mimo_v2_is_refused_for_its_measured_reason():
    """MiMoV2ForCausalLM (model_type mimo_v2) is not presented: the converter's text class for it is MimoV2Model
    (the second registration, MiMoV2VisionAudioModel, is its mmproj class), which takes MiMo-V2.5's plain
    config.json (transformers has no mimo_v2 class) and writes sliding_window as stated, where transformers'
    MiMoV2Flash, the one equivalent class, attends sliding_window_size + 1 keys."""
    transformers = pytest.importorskip("transformers")
    from hfview.coverage import route_for
    from oracle import converter_root

    source = (converter_root() / "conversion" / "mimo.py").read_text(encoding="utf-8")
    assert '@ModelBase.register("MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM")\n' in source
    assert '@ModelBase.register("MiMoV2ForCausalLM")\n' in source and "class MiMoV2VisionAudioModel(MmprojModel)" in source
    assert 'self.gguf_writer.add_sliding_window(self.hparams["sliding_window"])' in source
    assert not hasattr(transformers, "MiMoV2ForCausalLM")
    assert transformers.MiMoV2FlashConfig(sliding_window=128, sliding_window_size=128).sliding_window == 129
    route = route_for("mimo_v2")
    assert route.kind == "none" and "sliding_window_size + 1 (129)" in route.detail
