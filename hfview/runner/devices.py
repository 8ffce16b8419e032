"""Which compute backends the installed llama-cpp-python was built with, asked from ggml itself.

llama-cpp-python binds no ggml backend-registry function, so they are called from the ``libggml``
shipped in the package's ``lib/`` folder (the same library llama.cpp is linked against).
"""
from __future__ import annotations

import ctypes
import functools
import importlib
import pathlib
import sys
import threading
from dataclasses import dataclass

from hfview._submodules import load_alone
from hfview.errors import HfviewError

__all__ = ["DeviceInfo", "DeviceUnavailable", "DEVICES", "backends", "devices", "check_device", "n_gpu_layers",
           "llama_bindings", "backend_init"]

# Our device names -> the ggml registry name of the backend that provides them.
DEVICES = {"cpu": "CPU", "cuda": "CUDA", "metal": "MTL"}
_BUILD_FLAG = {"cuda": "-DGGML_CUDA=on", "metal": "-DGGML_METAL=on"}
_DEV_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel", 4: "meta"}


class DeviceUnavailable(HfviewError, RuntimeError):
    pass


@dataclass(frozen=True)
class DeviceInfo:
    name: str          # ggml device name, e.g. "CPU", "CUDA0"
    description: str   # e.g. the CPU or GPU model
    type: str          # cpu | gpu | igpu | accel | meta
    backend: str       # registry name, e.g. "CPU", "CUDA", "MTL"


def llama_bindings():
    """llama-cpp-python's ctypes bindings (``llama_cpp.llama_cpp``), or an ImportError saying how to install them.
    Loaded alone (hfview._submodules) where llama_cpp is not imported yet: its package also imports the high-level
    Llama, its chat formats (jinja2) and disk cache, 33 ms of each start that a view's run does not use (bench
    machine); hfview's modules that do use them (runner.llama_object, serve) import the package then."""
    try:
        load_alone("llama_cpp", "_ctypes_extensions", "llama_cpp")
        return importlib.import_module("llama_cpp.llama_cpp")
    except ImportError as exc:  # pragma: no cover
        raise ImportError("llama-cpp-python is not installed: pip install llama-cpp-python==0.3.36") from exc


_backend_lock = threading.Lock()
_backend_ready = False


def backend_init() -> None:
    """``llama_backend_init()``, once per process: here, below runner.stream, as listing devices needs it too."""
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama_bindings().llama_backend_init()
            _backend_ready = True


def ggml_library(name: str) -> ctypes.CDLL:
    """One of ggml's libraries ("ggml", "ggml-base") from beside llama_cpp's bindings, loaded as they load libllama."""
    ll = llama_bindings()
    load_shared_library = sys.modules["llama_cpp._ctypes_extensions"].load_shared_library
    return load_shared_library(name, pathlib.Path(ll.__file__).parent / "lib")


@functools.lru_cache(maxsize=1)
def _ggml() -> ctypes.CDLL:
    lib = ggml_library("ggml")
    sigs = {
        "ggml_backend_reg_count": ([], ctypes.c_size_t),
        "ggml_backend_reg_get": ([ctypes.c_size_t], ctypes.c_void_p),
        "ggml_backend_reg_name": ([ctypes.c_void_p], ctypes.c_char_p),
        "ggml_backend_dev_count": ([], ctypes.c_size_t),
        "ggml_backend_dev_get": ([ctypes.c_size_t], ctypes.c_void_p),
        "ggml_backend_dev_name": ([ctypes.c_void_p], ctypes.c_char_p),
        "ggml_backend_dev_description": ([ctypes.c_void_p], ctypes.c_char_p),
        "ggml_backend_dev_type": ([ctypes.c_void_p], ctypes.c_int),
        "ggml_backend_dev_backend_reg": ([ctypes.c_void_p], ctypes.c_void_p),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    backend_init()  # registers the backends (loads them, in a dynamic-backend build)
    return lib


def backends() -> list[str]:
    """Registry names of the backends compiled into this build, e.g. ["CPU"] or ["CUDA", "CPU"]."""
    lib = _ggml()
    return [lib.ggml_backend_reg_name(lib.ggml_backend_reg_get(i)).decode()
            for i in range(lib.ggml_backend_reg_count())]


def devices() -> list[DeviceInfo]:
    """Devices the backends found on this machine (a CUDA build on a GPU-less machine lists none)."""
    lib = _ggml()
    out = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        out.append(DeviceInfo(
            name=(lib.ggml_backend_dev_name(dev) or b"").decode(),
            description=(lib.ggml_backend_dev_description(dev) or b"").decode(),
            type=_DEV_TYPES.get(lib.ggml_backend_dev_type(dev), "unknown"),
            backend=(lib.ggml_backend_reg_name(lib.ggml_backend_dev_backend_reg(dev)) or b"").decode(),
        ))
    return out


def rebuild_hint(device: str) -> str:
    return (f'CMAKE_ARGS="{_BUILD_FLAG[device]}" pip install --force-reinstall --no-binary llama-cpp-python '
            f"llama-cpp-python==0.3.36")


def check_device(name: str) -> str:
    """Normalise and check a device name (cpu | cuda | metal); raise DeviceUnavailable saying what to do."""
    device = name.strip().lower()
    if device not in DEVICES:
        raise DeviceUnavailable(f"unknown device {name!r}: choose one of {', '.join(DEVICES)}")
    if device == "cpu":
        return device
    built = backends()
    if DEVICES[device] not in built:
        note = " (Metal is on by default when building on macOS)" if device == "metal" else ""
        raise DeviceUnavailable(
            f"device {device!r} is not available: the installed llama-cpp-python was built with backends "
            f"{built}, without {DEVICES[device]}{note}. Rebuild it with:\n  {rebuild_hint(device)}")
    if not any(d.backend == DEVICES[device] for d in devices()):
        raise DeviceUnavailable(f"llama-cpp-python has the {DEVICES[device]} backend, but it found no "
                                f"{device} device on this machine")
    return device


def n_gpu_layers(device: str) -> int:
    """Layers to offload for a device: none on the CPU, all (-1) on a GPU."""
    return 0 if check_device(device) == "cpu" else -1
