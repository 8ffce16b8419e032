"""Sampling as llama.cpp samples: the model's own defaults, llama.cpp's sampler chain.

The settings come in three layers, as in llama.cpp's own tools (common.cpp reads `general.sampling.*`
from the model for every value the user did not set): llama.cpp's defaults, then what the model states
(the converter writes `general.sampling.*` from generation_config.json), then what the user asks.
The chain is llama.cpp's: penalties, top-k, top-p, min-p, temperature, then a seeded draw (the order of
llama.cpp's default sampler sequence, with the stages that are off by default left out). The torch
backend samples through the same chain, from the same settings read out of generation_config.json the
way the converter reads them, so a seed means the same on both backends.
"""
from __future__ import annotations

import ctypes
import json
import secrets
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from hfview.errors import HfviewError
from .devices import llama_bindings

__all__ = ["Sampling", "Sampler", "from_generation_config", "model_sampling"]

# general.sampling.<key> -> Sampling field. The converter writes these from generation_config.json.
METADATA_KEYS = {"temp": "temperature", "top_k": "top_k", "top_p": "top_p", "min_p": "min_p",
                 "penalty_repeat": "repeat_penalty", "penalty_last_n": "repeat_last_n"}
# Keys llama.cpp's tools also read that this runner does not apply (reported, not silently dropped).
NOT_APPLIED = ("sequence", "xtc_probability", "xtc_threshold", "mirostat", "mirostat_tau", "mirostat_eta")


@dataclass(frozen=True)
class Sampling:
    """What one generation samples with; defaults are llama.cpp's (common_params_sampling)."""
    temperature: float = 0.8      # <= 0: greedy (after the repetition penalty, as in llama.cpp)
    top_k: int = 40               # <= 0: the whole vocabulary
    top_p: float = 0.95           # 1: off
    min_p: float = 0.05           # 0: off
    repeat_penalty: float = 1.0   # 1: off
    repeat_last_n: int = 64       # tokens the penalty looks back over (prompt included); 0: off
    seed: int | None = None       # None: a fresh random seed, reported in `used`
    source: dict[str, str] = field(default_factory=dict, compare=False)  # field -> "model" | "asked"

    def __post_init__(self):
        checks = {"temperature": self.temperature >= 0, "top_p": 0 < self.top_p <= 1, "min_p": 0 <= self.min_p <= 1,
                  "repeat_penalty": self.repeat_penalty > 0, "repeat_last_n": self.repeat_last_n >= -1}
        for name, ok in checks.items():
            if not ok:
                raise HfviewError(f"sampling {name} = {getattr(self, name)!r} is out of range "
                                  f"(temperature >= 0, 0 < top_p <= 1, 0 <= min_p <= 1, repeat_penalty > 0, "
                                  f"repeat_last_n >= -1)")

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0

    def over(self, values: Mapping[str, Any], source: str) -> "Sampling":
        """These settings with `values` (field -> value, None meaning unstated) laid over them."""
        stated = {k: v for k, v in values.items() if v is not None}
        unknown = set(stated) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"unknown sampling settings: {sorted(unknown)}")
        return replace(self, **stated, source={**self.source, **{k: source for k in stated}})

    def seeded(self) -> "Sampling":
        """With a concrete seed, so the run can be repeated from what `used` reports."""
        if self.seed is not None:
            return self
        return replace(self, seed=secrets.randbits(32), source={**self.source, "seed": "random"})

    def used(self) -> dict:
        """The values used, for --json: each setting, and where it came from (llama.cpp default, model, asked)."""
        d = asdict(self)
        src = d.pop("source")
        return {**d, "from": {f.name: src.get(f.name, "llama.cpp default") for f in fields(self)
                              if f.name not in ("source",)}}


