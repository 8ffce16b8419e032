"""The two oracles as reusable tests: a family's test file is a few lines.

    # tests/test_family_qwen2.py
    from family_oracle import oracle_tests
    test_export, test_logits = oracle_tests("qwen2", ["qwen2", "qwen2-tied"])

`test_export`: `hfview export` == the pinned converter's file (sha256), every outtype; on a mismatch the
first differing key or tensor is printed. `test_logits`: llama.cpp fed from the view (no file) == the
transformers forward pass in float32, NMSE < 1e-4 at every position of a 16-token prompt.
Each result is recorded (family, oracle) for the the family table (docs/families.md) (tools/family_table.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import oracle

OUTTYPES = ["f32", "f16", "bf16", "auto"]
PROMPT = "The quick brown fox jumps over the lazy dog, and then 12 more words follow: naïve café 東京."
NMSE_BAR = 1e-4


def nmse(ours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.mean((ours - ref) ** 2) / np.mean(ref ** 2))


_models: dict = {}


def transformers_logits(path, ids) -> np.ndarray:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    key = str(path)
    if key not in _models:
        _models.clear()  # one model at a time: fixtures are small, memory is not
        _models[key] = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        return _models[key](torch.tensor([ids])).logits[0].float().numpy()


def check_export(name: str, outtype: str, checkpoint, converted, tmp_path) -> None:
    from hfview import HfCheckpoint
    from hfview.export import export

    theirs = converted(name, outtype)
    ours = export(HfCheckpoint(checkpoint(name), outtype), tmp_path / "ours.gguf")
    if oracle.sha256(ours) != oracle.sha256(theirs):
        pytest.fail(f"{name} --outtype {outtype}: {oracle.first_difference(ours, theirs)}")


def check_types_as_converter(name: str, outtype: str, checkpoint, converted, types: dict[str, str]) -> None:
    """The ggml types of fixture `name`'s tensors named in `types` (GGUF name -> type name, "OUT" for the outtype's),
    in the view and in the converter's file alike."""
    from gguf import GGUFReader

    from hfview import HfCheckpoint

    theirs = {t.name: t.tensor_type.name for t in GGUFReader(converted(name, outtype)).tensors}
    ours = {t.name: t.ggml_type.name for t in HfCheckpoint(checkpoint(name), outtype).tensors}
    for tensor, wanted in types.items():
        wanted = outtype.upper() if wanted == "OUT" else wanted
        assert theirs[tensor] == ours[tensor] == wanted, (tensor, theirs[tensor], ours[tensor])


def check_logits(name: str, outtype: str, checkpoint, *, bar: float = NMSE_BAR, reference=None,
                 against: str = "transformers") -> float:
    """llama.cpp fed from the view of fixture `name` vs transformers over `reference`: the fixture itself, a twin
    of its weights in an equivalent transformers class where transformers has none of its own, or a function
    (checkpoint_dir, ids) -> logits that runs the family's forward over transformers' modules."""
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    path = checkpoint(name)
    with StreamModel(HfCheckpoint(path, outtype), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]  # llama.cpp's tokenizer over the view's vocabulary; both get these ids
        assert len(ids) == 16
        ours = m.logits(ids)
    ref = _reference_logits(reference, path, ids) if callable(reference) else \
        transformers_logits(reference or path, ids)
    assert ours.shape == ref.shape
    value = nmse(ours, ref)
    print(f"{name} {outtype}: NMSE {value:.3e} against {against}, top-1 agreement "
          f"{np.mean(ours.argmax(-1) == ref.argmax(-1)):.3f}")
    assert value < bar, f"{name} {outtype}: NMSE {value:.3e} >= {bar}"
    return value


_references: dict = {}


def _reference_logits(logits_of, path, ids) -> np.ndarray:
    """logits_of(path, ids), once per session for each fixture and prompt (every outtype compares with it)."""
    key = (logits_of, str(path), tuple(ids))
    if key not in _references:
        _references[key] = logits_of(path, ids)
    return _references[key]


