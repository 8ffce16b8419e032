"""The converter oracle: llama.cpp's own convert_hf_to_gguf.py from the pinned llama-cpp-python sdist.

The sdist is fetched once with pip and unpacked into a cache outside the repository
($HFVIEW_CACHE, default ~/.cache/hfview). Nothing of the converter is copied into the project.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"
CACHE = Path(os.environ.get("HFVIEW_CACHE", Path.home() / ".cache" / "hfview"))
# general.* keys the converter derives from the checkpoint directory's name (gguf-py's Metadata splits it into
# these); fixture directories end in a content hash, which may read as a finetune or version: two checkpoints
# compared for the same content are compared without them
DIRECTORY_NAMED = frozenset({"general.name", "general.basename", "general.finetune", "general.version",
                             "general.size_label"})


def kv_but_directory_named(view) -> list[tuple]:
    """(key, value) of a view's KV in order, less what the directory's name decides."""
    return [(kv.key, kv.value) for kv in view.kv if kv.key not in DIRECTORY_NAMED]


_WANTED = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/", "models/ggml-vocab-", "models/templates/")


def made_once(out: Path, make) -> Path:
    """`out` (a file or directory under the cache), made by make(tmp) into a temporary path and renamed into
    place. Test processes running side by side (pytest -n) share the cache: the first to reach `out` makes it
    under a lock while the others wait for it, so a converter run is never done twice nor seen half written."""
    import fcntl
    import shutil

    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            tmp = out.with_name(f"{out.name}.{os.getpid()}.partial")
            if tmp.is_dir():
                shutil.rmtree(tmp)
            elif tmp.exists():
                tmp.unlink()
            make(tmp)
            tmp.rename(out)
    return out


def converter_root() -> Path:
    """vendor/llama.cpp of the pinned sdist, fetched and unpacked on first use."""
    root = CACHE / f"llama-cpp-python-{LLAMA_CPP_PYTHON}" / "llama.cpp"
    if (root / "convert_hf_to_gguf.py").is_file():
        # chat templates some converter classes read from their own tree (MiniMax-01's MiniMax-M1.jinja): a root
        # unpacked before they were wanted gets them added
        made_once(root / "models" / "templates", lambda tmp: _unpack_sdist(tmp, "models/templates/"))
        return root

    def unpack(tmp: Path) -> None:
        sdist_dir = CACHE / "sdist"
        sdist_dir.mkdir(parents=True, exist_ok=True)
        sdists = sorted(sdist_dir.glob(f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"))
        if not sdists:
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                            f"llama-cpp-python=={LLAMA_CPP_PYTHON}", "-d", str(sdist_dir)], check=True)
            sdists = sorted(sdist_dir.glob(f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"))
        prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/"
        with tarfile.open(sdists[0]) as tar:
            for member in tar.getmembers():
                if not member.name.startswith(prefix):
                    continue
                rel = member.name[len(prefix):]
                if member.isfile() and rel.startswith(_WANTED):
                    member.name = rel
                    tar.extract(member, tmp, filter="data")

    return made_once(root, unpack)


def _unpack_sdist(tmp: Path, wanted: str) -> None:
    """The sdist's vendor/llama.cpp/<wanted> files into tmp (as they lie under `wanted`)."""
    sdists = sorted((CACHE / "sdist").glob(f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"))
    prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/{wanted}"
    with tarfile.open(sdists[0]) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(prefix):
                member.name = member.name[len(prefix):]
                tar.extract(member, tmp, filter="data")


def convert(model_dir: Path, outfile: Path, outtype: str = "auto", *extra: str) -> Path:
    """Run the pinned converter; raise with its log on failure.

    Each run is a fresh process of the converter. Where fork() exists, that process is forked from a
    server that imported the converter (torch, transformers) once: the same code on a clean copy of a
    process, without paying ~5 s of imports per run. HFVIEW_ORACLE_FORK=0 runs a new interpreter instead.
    """
    args = [str(model_dir), "--outfile", str(outfile), "--outtype", outtype, *extra]
    if hasattr(os, "fork") and os.environ.get("HFVIEW_ORACLE_FORK", "1") != "0":
        rc, log = _fork_server().run(args)
    else:
        root = converter_root()
        proc = subprocess.run([sys.executable, str(root / "convert_hf_to_gguf.py"), *args],
                              cwd=root, env=_converter_env(root), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL)
        rc, log = proc.returncode, proc.stderr
    if rc != 0:
        raise ConverterFailed(log[-4000:])
    return outfile


def convert_cached(model_dir: Path, outtype: str = "auto", *extra: str) -> Path:
    """The pinned converter's file for `model_dir` (a variant a test wrote), cached by the directory's name and
    content: a test that converts a variant on every run pays for it once. Failures are not cached."""
    model_dir = Path(model_dir)
    h = hashlib.sha256("\0".join(extra).encode())
    for f in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(model_dir)).encode() + b"\0" + sha256(f).encode())
    out = CACHE / "converted-variants" / f"{model_dir.name}-{h.hexdigest()[:16]}-{outtype}.gguf"
    return made_once(out, lambda tmp: convert(model_dir, tmp, outtype, *extra))


