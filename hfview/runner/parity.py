"""Parity: llama.cpp running the view vs transformers' forward pass, on the same token ids.

The ids come from llama.cpp's tokenizer (the view's vocabulary) and are fed unchanged to both, so a
tokenizer difference cannot hide or cause a logits difference. Every position is compared:
NMSE = mean((a - b)^2) / mean(b^2) over all logits (b: transformers), the largest absolute error,
the mean and smallest cosine similarity per position, and the fraction of positions whose top-1
token agrees. transformers runs in float32 and never with trust_remote_code.

The two sides are always two backends: llama.cpp fed from the view, and transformers. A family the view
does not cover is refused before anything is loaded (the torch fallback would compare transformers with
itself), and a report whose sides name one backend cannot be made.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from hfview.errors import HfviewError

from .torch_backend import NeedsTorch, import_torch  # noqa: F401 (NeedsTorch: public here too)

__all__ = ["DEFAULT_PROMPT", "ParityReport", "metrics", "torch_logits", "compare", "NeedsTorch"]

DEFAULT_PROMPT = ("The quick brown fox jumps over the lazy dog. In 1969, 3 astronauts flew to the Moon; "
                  "today we ask: what comes next?")


CANDIDATE = "llama.cpp (hfview view)"
REFERENCE = "transformers"


@dataclass
class ParityReport:
    model: str
    model_revision: str | None
    precision: str
    n_tokens: int
    n_vocab: int
    nmse: float
    max_abs_error: float
    mean_cosine: float
    min_cosine: float
    top1_agreement: float
    threshold: float
    passed: bool
    seconds_llama_cpp: float
    seconds_transformers: float
    candidate: str = CANDIDATE   # the backend under test
    reference: str = REFERENCE   # the backend it is measured against
    note: str | None = None      # e.g. the prompt was cut to the sliding window llama.cpp does not apply
    data_path: str | None = None  # how llama.cpp got the view's bytes: "memfd" or "stream" (Runner.data_path)

    def __post_init__(self):
        if self.candidate.split()[0] == self.reference.split()[0]:
            raise AssertionError(f"a parity report needs two backends; both sides are {self.reference!r}")

    def as_dict(self) -> dict:
        return asdict(self)

    def render(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (f"{verdict}  {self.model}  ({self.n_tokens} tokens x {self.n_vocab} logits, {self.precision})\n"
                f"  nmse            {self.nmse:.3e}   (threshold {self.threshold:g})\n"
                f"  max abs error   {self.max_abs_error:.3e}\n"
                f"  cosine          mean {self.mean_cosine:.8f}   min {self.min_cosine:.8f}\n"
                f"  top-1 agreement {self.top1_agreement:.1%}\n"
                f"  time            llama.cpp {self.seconds_llama_cpp:.2f} s, "
                f"transformers {self.seconds_transformers:.2f} s"
                + (f"\n  note            {self.note}" if self.note else ""))


def metrics(a: np.ndarray, b: np.ndarray) -> dict:
    """Compare logits ``a`` (llama.cpp) with the reference ``b`` (transformers), both [n, vocab]."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"logits shapes differ: llama.cpp {a.shape}, transformers {b.shape}")
    diff = a - b
    denom = float(np.mean(b * b))
    nmse = float(np.mean(diff * diff)) / denom if denom > 0 else float("inf")
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    cos = np.sum(a * b, axis=1) / np.maximum(na * nb, 1e-300)
    return dict(nmse=nmse, max_abs_error=float(np.max(np.abs(diff))), mean_cosine=float(np.mean(cos)),
                min_cosine=float(np.min(cos)), top1_agreement=float(np.mean(a.argmax(1) == b.argmax(1))))


def _with_adapters(model, lora):
    """transformers + peft: each adapter loaded and active at once, each LoRA layer's scaling times its scale."""
    try:
        import peft
    except ImportError:
        raise NeedsTorch("parity --lora compares with transformers + peft, which is not installed: "
                         "pip install peft==0.21.2") from None
    from .lora import parse_lora

    specs = [parse_lora(s) for s in lora]
    names = [f"a{i}" for i in range(len(specs))]
    model = peft.PeftModel.from_pretrained(model, str(specs[0].path), adapter_name=names[0])
    for name, spec in zip(names[1:], specs[1:]):
        model.load_adapter(str(spec.path), adapter_name=name)
    model.base_model.set_adapter(names)
    for module in model.modules():
        if isinstance(module, peft.tuners.lora.LoraLayer):
            for name, spec in zip(names, specs):
                if name in module.scaling:
                    module.scaling[name] *= spec.scale
    return model


