"""Render a model's own chat template (the GGUF's ``tokenizer.chat_template``) in a Jinja sandbox.

The environment follows what transformers' ``apply_chat_template`` sets up: trim_blocks and
lstrip_blocks, the loop-controls extension, ``raise_exception``, ``strftime_now``, a ``tojson`` that
keeps non-ASCII text, and the special tokens as plain string variables (bos_token, eos_token, ...).
The sandbox is immutable: a template cannot change the objects it is given or reach Python internals.
"""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from hfview.errors import HfviewError

__all__ = ["ChatTemplateError", "render", "messages_for", "read_system"]


class ChatTemplateError(HfviewError):
    """The model's chat template could not be rendered."""


def _raise(message: str):
    raise ChatTemplateError(f"the model's chat template refused the conversation: {message}")


def _tojson(value, indent=None, ensure_ascii=False, sort_keys=False, separators=None):
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys, separators=separators)


def render(template: str, messages: list[dict], *, add_generation_prompt: bool = True, **special_tokens) -> str:
    """The template applied to ``messages``; ``special_tokens`` become variables (bos_token="<s>", ...)."""
    from jinja2 import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                                **special_tokens)
    except ChatTemplateError:
        raise
    except TemplateError as exc:
        raise ChatTemplateError(f"the model's chat template failed: {type(exc).__name__}: {exc}; "
                                f"pass --no-chat to send the prompt as plain text") from exc


def read_system(value: str | None) -> str | None:
    """``--system TEXT|FILE``: the contents of FILE when it names an existing file, else the text itself."""
    if value is None:
        return None
    path = Path(value).expanduser()
    try:
        if len(value) < 4096 and path.is_file():
            return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise HfviewError(f"--system {value}: cannot read the file: {exc}") from exc
    return value


def messages_for(prompt: str, system: str | None = None) -> list[dict]:
    msgs = [{"role": "system", "content": system}] if system else []
    msgs.append({"role": "user", "content": prompt})
    return msgs
