"""The checkpoint fixtures: deterministic, non-trivial, read back by transformers, accepted by the converter."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import oracle  # noqa: E402  (tests/ is on sys.path under pytest)
from fixtures import build as _build_module  # noqa: E402
from fixtures.build import SPECS, build  # noqa: E402

# The Llama-family specs defined in build.py itself; other families' specs (fixtures/families/) are
# tested by their own family tests.
ALL = sorted(n for n in SPECS if _build_module.SPEC_SOURCES[n] == Path(_build_module.__file__).resolve())
assert {"llama-spm", "llama3-bpe", "mixtral"} <= set(ALL), ALL  # the filter above found build.py's own specs


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """name -> fixture directory, each built once per session."""
    root = tmp_path_factory.mktemp("fixtures")
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = build(name, root / name)
        return cache[name]
    return get


@pytest.fixture(scope="session")
def converted(built, tmp_path_factory):
    """name -> the pinned converter's f32 GGUF of that fixture, converted once per session."""
    root = tmp_path_factory.mktemp("converted")
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = oracle.convert(built(name), root / f"{name}.gguf", "f32")
        return cache[name]
    return get


def _hashes(directory: Path) -> dict[str, str]:
    return {p.name: oracle.sha256(p) for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("name", ["llama-spm", "mixtral"])
def test_building_twice_gives_identical_files(name, built, tmp_path):
    first = _hashes(built(name))
    second = _hashes(build(name, tmp_path / "again"))
    assert first == second


def test_sharded_spec_writes_shards_and_index(built):
    files = sorted(p.name for p in built("llama3-bpe").iterdir())
    assert "model.safetensors" not in files
    assert [f for f in files if f.endswith(".safetensors")] == [
        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert "model.safetensors.index.json" in files


@pytest.mark.parametrize("name", ALL)
def test_every_weight_is_perturbed(name, built):
    """No constant tensor (all-ones norm, zero bias): a misplaced row or offset must change the output."""
    from safetensors import safe_open

    directory = built(name)
    seen = 0
    for path in sorted(directory.glob("*.safetensors")):
        with safe_open(path, "pt") as f:
            for key in f.keys():
                t = f.get_tensor(key).float()
                assert t.std().item() > 0.05, f"{path.name}:{key} is nearly constant"
                seen += 1
    assert seen >= 2 * 9  # at least the per-layer tensors of 2 layers


@pytest.mark.parametrize("name", ALL)
def test_transformers_loads_and_runs(name, built):
    import torch
    import transformers

    spec = SPECS[name]
    model = getattr(transformers, spec.model_class).from_pretrained(built(name))
    assert model.dtype == getattr(torch, spec.dtype)
    ids = torch.tensor([[1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278, 17366, 11203]])
    with torch.no_grad():
        logits = model(ids).logits.float()
    assert logits.shape == (1, ids.shape[1], spec.config["vocab_size"])
    assert torch.isfinite(logits).all()
    assert logits.std().item() > 0.5, "logits are nearly flat"
    assert len(set(logits[0].argmax(-1).tolist())) > 3, "every position predicts the same token"


def _kv(path: Path) -> dict:
    from gguf import GGUFReader

    reader = GGUFReader(path)
    out = {}
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges",
                                              "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
            continue
        out[key] = field.contents()
    out["#tensors"] = [t.name for t in reader.tensors]
    return out


@pytest.mark.parametrize("name", ALL)
def test_converter_accepts_fixture(name, converted):
    """The pinned converter converts each fixture, and reads the shapes and rope scaling the spec intends
    (a config layout it misread would show here, e.g. a released-style rope_scaling it ignored)."""
    spec = SPECS[name]
    cfg = spec.config
    kv = _kv(converted(name))
    assert kv["general.architecture"] == "llama"
    assert kv["llama.block_count"] == cfg["num_hidden_layers"]
    assert kv["llama.embedding_length"] == cfg["hidden_size"]
    assert kv["llama.attention.head_count"] == cfg["num_attention_heads"]
    assert kv["llama.attention.head_count_kv"] == cfg["num_key_value_heads"]
    assert kv["llama.vocab_size"] == cfg["vocab_size"]
    rope = cfg["rope_parameters"]
    assert kv["llama.rope.freq_base"] == pytest.approx(rope["rope_theta"])
    if rope["rope_type"] in ("linear", "yarn"):
        assert kv["llama.rope.scaling.type"] == rope["rope_type"]
        assert kv["llama.rope.scaling.factor"] == pytest.approx(rope["factor"])
    else:
        assert "llama.rope.scaling.type" not in kv
    if rope["rope_type"] == "yarn":
        assert kv["llama.rope.scaling.original_context_length"] == rope["original_max_position_embeddings"]
    assert ("rope_freqs.weight" in kv["#tensors"]) == (rope["rope_type"] == "llama3")
    assert ("output.weight" in kv["#tensors"]) == (not cfg["tie_word_embeddings"])
    if "num_local_experts" in cfg:
        assert kv["llama.expert_count"] == cfg["num_local_experts"]
        assert kv["llama.expert_used_count"] == cfg["num_experts_per_tok"]


def test_llama3_tokenizer_is_recognised_as_llama_bpe(converted):
    """The generated tokenizer.json must hash to the converter's 'llama-bpe' pre-tokenizer digest."""
    kv = _kv(converted("llama3-bpe"))
    assert kv["tokenizer.ggml.model"] == "gpt2"
    assert kv["tokenizer.ggml.pre"] == "llama-bpe"
    assert kv["tokenizer.ggml.bos_token_id"] == 128000
    assert kv["tokenizer.ggml.add_bos_token"] is True


def test_unknown_fixture_and_nonempty_target_are_refused(tmp_path):
    with pytest.raises(KeyError, match="unknown fixture 'nope'"):
        build("nope", tmp_path / "x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "f").write_text("x")
    with pytest.raises(FileExistsError, match="not empty"):
        build("llama-spm", tmp_path / "full")
    with pytest.raises(ValueError, match="dtype 'int8'"):
        build("llama-spm", tmp_path / "y", dtype="int8")


# --- the committed default model -----------------------------------------------------------------

DEFAULT = REPO / "fixtures" / "default"
DEFAULT_FILES = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.model",
                 "tokenizer_config.json", "README.md"}


def test_default_model_is_complete_and_small():
    files = {p.name for p in DEFAULT.iterdir()}
    assert DEFAULT_FILES <= files, f"missing: {DEFAULT_FILES - files}"
    total = sum(p.stat().st_size for p in DEFAULT.iterdir())
    assert total <= 4 * 1024 * 1024, f"fixtures/default is {total} bytes, over 4 MiB"


def test_default_model_converts(tmp_path):
    kv = _kv(oracle.convert(DEFAULT, tmp_path / "default.gguf", "f32"))
    assert kv["general.architecture"] == "llama"
    assert kv["tokenizer.ggml.model"] == "llama"  # read from tokenizer.model: no digest lookup involved
    assert "output.weight" not in kv["#tensors"]  # tied embeddings


def test_default_model_writes_words_of_its_corpus():
    """Greedy continuation is made of words the book uses and does not just repeat one word:
    an untrained or mis-saved model fails this."""
    import re

    import sentencepiece
    import torch
    import transformers

    corpus = (REPO / "fixtures" / "corpus" / "moby_dick.txt").read_text(encoding="utf-8")
    vocabulary = set(re.findall(r"[a-z]+", corpus.lower()))
    sp = sentencepiece.SentencePieceProcessor(model_file=str(DEFAULT / "tokenizer.model"))
    model = transformers.LlamaForCausalLM.from_pretrained(DEFAULT, dtype=torch.float32)
    ids = torch.tensor([[sp.bos_id(), *sp.encode("The whale")]])
    with torch.no_grad():  # plain greedy: the checkpoint's own sampling settings switched off
        out = model.generate(ids, max_new_tokens=40, max_length=None, do_sample=False, repetition_penalty=1.0,
                             temperature=None, top_k=None, top_p=None)
    words = re.findall(r"[a-z]+", sp.decode(out[0, ids.shape[1]:].tolist()).lower())
    assert len(words) >= 15
    known = sum(w in vocabulary for w in words) / len(words)
    assert known >= 0.9, f"only {known:.0%} of the generated words occur in the corpus: {words}"
    assert len(set(words)) >= 8, f"degenerate repetition: {words}"


def test_a_spec_file_reads_only_the_siblings_its_cache_key_covers(tmp_path):
    # a fixture's cache key covers the spec files it reads (READS_FILES, followed transitively): reading one it
    # does not name would let a cached fixture go stale
    (tmp_path / "leaf.py").write_text("VALUE = 7\n", encoding="utf-8")
    (tmp_path / "named.py").write_text('READS_FILES = ("leaf.py",)\nGOT = sibling("leaf.py")["VALUE"]\n',
                                       encoding="utf-8")
    assert _build_module._spec_file(tmp_path / "named.py")["GOT"] == 7
    (tmp_path / "unnamed.py").write_text('GOT = sibling("leaf.py")["VALUE"]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"unnamed.py: reads leaf.py without naming it in READS_FILES"):
        _build_module._spec_file(tmp_path / "unnamed.py")
    # compressed-tensors' fixtures read fp8.py, which reads deepseek_v3.py: all three are in their key
    keyed = {p.name for p in _build_module.source_files("qwen3-ct-fp8-block")}
    assert {"compressed_tensors.py", "fp8.py", "deepseek_v3.py", "qwen2.py"} <= keyed
