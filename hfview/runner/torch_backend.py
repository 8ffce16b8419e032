"""The torch fallback: a family the view does not cover, run by transformers with the same interface
as ``runner.api.Runner`` (tokenize, logits, prompt_ids, run, generate).

Never trust_remote_code: only model classes transformers itself ships (runner.resolve's gate checks
that). Decoding is incremental (``past_key_values``) and samples through the same llama.cpp sampler chain
(runner.sampling), with the model's defaults from generation_config.json read as the converter reads them,
so a seed means the same thing on both backends.
"""
from __future__ import annotations

import time
from contextlib import closing as _closing
from pathlib import Path
from typing import Any, Callable

import numpy as np

from hfview.errors import HfviewError

from .chat import messages_for, render
from .generate import Generation, PromptTooLong
from .sampling import Sampler, Sampling, from_generation_config

__all__ = ["TorchRunner", "NeedsTorch", "import_torch"]

_TORCH_DEVICES = {"cpu": "cpu", "cuda": "cuda", "metal": "mps"}


class NeedsTorch(HfviewError):
    """torch / transformers are not installed."""


def import_torch():
    """(torch, transformers), or NeedsTorch saying how to install them (for parity and the torch backend)."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise NeedsTorch(f"parity compares with transformers, which is not installed ({exc.name} is missing): "
                         f"pip install 'hfview[torch]' (torch==2.13.0, transformers==5.24.0)") from None
    return torch, transformers


class TorchRunner:
    backend = "torch"
    checkpoint = None

    def __init__(self, path: Path, *, model_revision: str | None = None, device: str = "cpu",
                 n_ctx: int | None = None, notes: list[str] | None = None):
        torch, transformers = import_torch()
        self.torch = torch
        self.device = _TORCH_DEVICES[device]
        if device == "cuda" and not torch.cuda.is_available():
            raise HfviewError("device 'cuda': the installed torch has no CUDA device (torch.cuda.is_available() "
                              "is False); install a CUDA build of torch==2.13.0")
        if device == "metal" and not torch.backends.mps.is_available():
            raise HfviewError("device 'metal': torch reports no MPS device on this machine")
        transformers.utils.logging.disable_progress_bar()
        self.model_path = Path(path)
        self.model_revision = model_revision
        self.notes = notes or []
        self.tok = transformers.AutoTokenizer.from_pretrained(str(path), trust_remote_code=False)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path), dtype=torch.float32, trust_remote_code=False).to(self.device).eval()
        self.chat_template = getattr(self.tok, "chat_template", None) or None
        # transformers 5.24 renamed past_key_values to cache (the old name warns); accept either.
        import inspect
        self._cache_arg = ("cache" if "cache" in inspect.signature(self.model.forward).parameters
                           else "past_key_values")
        limit = getattr(self.model.config, "max_position_embeddings", None) or getattr(
            self.model.config, "n_positions", None)
        self.n_ctx = int(n_ctx or min(4096, limit or 4096))
        self.n_vocab = int(self.model.get_output_embeddings().weight.shape[0])
        eos = self.model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos]
        self.eog = {int(t) for t in eos + [self.tok.eos_token_id] if t is not None}
        values, not_applied = from_generation_config(self.model_path)
        self.sampling = Sampling().over(values, "model")
        if not_applied:
            self.notes.append(f"the model's sampling defaults also state {', '.join(not_applied)}; hfview's "
                              f"sampler does not apply them")
        self.unapplied_window = None  # transformers computes the model's own attention

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
        return list(self.tok(text, add_special_tokens=add_special)["input_ids"])

    def logits(self, ids: list[int]) -> np.ndarray:
        with self.torch.no_grad():
            out = self.model(self.torch.tensor([ids], device=self.device)).logits[0]
        return out.float().cpu().numpy()

    def special_tokens(self) -> dict[str, str]:
        return {k: getattr(self.tok, k) for k in ("bos_token", "eos_token") if getattr(self.tok, k, None)}

    def render_chat(self, prompt: str, system: str | None = None) -> str:
        if not self.chat_template:
            raise HfviewError("this model has no chat template: use --no-chat")
        return render(self.chat_template, messages_for(prompt, system), add_generation_prompt=True,
                      **self.special_tokens())

    def prompt_ids(self, prompt: str, *, system: str | None = None, chat: bool | None = None) -> list[int]:
        if chat is None:
            chat = self.chat_template is not None
        if chat:  # as apply_chat_template: the template places the special tokens itself
            return self.tokenize(self.render_chat(prompt, system), add_special=False)
        if system:
            raise HfviewError("--system needs the chat template (drop --no-chat), or put it in the prompt")
        return self.tokenize(prompt)

    def run(self, prompt: str | None = None, *, ids: list[int] | None = None, system: str | None = None,
            chat: bool | None = None, max_tokens: int = 256, on_text: Callable[[str], None] | None = None,
            **sampling: Any) -> Generation:
        """As runner.api.Runner.run."""
        torch = self.torch
        if ids is None:
            ids = self.prompt_ids(prompt, system=system, chat=chat)
        if len(ids) >= self.n_ctx:
            raise PromptTooLong(f"the prompt is {len(ids)} tokens; the context holds {self.n_ctx}, which leaves "
                                f"no room to generate: shorten the prompt or pass a larger context (n_ctx)")
        settings = self.sampling.over(sampling, "asked").seeded()
        sampler = Sampler(settings, self.n_vocab)
        for tok in ids:
            sampler.accept(tok)
        t0 = time.perf_counter()
        first = None
        out: list[int] = []
        shown = ""
        stop = "max_tokens"
        past = None
        feed = torch.tensor([ids], device=self.device)
        with torch.no_grad(), _closing(sampler):
            for i in range(max_tokens):
                res = self.model(feed, use_cache=True, **{self._cache_arg: past})
                past = res.get("cache", None) or res.get("past_key_values", None)
                tok = sampler.sample(res.logits[0, -1].float().cpu().numpy())
                if first is None:
                    first = time.perf_counter() - t0
                if tok in self.eog:
                    stop = "eos"
                    break
                out.append(tok)
                # Decode the whole tail and print what is new, holding back an incomplete character.
                text = self.tok.decode(out, skip_special_tokens=True)
                if not text.endswith("\ufffd") and len(text) > len(shown):
                    if on_text is not None:
                        on_text(text[len(shown):])
                    shown = text
                if len(ids) + len(out) >= self.n_ctx:
                    stop = "context" if i + 1 < max_tokens else stop
                    break
                feed = torch.tensor([[tok]], device=self.device)
        text = self.tok.decode(out, skip_special_tokens=True)
        if on_text is not None and len(text) > len(shown):
            on_text(text[len(shown):])
        seconds = time.perf_counter() - t0
        return Generation(text=text, tokens=out, prompt_tokens=len(ids), stop=stop, seconds=seconds,
                          first_token_seconds=first if first is not None else seconds, sampling=settings.used())

    def generate(self, prompt: str, **kwargs: Any) -> str:
        return self.run(prompt, **kwargs).text

    def close(self) -> None:
        self.model = None

    def __enter__(self) -> "TorchRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
