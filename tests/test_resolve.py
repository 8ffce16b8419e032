"""Model resolution from a local directory, the architecture gate and the quantized-checkpoint refusal.

Every local refusal of resolution is provoked here on a tmp directory; the Hub's are in
test_resolve_hub.py.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from hfview.families import supported_model_types
from hub_server import LLAMA_CONFIG, FakeHub, tiny_checkpoint, tiny_safetensors
from hfview.runner import resolve as resolve_module
from hfview.runner.errors import (
    ConfigError,
    ModelDirectoryError,
    QuantizedCheckpoint,
    TokenizerError,
    UnsupportedArchitecture,
    WeightsError,
)
from hfview.runner.resolve import gate, merge_text_config, read_config, refuse_quantized, resolve, torch_supports

REPO = Path(__file__).resolve().parents[1]
LLAMA_SPM = REPO / "fixtures" / "tokenizers" / "llama-spm" / "tokenizer.model"


def write_dir(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (root / name).write_bytes(data)
    return root


@pytest.fixture
def no_network(monkeypatch):
    """A fake Hub the environment points at: a local resolution must leave its log empty."""
    hub = FakeHub().start()
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    yield hub
    hub.stop()


@pytest.fixture
def view_without_plamo2(monkeypatch):
    """plamo2 stands for a family this build cannot run (the seed's example, pfnet/plamo-2-1b). The
    converter has PLaMo 2, so the view may read it one day: keep it out of the registry here."""
    families = [f for f in supported_model_types() if f != "plamo2"]
    monkeypatch.setattr(resolve_module, "_view_families", lambda: families)
    return ", ".join(families)


# ---------------------------------------------------------------------------------------------
# Local directories that resolve


def test_local_sharded_checkpoint_sorted_index_ignored_and_offline(tmp_path, no_network):
    files = tiny_checkpoint(shards=3)
    files["optimizer.safetensors"] = tiny_safetensors()          # training leftovers are not weights
    files["training_args_state.safetensors"] = tiny_safetensors()
    files["consolidated.safetensors"] = tiny_safetensors()       # Mistral's format, not read beside config.json
    files["model.safetensors.index.json"] = json.dumps({"weight_map": {"x": "model-99-of-99.safetensors"}}).encode()
    directory = write_dir(tmp_path / "ckpt", files)
    (directory / "sub").mkdir()
    (directory / "sub" / "nested.safetensors").write_bytes(tiny_safetensors())  # not top-level

    resolved = resolve(str(directory))

    assert resolved.source == "local" and resolved.repo_id is None
    assert resolved.path == directory
    assert [p.name for p in resolved.weight_files] == [
        "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"]
    assert resolved.format == "transformers" and resolved.backend == "view" and resolved.family == "llama"
    assert resolved.model_revision is None and resolved.revision_requested is None
    assert resolved.tokenizer_kind == "huggingface"
    assert [p.name for p in resolved.tokenizer_files] == ["tokenizer.json", "tokenizer_config.json"]
    assert resolved.config == LLAMA_CONFIG
    assert no_network.log == []


def test_local_revision_is_recorded_verbatim_and_selects_nothing(tmp_path, no_network):
    directory = write_dir(tmp_path / "ckpt", tiny_checkpoint())
    resolved = resolve(str(directory), revision="my-finetune@step-300")
    assert resolved.model_revision == "my-finetune@step-300"
    assert resolved.revision_requested == "my-finetune@step-300"
    assert [p.name for p in resolved.weight_files] == ["model.safetensors"]
    assert no_network.log == []


def test_relative_and_home_paths_are_local(tmp_path, monkeypatch, no_network):
    write_dir(tmp_path / "ckpt", tiny_checkpoint())
    monkeypatch.chdir(tmp_path)
    assert resolve("ckpt").path == tmp_path / "ckpt"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert resolve("~/ckpt").path == tmp_path / "ckpt"
    assert no_network.log == []


def test_mistral_own_format_is_recognised(tmp_path):
    params = {"dim": 4, "n_layers": 1, "head_dim": 4, "hidden_dim": 8, "n_heads": 1, "n_kv_heads": 1,
              "norm_eps": 1e-5, "vocab_size": 8}
    directory = write_dir(tmp_path / "mistral", {
        "params.json": json.dumps(params).encode(),
        "consolidated.safetensors": tiny_safetensors(),
        "tekken.json": json.dumps({"config": {}, "vocab": []}).encode(),
    })
    resolved = resolve(str(directory))
    assert resolved.format == "mistral"
    assert resolved.config_path.name == "params.json"
    assert [p.name for p in resolved.weight_files] == ["consolidated.safetensors"]
    assert resolved.tokenizer_kind == "tekken" and resolved.family == "mistral"


def test_both_formats_read_as_transformers(tmp_path):
    files = tiny_checkpoint(shards=2)
    files["params.json"] = b"{}"
    files["consolidated.safetensors"] = tiny_safetensors()
    resolved = resolve(str(write_dir(tmp_path / "both", files)))
    assert resolved.format == "transformers" and resolved.config_path.name == "config.json"
    assert [p.name for p in resolved.weight_files] == ["model-00001-of-00002.safetensors",
                                                       "model-00002-of-00002.safetensors"]


def test_one_gguf_beside_base_config_runs_that_file(tmp_path):
    files = tiny_checkpoint()
    del files["model.safetensors"]
    files["goal-q8_0.gguf"] = b"GGUF" + bytes(60)
    resolved = resolve(str(write_dir(tmp_path / "ft", files)))
    assert resolved.format == "gguf"
    assert [p.name for p in resolved.weight_files] == ["goal-q8_0.gguf"]


def test_tokenizer_model_kinds(tmp_path):
    files = tiny_checkpoint()
    del files["tokenizer.json"]
    spm = write_dir(tmp_path / "spm", files)
    shutil.copy(LLAMA_SPM, spm / "tokenizer.model")
    assert resolve(str(spm)).tokenizer_kind == "sentencepiece"

    glm = write_dir(tmp_path / "glm", {**files, "tokenizer_config.json": b'{"tokenizer_class": "ChatGLM4Tokenizer"}',
                                        "tokenizer.model": b"IQ== 0\nIg== 1\nIw== 2\n"})
    assert resolve(str(glm)).tokenizer_kind == "tiktoken"

    kimi = write_dir(tmp_path / "kimi", {**files, "tokenizer_config.json": b'{"tokenizer_class": "TikTokenTokenizer"}',
                                          "tiktoken.model": b"IQ== 0\nIg== 1\n"})
    assert resolve(str(kimi)).tokenizer_kind == "tiktoken"

    plamo_vocab = b'["<unk>", 0.0, "UNKNOWN"]\n["a", -1.0, "NORMAL"]\n'
    plamo = write_dir(tmp_path / "plamo", {**files, "tokenizer.jsonl": plamo_vocab})
    assert resolve(str(plamo)).tokenizer_kind == "plamo"


# ---------------------------------------------------------------------------------------------
# Local refusals: each starts with its fixed text and names the path


def test_refusal_failed_to_list(tmp_path, monkeypatch):
    directory = write_dir(tmp_path / "locked", tiny_checkpoint())
    real_scandir = os.scandir

    def scandir(path="."):  # root ignores chmod 000, so the listing failure is injected for this path only
        if Path(path) == directory:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(resolve_module.os, "scandir", scandir)
    with pytest.raises(ModelDirectoryError) as info:
        resolve(str(directory))
    assert str(info.value).startswith(f"failed to list {directory}: Permission denied")


def test_refusal_config_missing(tmp_path):
    files = tiny_checkpoint()
    del files["config.json"]
    directory = write_dir(tmp_path / "noconfig", files)
    with pytest.raises(ModelDirectoryError) as info:
        resolve(str(directory))
    assert str(info.value).startswith(f"model config is missing: {directory / 'config.json'}; ")


def test_refusal_tokenizer_missing(tmp_path):
    files = tiny_checkpoint()
    del files["tokenizer.json"]
    directory = write_dir(tmp_path / "notok", files)
    with pytest.raises(TokenizerError) as info:
        resolve(str(directory))
    assert str(info.value).startswith(f"tokenizer is missing: {directory / 'tokenizer.json'}; ")


def test_refusal_no_safetensors(tmp_path):
    files = tiny_checkpoint()
    del files["model.safetensors"]
    files["pytorch_model.bin"] = b"\x80\x02"
    files["optimizer.safetensors"] = tiny_safetensors()
    directory = write_dir(tmp_path / "bin", files)
    with pytest.raises(ModelDirectoryError) as info:
        resolve(str(directory))
    message = str(info.value)
    assert message.startswith(f"model directory contains no safetensors weights: {directory}")
    assert "pytorch_model.bin" in message and "safetensors only" in message


def test_refusal_two_gguf_files_with_their_count(tmp_path):
    files = tiny_checkpoint()
    del files["model.safetensors"]
    files["a.gguf"] = b"GGUF" + bytes(8)
    files["b.gguf"] = b"GGUF" + bytes(8)
    with pytest.raises(ModelDirectoryError) as info:
        resolve(str(write_dir(tmp_path / "two", files)))
    assert str(info.value).startswith("model directory contains no safetensors weights and 2 .gguf files")


def test_refusal_failed_to_read_config(tmp_path):
    files = tiny_checkpoint()
    del files["config.json"]
    directory = write_dir(tmp_path / "dirconfig", files)
    (directory / "config.json").mkdir()
    with pytest.raises(ConfigError) as info:
        resolve(str(directory))
    assert str(info.value).startswith(f"failed to read {directory / 'config.json'}: Is a directory")


@pytest.mark.parametrize("text, detail", [
    (b'{"model_type": "llama",', "line 1 column 24"),
    (b'["llama"]', "expected a JSON object, found list"),
    (b'{"model_type": 7}', "model_type must be a string"),
    (b'{"model_type": "llama", "architectures": "LlamaForCausalLM"}', "architectures must be a list"),
    (b'{"model_type": "llama", "text_config": []}', "text_config must be a JSON object"),
    (b'\xff\xfe{}', "not UTF-8"),
])
def test_refusal_invalid_model_config(tmp_path, text, detail):
    directory = write_dir(tmp_path / "bad", {**tiny_checkpoint(), "config.json": text})
    with pytest.raises(ConfigError) as info:
        resolve(str(directory))
    message = str(info.value)
    assert message.startswith(f"invalid model config {directory / 'config.json'}: ")
    assert detail in message


def test_refusal_failed_to_load_tokenizer(tmp_path):
    directory = write_dir(tmp_path / "badtok", {**tiny_checkpoint(), "tokenizer.json": b'{"model": 3}'})
    with pytest.raises(TokenizerError) as info:
        resolve(str(directory))
    assert str(info.value).startswith(f"failed to load tokenizer {directory / 'tokenizer.json'}: ")

    files = tiny_checkpoint()
    del files["tokenizer.json"]
    files["tokenizer.model"] = b"this is not a sentencepiece model"
    directory = write_dir(tmp_path / "badspm", files)
    with pytest.raises(TokenizerError) as info:
        resolve(str(directory))
    message = str(info.value)
    assert message.startswith(f"failed to load tokenizer {directory / 'tokenizer.model'}: not a SentencePiece model")
    assert "ChatGLM4Tokenizer" in message


def test_refusal_failed_to_map(tmp_path):
    files = tiny_checkpoint(shards=2)
    good = files["model-00002-of-00002.safetensors"]
    files["model-00002-of-00002.safetensors"] = good[: len(good) - 20]   # truncated download
    directory = write_dir(tmp_path / "trunc", files)
    with pytest.raises(WeightsError) as info:
        resolve(str(directory))
    message = str(info.value)
    assert message.startswith("failed to map 2 model weight files: model-00002-of-00002.safetensors: ")
    assert "truncated" in message and "model-00001" not in message


def test_refusal_bad_gguf_magic(tmp_path):
    files = tiny_checkpoint()
    del files["model.safetensors"]
    files["ft.gguf"] = b"NOPE" + bytes(8)
    with pytest.raises(WeightsError) as info:
        resolve(str(write_dir(tmp_path / "badgguf", files)))
    assert str(info.value).startswith("failed to map 1 model weight files: ft.gguf: not a GGUF file")


# ---------------------------------------------------------------------------------------------
# The architecture gate


def test_gate_refuses_plamo2_with_the_registry_list(tmp_path, view_without_plamo2):
    config = {"model_type": "plamo2", "architectures": ["Plamo2ForCausalLM"],
              "auto_map": {"AutoModelForCausalLM": "modeling_plamo.Plamo2ForCausalLM"}}
    directory = write_dir(tmp_path / "plamo2", tiny_checkpoint(config))
    with pytest.raises(UnsupportedArchitecture) as info:
        resolve(str(directory))
    message = str(info.value)
    assert message.startswith('model architecture "plamo2" is unsupported by this hfview build; use a Hugging Face '
                              f"checkpoint whose model_type is one of {view_without_plamo2} (read by llama.cpp)")
    import transformers

    assert f"transformers {transformers.__version__} implements" in message
    assert "remote code (auto_map)" in message and str(directory / "config.json") in message


def test_gate_uses_architectures_when_model_type_is_absent(tmp_path):
    path = tmp_path / "config.json"
    with pytest.raises(UnsupportedArchitecture) as info:
        gate({"architectures": ["TeleFLMForCausalLM"]}, path)
    assert str(info.value).startswith('model architecture "TeleFLMForCausalLM" is unsupported')
    with pytest.raises(UnsupportedArchitecture) as info:
        gate({"hidden_size": 4}, path)
    assert str(info.value).startswith('model architecture "null" is unsupported')
    assert "neither model_type nor architectures" in str(info.value)


def test_gate_works_without_the_torch_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now raises ImportError
    assert gate(LLAMA_CONFIG, tmp_path / "config.json") == "view"
    assert not torch_supports({"model_type": "opt", "architectures": ["OPTForCausalLM"]})
    with pytest.raises(UnsupportedArchitecture) as info:
        gate({"model_type": "opt", "architectures": ["OPTForCausalLM"]}, tmp_path / "config.json")
    assert "pip install 'hfview[torch]'" in str(info.value)


def test_torch_fallback_for_a_family_only_transformers_runs(tmp_path):
    # OPT: transformers ships OPTForCausalLM; the converter (hence the view) has no OPT.
    opt = {"model_type": "opt", "architectures": ["OPTForCausalLM"], "hidden_size": 4}
    assert "opt" not in supported_model_types()
    assert torch_supports(opt)
    assert gate(opt, tmp_path / "config.json") == "torch"
    directory = write_dir(tmp_path / "opt", tiny_checkpoint(opt))
    assert resolve(str(directory)).backend == "torch"


@pytest.mark.parametrize("config", [
    {"model_type": "bert", "architectures": ["BertForMaskedLM"]},          # not a text generator
    {"model_type": "opt", "architectures": ["OPTForMadeUpThing"]},         # no such class
    {"model_type": "plamo2", "architectures": ["Plamo2ForCausalLM"]},      # remote code only
    {"model_type": "opt"},                                                 # no architectures
])
def test_torch_supports_refuses(config):
    assert not torch_supports(config)


def test_multimodal_text_config_is_merged_and_gated(tmp_path):
    config = {"model_type": "made_up_vlm", "architectures": ["MadeUpForConditionalGeneration"],
              "eos_token_id": 2, "vision_config": {"hidden_size": 3},
              "text_config": {**LLAMA_CONFIG, "hidden_size": 4}}
    del config["text_config"]["architectures"]
    directory = write_dir(tmp_path / "vlm", tiny_checkpoint(config))
    resolved = resolve(str(directory))
    assert resolved.backend == "view" and resolved.family == "llama"
    assert resolved.config["model_type"] == "llama" and resolved.config["eos_token_id"] == 2
    assert resolved.config["architectures"] == ["MadeUpForConditionalGeneration"]
    assert resolved.raw_config["model_type"] == "made_up_vlm"
    assert merge_text_config(config) == resolved.config


def test_wrapper_without_text_config_is_unsupported(tmp_path):
    with pytest.raises(UnsupportedArchitecture) as info:
        gate({"model_type": "made_up_vlm", "architectures": ["MadeUpForConditionalGeneration"]},
             tmp_path / "config.json")
    assert str(info.value).startswith('model architecture "made_up_vlm" is unsupported')


def test_non_finite_numbers_are_read_as_unstated(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "mamba2", "time_step_limit": [0.0, Infinity], "time_step_floor": NaN,'
                    ' "rope_parameters": {"factor": -Infinity, "rope_theta": 10000.0},'
                    ' "layers": [{"a": NaN, "b": 1}], "hidden_size": 4}')
    config = read_config(path)
    assert config == {"model_type": "mamba2", "rope_parameters": {"rope_theta": 10000.0},
                      "layers": [{"b": 1}], "hidden_size": 4}


# ---------------------------------------------------------------------------------------------
# The quantized-checkpoint refusal


@pytest.mark.parametrize("quant, named", [
    ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}, "FP8 (FBGEMM)"),
    ({"quant_method": "mxfp4"}, "MXFP4"),
    ({"quant_method": "gptq", "bits": 3, "group_size": 128}, "GPTQ 3-bit"),  # (2, 4 and 8 bits are read)
    ({"quant_method": "awq", "bits": 4, "version": "gemm"}, "AWQ 4-bit"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "bitsandbytes 4-bit"),
    # (NVFP4 is read: compressed-tensors' nvfp4-pack-quantized and ModelOpt's, tests/test_nvfp4.py)
    ({"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized"}, "MXFP4 (compressed-tensors)"),
    ({"quant_method": "compressed-tensors", "format": "float-quantized"}, "FP8 (compressed-tensors)"),
    ({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, "ModelOpt"),
])
def test_quantized_configs_are_refused_naming_the_method(tmp_path, quant, named):
    path = tmp_path / "config.json"
    with pytest.raises(QuantizedCheckpoint) as info:
        refuse_quantized({**LLAMA_CONFIG, "quantization_config": quant}, path)
    message = str(info.value)
    assert message.startswith(f"quantized checkpoints are unsupported: {path} declares quantization_config ({named}, ")
    assert f'quant_method "{quant["quant_method"]}"' in message and "BF16 export" in message


def test_quantization_in_text_config_params_and_modelopt_record(tmp_path):
    # a text_config's quantization_config is the one the converter reads (its TextModel merges text_config over the
    # top level): a form the view reads there is read (Kimi-K2.5's pack-quantized, tests/test_family_kimi_k25.py),
    # any other refused by name
    refuse_quantized({"model_type": "x", "text_config": {"quantization_config": {"quant_method": "fp8"}}},
                     tmp_path / "config.json")
    with pytest.raises(QuantizedCheckpoint, match=r"\(AWQ 4-bit, "):
        refuse_quantized({"model_type": "x", "text_config": {"quantization_config": {"quant_method": "awq",
                                                                                      "bits": 4}}},
                         tmp_path / "config.json")
    # Mistral's own format: fp8_e4m3 is read (tests/test_mistral_fp8.py), any other qformat_weight refused
    refuse_quantized({"dim": 4, "quantization": {"qformat_weight": "fp8_e4m3"}}, tmp_path / "params.json")
    with pytest.raises(QuantizedCheckpoint, match=r"declares quantization \(.*fp8_e4m3"):
        refuse_quantized({"dim": 4, "quantization": {"qformat_weight": "int4"}}, tmp_path / "params.json")
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "W4A8_AWQ", "group_size": 128}}))
    with pytest.raises(QuantizedCheckpoint) as info:
        refuse_quantized(LLAMA_CONFIG, tmp_path / "config.json")
    assert str(info.value).startswith(f"quantized checkpoints are unsupported: {tmp_path / 'hf_quant_config.json'} "
                                      "declares quantization (ModelOpt, quant_method \"modelopt\") with "
                                      "quant_algo 'W4A8_AWQ'")
    refuse_quantized(LLAMA_CONFIG, tmp_path / "elsewhere" / "config.json")  # unquantized: no refusal


def test_local_quantized_checkpoint_is_refused(tmp_path):
    config = {**LLAMA_CONFIG, "quantization_config": {"quant_method": "awq", "bits": 4}}
    with pytest.raises(QuantizedCheckpoint):
        resolve(str(write_dir(tmp_path / "gptq", tiny_checkpoint(config))))


def test_the_converters_fp8_form_is_read_not_refused(tmp_path):
    """quant_method "fp8" in config.json (block-scaled or per-tensor) is the form the view reads
    (tests/test_fp8.py); a weight_block_size that is not positive integers, or FP8 beside another expert form
    (DeepSeek-V4's expert_dtype), is refused by name."""
    path = tmp_path / "config.json"
    for quant in ({"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]},
                  {"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": None}):
        refuse_quantized({**LLAMA_CONFIG, "quantization_config": quant}, path)
    with pytest.raises(QuantizedCheckpoint, match=r"weight_block_size \[128\] is not|weight_block_size"):
        refuse_quantized({**LLAMA_CONFIG, "quantization_config": {"quant_method": "fp8", "weight_block_size": [0]}},
                         path)
    with pytest.raises(QuantizedCheckpoint, match=r'quant_method "fp8"\) with expert_dtype \'fp4\''):
        refuse_quantized({**LLAMA_CONFIG, "expert_dtype": "fp4", "quantization_config": {"quant_method": "fp8"}},
                         path)



def test_refusals_are_caught_by_the_cli_handler_base(tmp_path):
    """The CLI prints any hfview.errors.HfviewError as one line: resolution's refusals must be ones."""
    from hfview.errors import HfviewError

    with pytest.raises(HfviewError, match="^model config is missing: "):
        resolve(str(write_dir(tmp_path / "empty", {})))


# GPTQ as AutoGPTQ / GPTQModel write it: the quantization in quantize_config.json, config.json stating none
GPTQ_RECORD = {"bits": 4, "group_size": 128, "damp_percent": 0.01, "desc_act": False, "static_groups": False,
               "sym": True, "true_sequential": True, "model_name_or_path": None, "model_file_base_name": "model",
               "quant_method": "gptq", "checkpoint_format": "gptq"}


def test_gptq_stated_only_in_quantize_config_is_refused_naming_it(tmp_path):
    """Local: the view and the runner's resolution refuse it by name, before a shard is opened."""
    from hfview import HfCheckpoint

    files = tiny_checkpoint(LLAMA_CONFIG)
    files["quantize_config.json"] = json.dumps(GPTQ_RECORD).encode()
    files["model.safetensors"] = b"not read"  # a shard that cannot be parsed: never opened
    directory = write_dir(tmp_path / "gptq", files)
    for refuse in (lambda: resolve(str(directory), progress=False), lambda: HfCheckpoint(directory, "f32")):
        with pytest.raises(QuantizedCheckpoint) as info:
            refuse()
        assert str(info.value).startswith(f"quantized checkpoints are unsupported: {directory / 'quantize_config.json'} "
                                          f'declares quantization (GPTQ 4-bit, quant_method "gptq")')
        assert "Can not map tensor" in str(info.value)


def test_gptq_stated_only_in_quantize_config_is_refused_before_any_weight_download(tmp_path, monkeypatch):
    """From the Hub: config.json and quantize_config.json are all that is fetched."""
    from huggingface_hub import constants

    server = FakeHub().start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
        files = tiny_checkpoint(LLAMA_CONFIG, shards=2)
        files["quantize_config.json"] = json.dumps(GPTQ_RECORD).encode()
        server.add_repo("acme/tiny-llama-gptq", files)
        with pytest.raises(QuantizedCheckpoint, match=r"quantize_config.json declares quantization \(GPTQ 4-bit"):
            resolve("acme/tiny-llama-gptq", progress=False)
        assert server.weight_requests() == []
        assert sorted(server.files_requested()) == ["config.json", "quantize_config.json"]
    finally:
        server.stop()
