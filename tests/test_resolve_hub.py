"""Model resolution from the Hugging Face Hub, against a fake Hub (tests/hub_server.py) on 127.0.0.1.

huggingface_hub does the HTTP; HF_ENDPOINT points at the fake, HF_HOME at a tmp dir. The fake's request
log shows what was fetched, and in which order.
"""
from __future__ import annotations

import json

import pytest

from hub_server import LLAMA_CONFIG, FakeHub, tiny_checkpoint, tiny_safetensors
from hfview.runner.errors import HubError, ModelDirectoryError, QuantizedCheckpoint, TokenizerError, UnsupportedArchitecture
from hfview.runner.resolve import resolve


@pytest.fixture
def hub(tmp_path, monkeypatch):
    server = FakeHub().start()
    monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # so no repository id collides with a real directory
    # huggingface_hub fetches an "agent harness" registry for its user agent from the endpoint it saw
    # at import (possibly huggingface.co, when imported earlier in this process): keep tests hermetic.
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    yield server
    server.stop()


def api_requests(hub: FakeHub) -> list:
    return [r for r in hub.log if r.path.startswith("/api/models/")]


# ---------------------------------------------------------------------------------------------
# A supported repository


def test_downloads_safetensors_and_records_the_commit_sha(hub, tmp_path):
    files = tiny_checkpoint(shards=2)
    files["model.safetensors.index.json"] = json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}).encode()
    files["README.md"] = b"---\nlicense: mit\n---\n# tiny\n"
    files["optimizer.safetensors"] = tiny_safetensors(9)
    files["consolidated.safetensors"] = tiny_safetensors(8)
    files["onnx/model.onnx"] = b"not read"
    sha = hub.add_repo("acme/tiny-llama", files)

    resolved = resolve("acme/tiny-llama", progress=False)

    assert resolved.source == "hub" and resolved.repo_id == "acme/tiny-llama"
    assert resolved.model_revision == sha and resolved.revision_requested is None
    assert resolved.path == tmp_path / "hf_home" / "hub" / "models--acme--tiny-llama" / "snapshots" / sha
    assert [p.name for p in resolved.weight_files] == ["model-00001-of-00002.safetensors",
                                                       "model-00002-of-00002.safetensors"]
    for path in resolved.weight_files:
        assert path.read_bytes() == files[path.name]
    assert resolved.config == LLAMA_CONFIG and resolved.backend == "view" and resolved.format == "transformers"
    assert (resolved.path / "README.md").read_bytes() == files["README.md"]
    # the branch is remembered in the cache, so HF_HUB_OFFLINE=1 can find this commit later
    assert (resolved.path.parents[1] / "refs" / "main").read_text() == sha

    requested = hub.files_requested()
    assert "optimizer.safetensors" not in requested and "consolidated.safetensors" not in requested
    assert "onnx/model.onnx" not in requested
    # order: repository listing, then the config, then everything else; weights last
    assert hub.log[0].path == "/api/models/acme/tiny-llama/revision/main"
    assert requested[0] == "config.json"
    first_weight = min(i for i, name in enumerate(requested) if name.endswith(".safetensors"))
    assert {"tokenizer.json", "tokenizer_config.json", "README.md"} <= set(requested[:first_weight])


def test_revision_branch_and_commit(hub):
    main_sha = hub.add_repo("acme/tiny-llama", tiny_checkpoint())
    dev_files = tiny_checkpoint(shards=2)
    dev_sha = hub.add_repo("acme/tiny-llama", dev_files, branch="dev")
    assert dev_sha != main_sha

    dev = resolve("acme/tiny-llama", revision="dev", progress=False)
    assert dev.model_revision == dev_sha and dev.revision_requested == "dev"
    assert len(dev.weight_files) == 2

    pinned = resolve("acme/tiny-llama", revision=main_sha, progress=False)
    assert pinned.model_revision == main_sha
    assert [p.name for p in pinned.weight_files] == ["model.safetensors"]


def test_progress_bars_on_weight_downloads_only(hub, capsys, monkeypatch):
    monkeypatch.setenv("TQDM_POSITION", "-1")  # huggingface_hub's switch to draw bars without a terminal
    # once, in a full run, no bar was drawn here: make sure no earlier test left hub bars switched off
    from huggingface_hub.utils import enable_progress_bars
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    enable_progress_bars()
    hub.add_repo("acme/tiny-llama", tiny_checkpoint())
    resolve("acme/tiny-llama", progress=True)
    bars = capsys.readouterr().err
    assert "model.safetensors" in bars and "config.json" not in bars and "tokenizer.json" not in bars

    hub.add_repo("acme/other", tiny_checkpoint())
    resolve("acme/other", progress=False)
    assert capsys.readouterr().err == ""