def torch_logits(path: Path, ids: list[int], lora=None) -> np.ndarray:
    """transformers' float32 logits [len(ids), vocab] for ``ids`` (no remote code); with ``lora`` adapters
    ("DIR[:SCALE]"), through peft."""
    torch, transformers = import_torch()
    from huggingface_hub.utils import are_progress_bars_disabled, enable_progress_bars

    bars_were_off = are_progress_bars_disabled()
    transformers.utils.logging.disable_progress_bar()  # stdout/stderr stay the report's
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32,
                                                                  trust_remote_code=False)
    finally:  # the switch is process-wide (huggingface_hub's): leave it as it was
        if not bars_were_off:
            transformers.utils.logging.enable_progress_bar()
            enable_progress_bars()
    if lora:
        model = _with_adapters(model, lora)
    model.eval()
    with torch.no_grad():
        out = model(torch.tensor([ids], dtype=torch.long)).logits[0]
    return out.float().numpy()


def compare(model: str | None = None, *, prompt: str = DEFAULT_PROMPT, threshold: float = 1e-4,
            precision: str = "f32", revision: str | None = None, device: str = "cpu", lora=None) -> ParityReport:
    import time

    from hfview.runner.errors import NotInView

    from .api import load

    import_torch()  # refuse before loading anything
    try:
        runner = load(model, precision=precision, device=device, revision=revision, backend="llama.cpp",
                      lora=list(lora) if lora else None)
    except NotInView as exc:
        from hfview.families import NOT_PRESENTED
        why = f" ({NOT_PRESENTED[exc.family]})" if exc.family in NOT_PRESENTED else ""
        raise NotInView(f"parity: {exc.config_path}: family {exc.family!r} is not covered by hfview's view, so "
                        f"llama.cpp cannot run it through hfview{why}; parity compares llama.cpp with transformers, "
                        f"so there is nothing to compare (hfview generate runs it with transformers)",
                        family=exc.family, config_path=exc.config_path) from None
    with runner:
        if runner.backend != "llama.cpp":  # load(backend="llama.cpp") never falls back; guard the invariant
            raise AssertionError(f"parity loaded {runner.backend!r}, not llama.cpp")
        ids = runner.tokenize(prompt, add_special=True, parse_special=False)
        note = None
        if len(ids) > runner.n_ctx and runner.unapplied_window == runner.n_ctx:
            note = (f"compared the first {runner.n_ctx} of {len(ids)} prompt tokens: past the sliding window "
                    f"({runner.n_ctx}) llama.cpp attends to the whole context, unlike the model")
            ids = ids[:runner.n_ctx]
        if len(ids) > runner.n_ctx:
            raise HfviewError(f"the parity prompt is {len(ids)} tokens, more than the context ({runner.n_ctx})")
        t0 = time.perf_counter()
        a = runner.logits(ids)
        t1 = time.perf_counter()
        path, revision_seen, data_path = runner.model_path, runner.model_revision, runner.data_path
    b = torch_logits(path, ids, lora)
    t2 = time.perf_counter()
    if b.shape[1] != a.shape[1]:
        raise HfviewError(f"vocabulary sizes differ: llama.cpp has {a.shape[1]} logits, transformers "
                          f"{b.shape[1]}: the view's vocabulary does not match the model's output layer")
    m = metrics(a, b)
    return ParityReport(model=str(model if model is not None else path), model_revision=revision_seen,
                        precision=precision, n_tokens=len(ids), n_vocab=a.shape[1], threshold=threshold,
                        passed=bool(m["nmse"] < threshold), seconds_llama_cpp=t1 - t0,
                        seconds_transformers=t2 - t1, note=note, data_path=data_path,
                        **({"reference": "transformers + peft (" + ", ".join(map(str, lora)) + ")"} if lora else {}),
                        **m)