def _converter_env(root: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONHASHSEED="0")
    env.pop("NO_LOCAL_GGUF", None)  # the converter then puts its own gguf-py first
    return env


_SERVER_CODE = r"""
import json, os, sys, traceback
root = sys.argv[1]
sys.path.insert(0, root)
os.chdir(root)
import convert_hf_to_gguf as converter  # imports torch, transformers and the converter's own gguf-py
# The converter's Qwen and ChatGLM vocabularies call transformers' bytes_to_unicode once per token, and it builds
# its 256-entry table anew each time: ~110 of the ~135 s a 151k-token qwen.tiktoken takes. It is a pure function
# (the converter reads the table, never writes it), so remembering its result changes no byte of any file.
import functools, transformers.convert_slow_tokenizer as slow
slow.bytes_to_unicode = functools.lru_cache(maxsize=None)(slow.bytes_to_unicode)
print("ready", flush=True)
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:  # the child is one converter run, as `python convert_hf_to_gguf.py ARGS` would be
        code = 1
        try:
            # no standard input, as in CI: transformers' remote-code prompt then ends at once (EOF)
            # instead of waiting on the job pipe until its 15 s alarm
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            sys.argv = ["convert_hf_to_gguf.py", *job["args"]]
            converter.main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)
"""


class _ForkServer:
    def __init__(self):
        import atexit
        import tempfile
        import threading

        root = converter_root()
        self.lock = threading.Lock()
        self.tmp = tempfile.mkdtemp(prefix="hfview-oracle-")
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER_CODE, str(root)], cwd=root,
                                     env=_converter_env(root), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise ConverterFailed("the converter could not be imported (see the output above)")
        atexit.register(self.close)

    def run(self, args: list[str]) -> tuple[int, str]:
        import json

        with self.lock:
            log = os.path.join(self.tmp, "log.txt")
            self.proc.stdin.write(json.dumps({"args": args, "log": log}) + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline()
            if not reply:
                raise ConverterFailed("the converter server died")
            with open(log, encoding="utf-8", errors="replace") as f:
                return json.loads(reply)["rc"], f.read()

    def close(self) -> None:
        import shutil

        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        shutil.rmtree(self.tmp, ignore_errors=True)


_server: _ForkServer | None = None


def _fork_server() -> _ForkServer:
    global _server
    if _server is None or _server.proc.poll() is not None:
        _server = _ForkServer()
    return _server


class ConverterFailed(RuntimeError):
    pass


_QUANTIZE = """
import json, sys, ctypes
import numpy as np
import llama_cpp.llama_cpp as L
L.llama_backend_init()
p = L.llama_model_quantize_default_params()
p.ftype = int(sys.argv[3])
p.nthread = 2
if sys.argv[4]:  # importance weights by tensor (.npz) and the KV overrides llama-quantize adds for them
    weights = dict(np.load(sys.argv[4]))
    keep = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()}
    data = (L.llama_model_imatrix_data * (len(keep) + 1))()
    for i, (k, v) in enumerate(keep.items()):
        data[i].name, data[i].data, data[i].size = k.encode(), v.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), v.size
    p.imatrix = ctypes.cast(data, ctypes.POINTER(L.llama_model_imatrix_data))
    overrides = json.loads(sys.argv[5])
    kvo = (L.llama_model_kv_override * (len(overrides) + 1))()
    for i, (key, value) in enumerate(overrides):
        kvo[i].key = key.encode()
        if isinstance(value, str):
            kvo[i].tag, kvo[i].value.val_str = L.LLAMA_KV_OVERRIDE_TYPE_STR, value.encode()[:127]
        else:
            kvo[i].tag, kvo[i].value.val_i64 = L.LLAMA_KV_OVERRIDE_TYPE_INT, value
    p.kv_overrides = ctypes.cast(kvo, ctypes.POINTER(L.llama_model_kv_override))
sys.exit(L.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), p))
"""


def quantize(gguf: Path, outfile: Path, ftype: int, weights: Path | None = None,
             overrides: list | None = None) -> Path:
    """llama.cpp's own llama_model_quantize (bound in llama-cpp-python) with default parameters, in a process of
    its own (a failed GGML_ASSERT aborts the process). `weights`: an .npz of importance weights by tensor name
    and `overrides` the (key, value) KV overrides, as llama-quantize --imatrix passes them."""
    import json

    proc = subprocess.run([sys.executable, "-c", _QUANTIZE, str(gguf), str(outfile), str(ftype),
                           str(weights or ""), json.dumps(overrides or [])],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise ConverterFailed(f"llama_model_quantize {ftype} exit {proc.returncode}: {proc.stderr[-4000:]}")
    return outfile


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def first_difference(ours: Path, theirs: Path) -> str:
    """A human description of where two GGUF files first differ: a KV key, a tensor, or the layout."""
    from gguf import GGUFReader

    a, b = GGUFReader(ours), GGUFReader(theirs)
    a_keys, b_keys = list(a.fields), list(b.fields)
    for i, (ka, kb) in enumerate(zip(a_keys, b_keys)):
        if ka != kb:
            return f"KV #{i}: ours {ka!r}, converter {kb!r}"
        fa, fb = a.fields[ka], b.fields[kb]
        if fa.types != fb.types or [bytes(p) for p in fa.parts] != [bytes(p) for p in fb.parts]:
            return f"KV {ka!r}: ours {_show(fa)} ({fa.types}), converter {_show(fb)} ({fb.types})"
    if len(a_keys) != len(b_keys):
        return f"KV count: ours {len(a_keys)} ({a_keys[len(b_keys):]}), converter {len(b_keys)} ({b_keys[len(a_keys):]})"
    for i, (ta, tb) in enumerate(zip(a.tensors, b.tensors)):
        if ta.name != tb.name:
            return f"tensor #{i}: ours {ta.name!r}, converter {tb.name!r}"
        if list(ta.shape) != list(tb.shape) or ta.tensor_type != tb.tensor_type:
            return (f"tensor {ta.name!r}: ours {list(ta.shape)} {ta.tensor_type.name}, "
                    f"converter {list(tb.shape)} {tb.tensor_type.name}")
        if bytes(ta.data.tobytes()) != bytes(tb.data.tobytes()):
            import numpy as np
            da, db = ta.data.reshape(-1), tb.data.reshape(-1)
            j = int(np.flatnonzero(da.view(np.uint8) != db.view(np.uint8))[0]) if da.nbytes == db.nbytes else -1
            return f"tensor {ta.name!r}: data differ (first differing byte {j})"
    if len(a.tensors) != len(b.tensors):
        return f"tensor count: ours {len(a.tensors)}, converter {len(b.tensors)}"
    return "no KV or tensor differs (layout/padding bytes differ)"


def _show(field) -> str:
    try:
        v = field.contents()
    except Exception:  # noqa: BLE001 - only for a message
        v = [bytes(p) for p in field.parts]
    s = repr(v)
    return s if len(s) < 200 else s[:200] + "…"