def test_the_release_code_is_fetched_for_the_key_check_to_read(hub):
    # the key check reads a remote-code release's top-level *.py as text (hfview.config.release_code)
    files = tiny_checkpoint()
    files["modeling_custom.py"] = b"def forward(config):\n    return config.hidden_size\n"
    files["examples/run.py"] = b"print('not the model')\n"
    hub.add_repo("acme/with-code", files)
    resolved = resolve("acme/with-code", progress=False)
    assert (resolved.path / "modeling_custom.py").read_bytes() == files["modeling_custom.py"]
    assert "examples/run.py" not in hub.files_requested()


def test_mistral_format_repository(hub):
    hub.add_repo("acme/tiny-mistral", {
        "params.json": json.dumps({"dim": 4, "n_layers": 1, "n_heads": 1, "vocab_size": 8}).encode(),
        "consolidated.safetensors": tiny_safetensors(),
        "tekken.json": json.dumps({"vocab": []}).encode(),
    })
    resolved = resolve("acme/tiny-mistral", progress=False)
    assert resolved.format == "mistral" and resolved.config_path.name == "params.json"
    assert [p.name for p in resolved.weight_files] == ["consolidated.safetensors"]


def test_repository_with_both_formats_downloads_transformers_weights_once(hub):
    files = tiny_checkpoint()
    files["params.json"] = b"{}"
    files["consolidated.safetensors"] = tiny_safetensors(5)
    hub.add_repo("acme/both", files)
    resolved = resolve("acme/both", progress=False)
    assert resolved.format == "transformers"
    assert [(r.method, r.file) for r in hub.weight_requests()] == [("HEAD", "model.safetensors"),
                                                                   ("GET", "model.safetensors")]
    assert "params.json" not in hub.files_requested()


# ---------------------------------------------------------------------------------------------
# The gate runs before any weight is requested


def refused_before_weights(hub: FakeHub, repo: str, files: dict[str, bytes], error: type) -> tuple[str, int]:
    hub.add_repo(repo, files)
    with pytest.raises(error) as info:
        resolve(repo, progress=False)
    assert hub.weight_requests() == []
    fetched = hub.bytes_served()
    print(f"\n{repo}: refused after {fetched} bytes "
          f"({[(r.method, r.file or r.path, r.body_bytes) for r in hub.log]})")
    return str(info.value), fetched


def test_gate_refuses_plamo2_before_any_weight_request(hub, monkeypatch):
    # plamo2 stands for a family this build cannot run; the converter has PLaMo 2, so the view may read
    # it one day: keep it out of the registry here.
    from hfview.families import supported_model_types
    from hfview.runner import resolve as resolve_module

    families = [f for f in supported_model_types() if f != "plamo2"]
    monkeypatch.setattr(resolve_module, "_view_families", lambda: families)
    config = {"model_type": "plamo2", "architectures": ["Plamo2ForCausalLM"],
              "auto_map": {"AutoConfig": "modeling_plamo.Plamo2Config",
                           "AutoModelForCausalLM": "modeling_plamo.Plamo2ForCausalLM"},
              "hidden_size": 4, "num_hidden_layers": 1}
    files = tiny_checkpoint(config)
    del files["tokenizer.json"]
    files["tokenizer.jsonl"] = b'["<unk>", 0.0, "UNKNOWN"]\n' * 200
    files["tokenizer_config.json"] = b'{"tokenizer_class": "Plamo2Tokenizer"}'
    message, fetched = refused_before_weights(hub, "pfnet/plamo-2-tiny", files, UnsupportedArchitecture)
    assert message.startswith('model architecture "plamo2" is unsupported by this hfview build; use a Hugging Face '
                              f"checkpoint whose model_type is one of {', '.join(families)} ")
    # the repository listing and the config are all it cost
    assert hub.files_requested() == ["config.json"]
    assert fetched == api_requests(hub)[0].body_bytes + len(files["config.json"])


def test_quantized_refused_before_any_weight_request(hub):
    """A form hfview does not read (FBGEMM's FP8; the converter's own quant_method fp8 is read, tests/test_fp8.py)."""
    config = {**LLAMA_CONFIG, "quantization_config": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}}
    message, fetched = refused_before_weights(hub, "acme/tiny-llama-fp8", tiny_checkpoint(config, shards=2),
                                              QuantizedCheckpoint)
    assert "(FP8 (FBGEMM), quant_method \"fbgemm_fp8\")" in message and "BF16 export" in message
    assert hub.files_requested() == ["config.json"]
    assert fetched == api_requests(hub)[0].body_bytes + len(json.dumps(config))


