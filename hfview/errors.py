"""Errors a user can act on. Each message names the file, key or tensor at fault and what to do."""
import reprlib


class HfviewError(Exception):
    """Base of every error hfview raises on purpose."""


class CheckpointError(HfviewError):
    """The checkpoint directory cannot be read as its converted GGUF."""


class ConfigError(CheckpointError):
    """A config key this family cannot honour, or a malformed config."""


class QuantizedCheckpoint(ConfigError):
    """The checkpoint declares a quantization; hfview reads unquantized weights only."""



def _short_repr() -> reprlib.Repr:
    r = reprlib.Repr()
    r.maxlevel, r.maxdict, r.maxlist, r.maxtuple, r.maxstring, r.maxother, r.maxlong = 3, 6, 8, 8, 60, 60, 40
    return r


_SHORT = _short_repr()


def shown(value) -> str:
    """A value as an error message quotes it: its repr, cut short (a hostile file's value may be megabytes)."""
    try:
        return _SHORT.repr(value)
    except ValueError:  # an int past Python's 4300-digit str() limit
        return f"<a {type(value).__name__} too long to show>"