def reference_logits_test(family: str, fixtures: list[str], logits_of, label: str, outtypes=OUTTYPES):
    """test_logits against a reference other than AutoModelForCausalLM: a family transformers has no class for,
    whose forward is transformers' modules composed as the family's own modeling code composes them, or a wrapper
    (wrapper_logits): logits_of(checkpoint_dir, ids) -> logits (`label` says how)."""
    @pytest.mark.parametrize("outtype", outtypes)
    @pytest.mark.parametrize("name", fixtures)
    def test_logits(name, outtype, checkpoint, record_property):
        record_property("family", family)
        record_property("oracle", "logits")
        check_logits(name, outtype, checkpoint, reference=logits_of, against=label)
    return test_logits


def wrapper_logits(class_name: str):
    """logits_of for a checkpoint of a multimodal wrapper no AutoModelForCausalLM maps (LLaVA, Qwen2-Audio,
    Voxtral): transformers' `class_name` run over the ids alone, its text model's path."""
    def logits_of(path, ids) -> np.ndarray:
        torch = pytest.importorskip("torch")
        transformers = pytest.importorskip("transformers")
        model = getattr(transformers, class_name).from_pretrained(path, dtype=torch.float32)
        with torch.no_grad():
            return model(input_ids=torch.tensor([ids])).logits[0].float().numpy()
    return logits_of


def twin_logits_test(family: str, fixtures: list[str], make_twin, label: str):
    """test_logits for a family transformers has no class for: the reference is an equivalent transformers class
    (`label`) over the same weights, which make_twin(checkpoint_dir, out_dir) writes once per session."""
    @pytest.mark.parametrize("outtype", OUTTYPES)
    @pytest.mark.parametrize("name", fixtures)
    def test_logits(name, outtype, checkpoint, tmp_path_factory, record_property):
        record_property("family", family)
        record_property("oracle", "logits")
        path = checkpoint(name)
        twin = tmp_path_factory.getbasetemp() / f"{path.name}-{label.lower()}-twin"
        if not (twin / "model.safetensors").is_file():
            make_twin(path, twin)
        check_logits(name, outtype, checkpoint, reference=twin, against=f"its {label} twin")
    return test_logits


def oracle_tests(family: str, fixtures: list[str], *, outtypes=OUTTYPES, export_xfail: str | None = None):
    """(test_export, test_logits) for `family` over its fixtures. `export_xfail`: the reason the pinned
    converter itself fails on this family (the export test then expects its failure, strictly)."""
    export_marks = [pytest.mark.xfail(raises=oracle.ConverterFailed, strict=True, reason=export_xfail)] \
        if export_xfail else []

    @pytest.mark.parametrize("outtype", outtypes)
    @pytest.mark.parametrize("name", fixtures)
    def test_export(name, outtype, checkpoint, converted, tmp_path, record_property):
        record_property("family", family)
        record_property("oracle", "bytes")
        check_export(name, outtype, checkpoint, converted, tmp_path)

    @pytest.mark.parametrize("outtype", outtypes)
    @pytest.mark.parametrize("name", fixtures)
    def test_logits(name, outtype, checkpoint, record_property):
        record_property("family", family)
        record_property("oracle", "logits")
        check_logits(name, outtype, checkpoint)

    for mark in export_marks:
        test_export = mark(test_export)
    return test_export, test_logits


def assert_converter_has_no_class(family: str) -> None:
    """The premise of a family of hfview's own mapping: no module of the pinned converter registers any of its
    architectures (once one does, its bytes are to be tested against that class instead)."""
    from hfview.families import FAMILIES

    (fam,) = [f for f in FAMILIES if f.name == family]
    root = oracle.converter_root()
    text = "\n".join(p.read_text(encoding="utf-8")
                     for p in [root / "convert_hf_to_gguf.py", *sorted((root / "conversion").glob("*.py"))])
    for arch in fam.architectures:
        assert f'"{arch}"' not in text, f"the pinned converter registers {arch}: test {family} against its class"
    assert fam.no_converter