def test_modelopt_record_fetched_and_refused_before_weights(hub):
    files = tiny_checkpoint()
    files["hf_quant_config.json"] = json.dumps({"producer": {"name": "modelopt"},
                                                "quantization": {"quant_algo": "W4A8_AWQ"}}).encode()
    message, _ = refused_before_weights(hub, "acme/tiny-w4a8", files, QuantizedCheckpoint)
    assert "(ModelOpt, quant_method \"modelopt\") with quant_algo 'W4A8_AWQ'" in message
    assert hub.files_requested() == ["config.json", "hf_quant_config.json"]


# ---------------------------------------------------------------------------------------------
# Network failure and offline mode


def test_network_failure_gives_the_hub_refusal(hub):
    hub.add_repo("acme/tiny-llama", tiny_checkpoint())
    endpoint = hub.endpoint
    hub.stop()  # connection refused from now on
    with pytest.raises(HubError) as info:
        resolve("acme/tiny-llama", progress=False)
    message = str(info.value)
    assert message.startswith(f"failed to read model repository acme/tiny-llama: cannot reach the Hub at {endpoint} "
                              "(ConnectError")
    assert "pass a local directory" in message


def test_offline_with_a_warm_cache(hub, monkeypatch):
    sha = hub.add_repo("acme/tiny-llama", tiny_checkpoint(shards=2))
    online = resolve("acme/tiny-llama", progress=False)
    hub.stop()

    with pytest.raises(HubError) as info:  # network down, offline not asked: the refusal points at the cache
        resolve("acme/tiny-llama", progress=False)
    assert f"set HF_HUB_OFFLINE=1 to run the cached snapshot {sha}" in str(info.value)

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    offline = resolve("acme/tiny-llama", progress=False)
    assert offline.model_revision == sha == online.model_revision
    assert offline.path == online.path and offline.weight_files == online.weight_files
    assert offline.config == online.config and offline.tokenizer_kind == "huggingface"
    assert resolve("acme/tiny-llama", revision=sha, progress=False).model_revision == sha


def test_offline_with_a_cold_cache_is_refused(hub, monkeypatch):
    hub.add_repo("acme/tiny-llama", tiny_checkpoint())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError) as info:
        resolve("acme/tiny-llama", progress=False)
    assert str(info.value).startswith("failed to read model repository acme/tiny-llama: HF_HUB_OFFLINE=1 and the cache")
    assert hub.log == []


def test_offline_after_a_gate_refusal_has_no_weights(hub, monkeypatch):
    hub.add_repo("acme/tiny-fp8", tiny_checkpoint({**LLAMA_CONFIG, "quantization_config": {"quant_method": "gptq"}}))
    with pytest.raises(QuantizedCheckpoint):
        resolve("acme/tiny-fp8", progress=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError) as info:
        resolve("acme/tiny-fp8", progress=False)
    assert str(info.value).startswith("model acme/tiny-fp8 publishes no safetensors weights in the cached snapshot")


def test_offline_shard_missing_from_cache_is_named(hub, monkeypatch):
    files = tiny_checkpoint(shards=2)
    files["model.safetensors.index.json"] = json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}).encode()
    hub.add_repo("acme/tiny-llama", files)
    online = resolve("acme/tiny-llama", progress=False)
    (online.path / "model-00002-of-00002.safetensors").unlink()  # as if that download never finished
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError) as info:
        resolve("acme/tiny-llama", progress=False)
    assert str(info.value).startswith("failed to download model-00002-of-00002.safetensors from acme/tiny-llama@")


# ---------------------------------------------------------------------------------------------
# Hub refusals


def test_refusal_hub_client_endpoint(hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "not-a-url")
    with pytest.raises(HubError) as info:
        resolve("acme/tiny-llama", progress=False)
    assert str(info.value).startswith("failed to initialize Hugging Face Hub client: HF_ENDPOINT='not-a-url' is not")


