"""Voxtral (VoxtralForConditionalGeneration over a Llama -> llama.cpp llama, the converter's LlamaModel, which reads
its tekken.json through mistral_common): read as its text model, the audio tower and projector left out and their
configuration ignored. Converter bytes at every outtype, and llama.cpp's logits against
VoxtralForConditionalGeneration's forward over text alone."""
from __future__ import annotations

from family_oracle import oracle_tests, reference_logits_test, wrapper_logits

test_export, _ = oracle_tests("llama", ["voxtral"])

test_logits = reference_logits_test("llama", ["voxtral"], wrapper_logits("VoxtralForConditionalGeneration"),
                                    "VoxtralForConditionalGeneration over text")


def test_the_tower_is_left_out_and_its_config_ignored(checkpoint):
    from hfview import HfCheckpoint
    from hfview.config import ignored_keys
    view = HfCheckpoint(checkpoint("voxtral"), "f32")
    assert view.family.name == "llama" and view.arch == "llama"
    assert not [t.name for t in view.tensors if "audio" in t.name or "projector" in t.name]
    assert {"audio_config", "audio_token_id"} <= set(ignored_keys(view.config, view.family))


def test_the_fixture_tekken_is_v11_as_released(checkpoint):
    """Voxtral-Mini-3B-2507's tekken.json is a v11 file: the fixture's states the same version and lists its special
    tokens, so test_export proves the view's tokenizer.* KVs (the community v11 chat template included) against the
    converter's bytes for the release's tokenizer version, not an older one."""
    import json
    data = json.loads((checkpoint("voxtral") / "tekken.json").read_text(encoding="utf-8"))
    assert data["config"]["version"] == "v11"
    assert len(data["special_tokens"]) == data["config"]["default_num_special_tokens"] == 1000
    assert not (checkpoint("voxtral") / "chat_template.jinja").exists()


def test_v11_tokenizer_kvs_equal_the_converter(checkpoint, tmp_path):
    """tokenizer.* (and llama.vocab_size) of the view == the converter's --vocab-only output for the v11 fixture, KV by
    KV, tokenizer.* in order: the chat template the converter reads from its own tree (no chat_template.jinja beside the weights,
    the Hugging Face layout) is the one the view writes."""
    from gguf import GGUFReader

    import oracle
    from hfview.gguf_layout import encode_kv
    from hfview.tokenizer.mistral import mistral_vocab

    d = checkpoint("voxtral")
    theirs = GGUFReader(oracle.convert(d, tmp_path / "vocab.gguf", "f32", "--vocab-only"))
    ours = mistral_vocab(d, "llama", n_vocab=2500, mistral_format=False)
    # tokenizer.* in the converter's order; llama.vocab_size lies earlier in its file (the header sets it first)
    assert [kv.key for kv in ours if kv.key.startswith("tokenizer.")] == \
        [k for k in theirs.fields if k.startswith("tokenizer.")]
    for kv in ours:
        raw = b"".join(bytes(p) for p in theirs.fields[kv.key].parts)
        assert encode_kv(kv) == raw, kv.key
    template = next(kv.value for kv in ours if kv.key == "tokenizer.chat_template")
    assert template.startswith('{%- set today = strftime_now("%Y-%m-%d") %}')  # the community file, not a name


def test_community_templates_equal_the_converters_files():
    """The v11 and v13 templates hfview carries as data are the pinned converter's models/templates files, byte for
    byte."""
    import oracle
    from hfview.tokenizer.mistral import _TEMPLATE_FILES
    from hfview.tokenizer.mistral_templates import TEMPLATES

    assert set(TEMPLATES) == set(_TEMPLATE_FILES.values())
    for name, text in TEMPLATES.items():
        assert text.encode("utf-8") == (oracle.converter_root() / "models" / "templates" / name).read_bytes(), name
