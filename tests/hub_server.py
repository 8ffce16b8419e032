"""A fake Hugging Face Hub: a real HTTP server on 127.0.0.1 serving the part of the Hub API that
huggingface_hub's `model_info` and `hf_hub_download` call, with a request log.

Endpoints, as the Hub answers them (read from huggingface_hub's file_download.py / hf_api.py):
- GET /api/models/{repo}[/revision/{rev}]: JSON with `sha` (the commit) and `siblings` [{rfilename}];
  404 with X-Error-Code RepoNotFound / RevisionNotFound.
- HEAD|GET /{repo}/resolve/{rev}/{file}: X-Repo-Commit always; a git-stored file answers 200 with its
  git blob SHA-1 as ETag and Content-Length; an LFS file (weights, *.model) answers 302 to a CDN URL on
  another host name (localhost), with X-Linked-Etag (its SHA-256) and X-Linked-Size, which is where
  huggingface_hub stops following and reads the metadata; 404 EntryNotFound for an absent file.
- GET /lfs/{sha256} (the "CDN"): the bytes.
HTTP/1.0, so every request is its own connection and stop() really cuts the client off.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".gguf", ".bin", ".model")


@dataclass
class Request:
    method: str
    path: str
    status: int
    body_bytes: int     # bytes of response body sent (0 for HEAD and redirects)
    file: str | None    # the repository file the request was about, if any


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, dict] = {}
        self.log: list[Request] = []
        self.fail: dict[str, int] = {}  # file name -> HTTP status to answer on resolve
        self.gated: dict[str, str] = {}  # repo id -> the token that grants access (Authorization: Bearer)
        self._lfs: dict[str, tuple[str, bytes]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- repositories -------------------------------------------------------------------------
    def add_repo(self, repo_id: str, files: dict[str, bytes], *, branch: str = "main") -> str:
        """Publish `files` as one commit on `branch`; return the commit SHA."""
        digest = hashlib.sha1(repo_id.encode())
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + files[name])
        sha = digest.hexdigest()
        repo = self.repos.setdefault(repo_id, {"branches": {}, "commits": {}})
        repo["commits"][sha] = dict(files)
        repo["branches"][branch] = sha
        for name, data in files.items():
            if name.endswith(LFS_SUFFIXES):
                self._lfs[hashlib.sha256(data).hexdigest()] = (name, data)
        return sha

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> "FakeHub":
        hub = self

        class Handler(_Handler):
            owner = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- the log ------------------------------------------------------------------------------
    def record(self, entry: Request) -> None:
        with self._lock:
            self.log.append(entry)

    def files_requested(self) -> list[str]:
        """Repository files asked about (HEAD or GET), each once, in first-request order."""
        return list(dict.fromkeys(r.file for r in self.log if r.file is not None))

    def bytes_served(self) -> int:
        return sum(r.body_bytes for r in self.log)

    def weight_requests(self) -> list[Request]:
        return [r for r in self.log if r.file and r.file.endswith((".safetensors", ".gguf", ".bin"))]


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    owner: FakeHub
    protocol_version = "HTTP/1.0"

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def do_HEAD(self) -> None:
        self._route(head=True)

    def do_GET(self) -> None:
        self._route(head=False)

    # -- routing ------------------------------------------------------------------------------
    def _route(self, head: bool) -> None:
        path = urlparse(self.path).path
        if path == "/api/agent-harnesses":  # huggingface_hub's user-agent telemetry registry
            self._send(200, b'{"standardEnvVars": [], "harnesses": {}}', head=head)
        elif path.startswith("/api/models/"):
            self._api(path[len("/api/models/"):], head)
        elif path.startswith("/lfs/"):
            self._cdn(path[len("/lfs/"):], head)
        elif "/resolve/" in path:
            repo_id, rest = path.lstrip("/").split("/resolve/", 1)
            rev, _, filename = rest.partition("/")
            self._resolve(repo_id, unquote(rev), unquote(filename), head)
        else:
            self._send(404, b"not found", head=head)

    def _commit(self, repo_id: str, rev: str) -> tuple[str | None, str | None]:
        """(sha, error code) for a repo at a branch name or commit SHA."""
        repo = self.owner.repos.get(repo_id)
        if repo is None:
            return None, "RepoNotFound"
        token = self.owner.gated.get(repo_id)
        if token is not None and self.headers.get("Authorization") != f"Bearer {token}":
            return None, "GatedRepo"
        if rev in repo["commits"]:
            return rev, None
        if rev in repo["branches"]:
            return repo["branches"][rev], None
        return None, "RevisionNotFound"

    def _api(self, rest: str, head: bool) -> None:
        repo_id, _, rev = rest.partition("/revision/")
        sha, error = self._commit(repo_id, unquote(rev) if rev else "main")
        if error:
            self._send(403 if error == "GatedRepo" else 404, json.dumps({"error": error}).encode(), head=head,
                       headers={"X-Error-Code": error})
            return
        files = self.owner.repos[repo_id]["commits"][sha]
        body = json.dumps({
            "id": repo_id, "modelId": repo_id, "sha": sha, "private": False, "disabled": False,
            "gated": False, "tags": [], "siblings": [{"rfilename": name} for name in sorted(files)],
        }).encode()
        self._send(200, body, head=head, headers={"Content-Type": "application/json"})

    def _resolve(self, repo_id: str, rev: str, filename: str, head: bool) -> None:
        sha, error = self._commit(repo_id, rev)
        if error:
            self._send(403 if error == "GatedRepo" else 404, b"", head=head, headers={"X-Error-Code": error},
                       file=filename)
            return
        files = self.owner.repos[repo_id]["commits"][sha]
        commit = {"X-Repo-Commit": sha}
        if filename in self.owner.fail:
            self._send(self.owner.fail[filename], b"refused by test", head=head, headers=commit, file=filename)
            return
        if filename not in files:
            self._send(404, b"", head=head, headers={**commit, "X-Error-Code": "EntryNotFound"}, file=filename)
            return
        data = files[filename]
        if filename.endswith(LFS_SUFFIXES):
            digest = hashlib.sha256(data).hexdigest()
            # A different host name than the endpoint's, as the Hub's CDN is: huggingface_hub stops
            # following there and takes the file's metadata from this redirect.
            location = f"http://localhost:{self.server.server_address[1]}/lfs/{digest}"
            self._send(302, b"", head=head, file=filename, headers={
                **commit, "Location": location, "X-Linked-Etag": f'"{digest}"', "X-Linked-Size": str(len(data)),
                "ETag": f'"{_git_blob_sha1(data)}"'})
            return
        self._send(200, data, head=head, file=filename, headers={**commit, "ETag": f'"{_git_blob_sha1(data)}"'})

    def _cdn(self, digest: str, head: bool) -> None:
        entry = self.owner._lfs.get(digest)
        if entry is None:
            self._send(404, b"", head=head)
            return
        name, data = entry
        # the Hub's CDN names the file, which is what huggingface_hub's progress bar shows
        self._send(200, data, head=head, file=name, headers={
            "ETag": f'"{digest}"', "Content-Disposition": f'inline; filename="{name}";'})

    def _send(self, status: int, body: bytes, *, head: bool, headers: dict[str, str] | None = None,
              file: str | None = None) -> None:
        # recorded before anything is sent: once the client has its answer it may go on (and a test read the
        # log) before this handler thread runs again, which made the log race the client under load
        sent = len(body) if not head and body else 0
        self.owner.record(Request(self.command, self.path, status, sent, file))
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if sent:
            self.wfile.write(body)


# -- tiny checkpoint files (a few hundred bytes each), shared by the resolution tests ----------------

LLAMA_CONFIG = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4, "intermediate_size": 8,
    "num_hidden_layers": 1, "num_attention_heads": 1, "num_key_value_heads": 1, "vocab_size": 8,
    "rms_norm_eps": 1e-5, "torch_dtype": "float32",
}


def tiny_safetensors(seed: int = 0) -> bytes:
    import numpy as np
    from safetensors.numpy import save

    rng = np.random.default_rng(seed)
    return save({"model.embed_tokens.weight": rng.standard_normal((8, 4)).astype(np.float32)})


def tiny_tokenizer_json() -> bytes:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3, "b": 4, "c": 5, "d": 6, "e": 7}
    tokenizer = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = Whitespace()
    return tokenizer.to_str().encode()


def tiny_checkpoint(config: dict | None = None, *, shards: int = 1) -> dict[str, bytes]:
    """config.json, tokenizer files and `shards` safetensors files of a Transformers checkpoint."""
    files = {
        "config.json": json.dumps(config if config is not None else LLAMA_CONFIG).encode(),
        "tokenizer.json": tiny_tokenizer_json(),
        "tokenizer_config.json": json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}).encode(),
    }
    if shards == 1:
        files["model.safetensors"] = tiny_safetensors()
    else:
        for i in range(shards):
            files[f"model-{i + 1:05d}-of-{shards:05d}.safetensors"] = tiny_safetensors(i)
    return files