def test_refusal_hub_client_cache(hub, monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("HF_HOME", str(blocker))
    with pytest.raises(HubError) as info:
        resolve("acme/tiny-llama", progress=False)
    assert str(info.value).startswith(f"failed to initialize Hugging Face Hub client: cannot create the cache "
                                      f"directory {blocker / 'hub'}")
    assert hub.log == []


def test_refusal_unknown_repository_and_directory_looking_path(hub):
    with pytest.raises(HubError) as info:
        resolve("models/llama-7b", progress=False)  # no such directory: it is a Hub id
    message = str(info.value)
    assert message.startswith("failed to read model repository models/llama-7b: no such repository on ")
    assert "no directory exists at models/llama-7b" in message
    assert [r.path for r in hub.log] == ["/api/models/models/llama-7b/revision/main"]


def test_gated_repository_needs_hf_token(hub, monkeypatch):
    sha = hub.add_repo("meta/gated-tiny", tiny_checkpoint())
    hub.gated["meta/gated-tiny"] = "hf_grant"
    with pytest.raises(HubError) as info:
        resolve("meta/gated-tiny", progress=False)
    assert str(info.value).startswith("failed to read model repository meta/gated-tiny: the repository is gated")
    assert "HF_TOKEN" in str(info.value)
    monkeypatch.setenv("HF_TOKEN", "hf_grant")
    assert resolve("meta/gated-tiny", progress=False).model_revision == sha


def test_refusal_unknown_revision(hub):
    hub.add_repo("acme/tiny-llama", tiny_checkpoint())
    with pytest.raises(HubError) as info:
        resolve("acme/tiny-llama", revision="v9", progress=False)
    assert str(info.value).startswith("failed to read model repository acme/tiny-llama: it has no revision 'v9'")


def test_refusal_invalid_repository_id(hub, tmp_path):
    with pytest.raises(HubError) as info:
        resolve("./checkpoints/../tiny", progress=False)
    assert str(info.value).startswith("failed to read model repository ./checkpoints/../tiny: no directory exists")
    (tmp_path / "model.gguf").write_bytes(b"GGUF")
    with pytest.raises(HubError) as info:
        resolve("model.gguf", progress=False)
    assert str(info.value).startswith("failed to read model repository model.gguf: model.gguf is a file")
    assert hub.log == []


def test_refusal_publishes_no_safetensors(hub):
    files = tiny_checkpoint()
    del files["model.safetensors"]
    files["pytorch_model.bin"] = b"\x80\x02"
    sha = hub.add_repo("acme/bin-only", files)
    with pytest.raises(HubError) as info:
        resolve("acme/bin-only", progress=False)
    assert str(info.value).startswith(f"model acme/bin-only publishes no safetensors weights at {sha} "
                                      "(it publishes pytorch_model.bin")
    assert hub.files_requested() == []  # decided from the listing alone

    files = tiny_checkpoint()
    del files["model.safetensors"]
    files["tiny-Q4_K_M.gguf"] = b"GGUF"
    hub.add_repo("acme/gguf-only", files)
    with pytest.raises(HubError) as info:
        resolve("acme/gguf-only", progress=False)
    assert str(info.value).startswith("model acme/gguf-only publishes no safetensors weights")
    assert ".gguf files" in str(info.value)


def test_refusal_failed_to_download_a_weight(hub):
    hub.add_repo("acme/tiny-llama", tiny_checkpoint(shards=2))
    hub.fail["model-00002-of-00002.safetensors"] = 403
    with pytest.raises(HubError) as info:
        resolve("acme/tiny-llama", progress=False)
    assert str(info.value).startswith("failed to download model-00002-of-00002.safetensors from acme/tiny-llama@")


def test_refusal_hub_config_and_tokenizer_missing(hub):
    files = tiny_checkpoint()
    del files["config.json"]
    hub.add_repo("acme/no-config", files)
    with pytest.raises(ModelDirectoryError) as info:
        resolve("acme/no-config", progress=False)
    assert str(info.value).startswith("model config is missing: acme/no-config@")

    files = tiny_checkpoint()
    del files["tokenizer.json"]
    hub.add_repo("acme/no-tokenizer", files)
    with pytest.raises(TokenizerError) as info:
        resolve("acme/no-tokenizer", progress=False)
    assert str(info.value).startswith("tokenizer is missing: acme/no-tokenizer@")
    assert hub.files_requested() == []


def test_parity_refuses_a_torch_only_hub_model_on_its_config(hub):
    """parity needs llama.cpp: for a family only transformers runs (OPT), the refusal comes from the config
    alone — no tokenizer, no weight is downloaded."""
    from click.testing import CliRunner

    from hfview.cli import main

    pytest.importorskip("transformers")
    config = {"model_type": "opt", "architectures": ["OPTForCausalLM"], "hidden_size": 8, "num_hidden_layers": 1}
    hub.add_repo("facebook/opt-tiny", tiny_checkpoint(config))
    res = CliRunner().invoke(main, ["parity", "--model", "facebook/opt-tiny"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "family 'opt' is not covered by hfview's view, so llama.cpp cannot run it through hfview" in res.stderr
    assert hub.weight_requests() == [] and hub.files_requested() == ["config.json"]