def _number(key: str, value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise HfviewError(f"general.sampling.{key} = {value!r} is not a number; the model's sampling defaults "
                          f"are malformed (override it, e.g. --temperature)")
    return kind(value)


def from_metadata(meta: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(Sampling fields, keys present but not applied) from `general.sampling.<key>` values."""
    values = {}
    for key, name in METADATA_KEYS.items():
        if key in meta:
            values[name] = _number(key, meta[key], int if name in ("top_k", "repeat_last_n") else float)
    return values, [k for k in NOT_APPLIED if k in meta]


def from_generation_config(model_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """The model's defaults from generation_config.json, as the converter turns it into general.sampling.*
    (repetition_penalty is its name for penalty_repeat). Absent or unreadable: no defaults."""
    path = Path(model_dir) / "generation_config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}, []
    if not isinstance(config, dict):
        return {}, []
    meta = {k: config[k] for k in ("top_k", "top_p", "min_p", "penalty_last_n", *NOT_APPLIED) if k in config}
    if "temperature" in config:
        meta["temp"] = config["temperature"]
    repeat = config.get("penalty_repeat", config.get("repetition_penalty"))
    if repeat is not None:
        meta["penalty_repeat"] = repeat
    return from_metadata({k: v for k, v in meta.items() if v is not None})


def model_sampling(llama_model_ptr) -> tuple[dict[str, Any], list[str]]:
    """The model's defaults from the loaded llama.cpp model's `general.sampling.*` keys."""
    ll = llama_bindings()

    meta: dict[str, Any] = {}
    buf = ctypes.create_string_buffer(256)
    for key in (*METADATA_KEYS, *NOT_APPLIED):
        n = ll.llama_model_meta_val_str(llama_model_ptr, f"general.sampling.{key}".encode(), buf, len(buf))
        if n > 0:
            text = buf.value.decode("utf-8", "replace")
            try:
                meta[key] = json.loads(text)
            except ValueError:
                meta[key] = text
    return from_metadata(meta)


_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class Sampler:
    """llama.cpp's sampler chain for one generation. `sample(logits)` draws the next id from a logits row;
    `accept(id)` records a token (prompt or generated) for the repetition penalty."""

    def __init__(self, settings: Sampling, n_vocab: int):
        ll = llama_bindings()

        self._ll = ll
        s = settings.seeded()
        self.settings = s
        self.n_vocab = int(n_vocab)
        self.chain = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        add = lambda smpl: ll.llama_sampler_chain_add(self.chain, smpl)  # noqa: E731 - the chain owns each stage
        add(ll.llama_sampler_init_penalties(self.n_vocab, s.repeat_last_n, s.repeat_penalty, 0.0, 0.0))
        add(ll.llama_sampler_init_top_k(s.top_k))
        add(ll.llama_sampler_init_top_p(s.top_p, 1))
        add(ll.llama_sampler_init_min_p(s.min_p, 1))
        add(ll.llama_sampler_init_temp(s.temperature))
        add(ll.llama_sampler_init_dist(s.seed & 0xFFFFFFFF))
        self._data = (ll.llama_token_data * self.n_vocab)()
        # The candidates as numpy records over the same memory: (id, logit, p), llama_token_data's layout.
        self._records = np.frombuffer(self._data, dtype=_TOKEN_DATA)
        self._ids = np.arange(self.n_vocab, dtype=np.int32)

    def accept(self, token: int) -> None:
        self._ll.llama_sampler_accept(self.chain, int(token))

    def sample(self, logits: np.ndarray) -> int:
        ll = self._ll
        row = np.asarray(logits, dtype=np.float32).reshape(-1)
        if row.shape[0] != self.n_vocab:
            raise ValueError(f"a logits row of {row.shape[0]}, the vocabulary has {self.n_vocab}")
        rec = self._records  # refilled each draw: the stages reorder and rescale the candidates in place
        rec["id"], rec["logit"], rec["p"] = self._ids, row, 0.0
        cur = ll.llama_token_data_array(data=self._data, size=self.n_vocab, selected=-1, sorted=False)
        ll.llama_sampler_apply(self.chain, ctypes.byref(cur))
        if not 0 <= cur.selected < cur.size:
            raise RuntimeError("llama.cpp's sampler chain selected no token")
        token = int(cur.data[cur.selected].id)
        self.accept(token)
        return token

    def close(self) -> None:
        if self.chain is not None:
            self._ll.llama_sampler_free(self.chain)
            self.chain = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass

