"""Mistral's own format (params.json + consolidated.safetensors + tekken.json / tokenizer.model.v3).

Bytes: the view equals the pinned converter run with --mistral-format (fixtures/families/mistral_format.py
passes it), at every outtype. Logits: transformers has no loader for this format, so the reference is the
same weights in Transformers' layout (the fixture's "-hf" twin) run by transformers; the v3 fixture, which
llama.cpp cannot load (the converter writes no context length for it, see below), is compared with its twin's
view tensor by tensor instead.
"""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from family_oracle import PROMPT, nmse, oracle_tests, transformers_logits

FIXTURES = ["mistral-consolidated-tekken", "mistral-consolidated-v3", "mistral-consolidated-yarn-tied"]

test_export, _ = oracle_tests("mistral_format", FIXTURES)


@pytest.mark.parametrize("outtype", ["f32", "f16", "bf16", "auto"])
def test_mistral_format_logits_match_transformers_on_hf_twin(outtype, checkpoint, record_property):
    """llama.cpp fed from the view of the consolidated directory == transformers on the same weights saved in
    Transformers' layout (NMSE < 1e-4 over 16 positions)."""
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    record_property("family", "mistral_format")
    record_property("oracle", "logits")
    with StreamModel(HfCheckpoint(checkpoint("mistral-consolidated-tekken"), outtype), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        assert len(ids) == 16 and ids[0] == 1  # BOS <s> first, as the tekken vocabulary numbers it
        ours = m.logits(ids)
    ref = transformers_logits(checkpoint("mistral-consolidated-tekken-hf"), ids)
    value = nmse(ours, ref)
    print(f"mistral-consolidated-tekken {outtype}: NMSE {value:.3e} vs transformers on the -hf twin, "
          f"top-1 agreement {np.mean(ours.argmax(-1) == ref.argmax(-1)):.3f}")
    assert value < 1e-4


@pytest.mark.parametrize("outtype", ["f32", "bf16"])
def test_mistral_format_tensors_equal_hf_twin_view(outtype, checkpoint):
    """The consolidated directory and its Transformers-layout twin present the same GGUF tensors, byte for
    byte: Meta's wq/wk copied as they are equal the llama family's rotation pairs of q_proj/k_proj."""
    from hfview import HfCheckpoint

    ours = HfCheckpoint(checkpoint("mistral-consolidated-v3"), outtype)
    twin = HfCheckpoint(checkpoint("mistral-consolidated-v3-hf"), outtype)
    assert ours.family.name == "mistral_format" and twin.family.name == "llama"
    assert sorted(t.name for t in ours.tensors) == sorted(t.name for t in twin.tensors)
    for t in ours.tensors:
        other = twin.tensor(t.name)
        assert (t.ggml_type, t.ggml_dims) == (other.ggml_type, other.ggml_dims), t.name
        assert np.array_equal(ours.read_tensor(t.name), twin.read_tensor(t.name)), t.name
    # and the hyperparameters llama.cpp computes with agree
    for key in ("embedding_length", "feed_forward_length", "attention.head_count", "attention.head_count_kv",
                "rope.freq_base", "attention.layer_norm_rms_epsilon", "rope.dimension_count", "vocab_size",
                "attention.key_length", "attention.value_length"):
        assert _kv(ours, f"llama.{key}") == _kv(twin, f"llama.{key}"), key


def _kv(ckpt, key):
    return next(kv.value for kv in ckpt.kv if kv.key == key)


def test_mistral_format_without_context_length_is_what_the_converter_writes(checkpoint, converted):
    """Mistral-7B-v0.3's params.json states no context length: the converter writes no llama.context_length,
    and neither does the view (llama.cpp then refuses the file: a limitation of the converter's output)."""
    from gguf import GGUFReader
    from hfview import HfCheckpoint

    theirs = GGUFReader(converted("mistral-consolidated-v3", "auto"))
    assert "llama.context_length" not in theirs.fields
    assert all(kv.key != "llama.context_length" for kv in HfCheckpoint(checkpoint("mistral-consolidated-v3")).kv)


def test_mistral_format_llama_cpp_runs_finite_and_deterministic(checkpoint):
    """The yarn + tied-embeddings fixture (no transformers reference for Mistral's own yarn keys) runs."""
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    path = checkpoint("mistral-consolidated-yarn-tied")
    runs = []
    for _ in range(2):
        ckpt = HfCheckpoint(path, "bf16")
        assert "output.weight" not in [t.name for t in ckpt.tensors]
        assert _kv(ckpt, "llama.rope.scaling.type") == "yarn"
        with StreamModel(ckpt, n_ctx=64) as m:
            runs.append(m.logits(m.tokenize(PROMPT)[:16]))
    assert np.isfinite(runs[0]).all() and np.array_equal(runs[0], runs[1])


# ---------------------------------------------------------------- which files are read, refusals

def test_config_json_beside_params_json_is_read_as_transformers(checkpoint, tmp_path):
    """With both formats in one directory, Transformers' files are read (config.json, model*.safetensors)."""
    from hfview import HfCheckpoint

    both = tmp_path / "both"
    shutil.copytree(checkpoint("mistral-consolidated-v3-hf"), both)
    for f in checkpoint("mistral-consolidated-v3").iterdir():
        shutil.copy(f, both / f.name)
    ckpt = HfCheckpoint(both, "f32")
    assert ckpt.family.name == "llama"
    assert all(t.path.name == "model.safetensors" for t in ckpt._stored.values())


def _edited(checkpoint, tmp_path, **changes):
    d = tmp_path / "edited"
    shutil.copytree(checkpoint("mistral-consolidated-tekken"), d)
    params = json.loads((d / "params.json").read_text())
    for k, v in changes.items():
        if v is None:
            params.pop(k, None)
        else:
            params[k] = v
    (d / "params.json").write_text(json.dumps(params))
    return d


@pytest.mark.parametrize("change, message", [
    ({"moe": {"num_experts": 4, "num_experts_per_tok": 2}}, "'moe'"),
    ({"llama_4_scaling": {"beta": 0.1, "original_max_position_embeddings": 8192}}, "mistral3"),
    ({"head_dim": None}, "no head_dim"),
    ({"lora": {"rank": 8}}, "'lora'"),
    # (fp8_e4m3 is read: tests/test_mistral_fp8.py)
    ({"quantization": {"qformat_weight": "int4"}}, "quantized checkpoints are unsupported"),
])
def test_mistral_format_refusals(change, message, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import HfviewError

    with pytest.raises(HfviewError, match=message) as err:
        HfCheckpoint(_edited(checkpoint, tmp_path, **change))
    assert "params.json" in str(err.value)


def test_mistral_format_without_tokenizer_is_refused(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import HfviewError

    d = _edited(checkpoint, tmp_path)
    (d / "tekken.json").unlink()
    with pytest.raises(HfviewError, match="tokenizer is missing: .*tekken.json"):
        HfCheckpoint(d)


def test_legacy_tekken_specials_equal_mistral_common():
    """The special tokens of a pre-v7 tekken.json without a list are mistral-common's own table."""
    tekken = pytest.importorskip("mistral_common.tokens.tokenizers.tekken")
    from hfview.tokenizer.mistral import LEGACY_TEKKEN_SPECIALS

    theirs = tekken.Tekkenizer.DEPRECATED_SPECIAL_TOKENS
    assert [t["rank"] for t in theirs] == list(range(len(theirs)))
    assert tuple(str(t["token_str"].value) for t in theirs) == LEGACY_TEKKEN_SPECIALS


# ---------------------------------------------------------------- real-size tokenizers (vocab only)

# (file in mistral-common's package data, name in the checkpoint directory); the v3 SentencePiece model is
# the v3 fixture's own tokenizer, checked by test_export. About 70 s for the tekken file, 20 s for the others.
_MC_FILES = [
    ("tekken_240718.json", "tekken.json"),                       # Mistral NeMo: 131072 ids, 269443 merges
    ("mistral_instruct_tokenizer_241114.model.v7m1", "tokenizer.model.v7m1"),  # v7 with a multimodal suffix
    ("tokenizer.model.v1", "tokenizer.model"),                   # no version suffix: read as v1
]


@pytest.mark.parametrize("source, name", _MC_FILES, ids=[s for s, _ in _MC_FILES])
def test_mistral_vocab_equals_converter_on_real_tokenizers(source, name, tmp_path):
    """tokenizer.* (and llama.vocab_size) from tokenizer/mistral.py == the converter's --vocab-only
    --mistral-format output, KV by KV in order, on the full-size tokenizer files mistral-common ships."""
    from importlib.resources import files

    from gguf import GGUFReader
    import oracle
    from hfview.gguf_layout import encode_kv
    from hfview.tokenizer.mistral import mistral_vocab

    pytest.importorskip("mistral_common")
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "params.json").write_text(json.dumps({"dim": 64, "n_layers": 1, "head_dim": 16, "hidden_dim": 128,
                                                "n_heads": 4, "n_kv_heads": 4, "norm_eps": 1e-5}))
    (d / name).write_bytes(files("mistral_common").joinpath("data", source).read_bytes())
    theirs = GGUFReader(oracle.convert_cached(d, "f32", "--vocab-only", "--mistral-format"))
    wanted = [k for k in theirs.fields if k.startswith("tokenizer.") or k == "llama.vocab_size"]
    ours = mistral_vocab(d, "llama")
    assert [kv.key for kv in ours] == wanted
    for kv in ours:
        raw = b"".join(bytes(p) for p in theirs.fields[kv.key].parts)
        assert encode_kv(kv) == raw, kv.key


@pytest.mark.parametrize("version", ["v11", "v13"])
def test_mistral_vocab_equals_converter_on_v11_and_v13_tekken(version, checkpoint, tmp_path):
    """A v11 (Voxtral, Mistral Small 3.2) or v13 (Devstral) tekken.json with no chat_template.jinja: the converter
    writes the community template its tree keeps for that version (hfview.tokenizer.mistral_templates holds the same
    bytes). tokenizer.* (and llama.vocab_size) equal its --vocab-only --mistral-format output, KV by KV in order; the
    tekken file is the voxtral fixture's (v11 as Voxtral releases it), restated as `version`."""
    from gguf import GGUFReader
    import oracle
    from hfview.gguf_layout import encode_kv
    from hfview.tokenizer.mistral import mistral_vocab

    pytest.importorskip("mistral_common")
    tekken = json.loads((checkpoint("voxtral") / "tekken.json").read_text(encoding="utf-8"))
    assert tekken["config"]["version"] == "v11"
    tekken["config"]["version"] = version
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "params.json").write_text(json.dumps({"dim": 64, "n_layers": 1, "head_dim": 16, "hidden_dim": 128,
                                                "n_heads": 4, "n_kv_heads": 4, "norm_eps": 1e-5}))
    (d / "tekken.json").write_text(json.dumps(tekken), encoding="utf-8")
    theirs = GGUFReader(oracle.convert_cached(d, "f32", "--vocab-only", "--mistral-format"))
    wanted = [k for k in theirs.fields if k.startswith("tokenizer.") or k == "llama.vocab_size"]
    ours = mistral_vocab(d, "llama")
    assert [kv.key for kv in ours] == wanted
    assert "tokenizer.chat_template" in wanted
    for kv in ours:
        raw = b"".join(bytes(p) for p in theirs.fields[kv.key].parts)
        assert encode_kv(kv) == raw, kv.key


def test_v2_tokenizer_is_refused_like_the_converter(tmp_path):
    """A v2 SentencePiece tokenizer has no chat template in the converter's table: it fails, and so does the
    view, naming what to add."""
    from importlib.resources import files

    import oracle
    from hfview.tokenizer.errors import TokenizerError
    from hfview.tokenizer.mistral import mistral_vocab

    pytest.importorskip("mistral_common")
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "params.json").write_text(json.dumps({"dim": 64, "n_layers": 1, "head_dim": 16, "hidden_dim": 128,
                                                "n_heads": 4, "n_kv_heads": 4, "norm_eps": 1e-5}))
    (d / "tokenizer.model.v2").write_bytes(
        files("mistral_common").joinpath("data", "mistral_instruct_tokenizer_240216.model.v2").read_bytes())
    with pytest.raises(oracle.ConverterFailed, match="Unknown tokenizer type"):
        oracle.convert(d, tmp_path / "vocab.gguf", "f32", "--vocab-only", "--mistral-format")
    with pytest.raises(TokenizerError, match="chat_template.jinja"):
        mistral_vocab(d, "llama")
    (d / "chat_template.jinja").write_text("{{ messages }}")
    assert any(kv.key == "tokenizer.chat_template" and kv.value == "{{ messages }}" for kv in mistral_vocab(d, "llama"))
