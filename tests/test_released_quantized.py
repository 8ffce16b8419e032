"""Released quantized checkpoints' config files (tests/data/released_quantized/<form>/, sources in each form's
SOURCES.md), each run through the config path hfview runs before it opens a shard: the directory's files as a
download leaves them (config.json, and beside it hf_quant_config.json for NVIDIA ModelOpt exports or
quantize_config.json for AutoGPTQ's), the architecture gate, the quantized refusal, and, where hfview presents the
family, the family, its key and value checks and its hyperparameter KV (as tests/released_config.py does per family).

EXPECTED records today's outcome of each file, not the wanted one: "view" (accepted: the view presents it),
"torch" (the gate sends it to transformers and no quantized refusal stops it), or the fragment of the refusal's
message. Where today's outcome is wrong, GAPS says why; the table is updated as the forms are read."""
from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest

from hfview.errors import HfviewError

DATA = Path(__file__).resolve().parent / "data" / "released_quantized"
# beside <owner>__<name>.json: the files a form states itself in, under the name the download gives them
BESIDE = {".hf_quant_config.json": "hf_quant_config.json", ".quantize_config.json": "quantize_config.json"}
FORMS = ("fp8", "mxfp4", "compressed_tensors", "nvfp4", "modelopt", "gptq", "fbgemm_fp8", "awq", "bitsandbytes")


def released(form: str) -> list[Path]:
    return sorted(p for p in (DATA / form).glob("*.json") if not any(p.name.endswith(s) for s in BESIDE))


CONFIGS = [p.relative_to(DATA).as_posix() for form in FORMS for p in released(form)]


def through_the_config_path(path: Path) -> str:
    """"view" or "torch" as above for the released config at `path`; raises what hfview raises on it."""
    from hfview import families
    from hfview.checkpoint import _read_config  # the directory -> config step HfCheckpoint takes
    from hfview.config import read_as, read_config
    from hfview.config_values import layer_count
    from hfview.quantized import quantized_form, refuse_quantized
    from hfview.runner.resolve import gate

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp)
        shutil.copyfile(path, model / "config.json")
        for suffix, name in BESIDE.items():
            beside = path.with_name(path.name.removesuffix(".json") + suffix)
            if beside.is_file():
                shutil.copyfile(beside, model / name)
        # as hfview.runner.resolve does for a local directory or a Hub id, before any weight is read or downloaded
        backend = gate(read_config(model / "config.json"), model / "config.json")
        refuse_quantized(read_config(model / "config.json"), model / "config.json")
        if backend != "view":
            return backend
        # as HfCheckpoint does before it opens a shard
        config, config_path = _read_config(model)
        quantized_form(config, config_path)
        family = families.family_for(config.get("model_type"), config.get("architectures"))
        assert family is not None, f"{path}: the gate admits it, but no family reads it"
        hparams = read_as(family, config, config_path)
        kv = family.parameters(hparams, layer_count(hparams) + family.extra_blocks(hparams), 1)
        assert kv, path
        return "view"


# file -> "view", "torch", or the fragment of today's refusal
EXPECTED: dict[str, str] = {
    # fp8
    'fp8/MiniMaxAI__MiniMax-M2.5.json': 'view',
    'fp8/MiniMaxAI__MiniMax-M2.7.json': 'view',
    'fp8/Qwen__Qwen3-235B-A22B-FP8.json': 'view',
    'fp8/Qwen__Qwen3-30B-A3B-FP8.json': 'view',
    'fp8/Qwen__Qwen3-32B-FP8.json': 'view',
    'fp8/Qwen__Qwen3-8B-FP8.json': 'view',
    'fp8/XiaomiMiMo__MiMo-V2-Flash.json': 'view',
    'fp8/deepseek-ai__DeepSeek-R1.json': 'view',
    'fp8/deepseek-ai__DeepSeek-V3.2.json': 'view',
    'fp8/deepseek-ai__DeepSeek-V3.json': 'view',
    'fp8/moonshotai__Kimi-K2-Instruct.json': 'view',
    # not the release's config.json but aiconfigurator's summary of it (SOURCES.md): architectures
    # Step3p7FlashForCausalLM, which neither the pinned converter nor transformers registers, and none of the text
    # model's own keys (no text_config, num_experts for moe_num_experts, ...). The release, a Step3p7ForConditional-
    # Generation around a step3p5 text_config, is read by the step3p7 family (tests/test_family_step3p7.py)
    'fp8/stepfun-ai__Step-3.7-Flash-FP8.json': 'model architecture "step3p7" is unsupported',
    'fp8/zai-org__GLM-5-FP8.json': 'view',
    # accepted; the runner caps its context at the window (4096), as llama.cpp's mistral3 attends to the whole
    # context (tests/test_family_ministral3.py measures both sides of the window)
    'fp8/unsloth__Devstral-Small-2-24B-Instruct-2512.json': 'view',
    # mxfp4
    # FP8 linears and MXFP4 experts, read as DeepseekV4Model reads them (tests/test_family_deepseek_v4.py)
    'mxfp4/deepseek-ai__DeepSeek-V4-Flash.json': 'view',
    'mxfp4/deepseek-ai__DeepSeek-V4-Pro.json': 'view',
    'mxfp4/openai__gpt-oss-120b.json': 'view',
    'mxfp4/openai__gpt-oss-20b.json': 'view',
    # compressed_tensors
    'compressed_tensors/meta-llama__Llama-4-Maverick-17B-128E-Instruct-FP8.json': 'view',
    # its int4 pack-quantized routed experts, stated inside text_config, read as the converter reads them
    # (tests/test_family_kimi_k25.py)
    'compressed_tensors/moonshotai__Kimi-K2.5.json': 'view',
    # kimi_k3 (read as itself, not as its kimi_linear text_config: the converter's KimiK3Model writes llama.cpp kimi-k3,
    # its mxfp4-pack-quantized routed experts repacked bits only to ggml MXFP4; bytes and logits against a reference
    # composed from transformers' modules on the kimi_k3-mxfp4 fixture, tests/test_family_kimi_k3.py)
    'compressed_tensors/moonshotai__Kimi-K3.json': 'view',
    # naive-quantized (llm-compressor's earlier name) over 8-bit float weights, which the converter dequantizes as
    # float-quantized (tests/test_scaled_fp8.py's qwen3-ct-fp8-naive: bytes and logits)
    'compressed_tensors/neuralmagic__Meta-Llama-3.1-8B-Instruct-FP8-dynamic.json': 'view',
    # awq: the pinned converter has no AWQ path ("Quant method is not yet supported: 'awq'")
    'awq/01-ai__Yi-34B-Chat-4bits.json': '/config.json declares quantization_config (AWQ 4-bit, quant_method "awq")',
    'awq/01-ai__Yi-6B-Chat-4bits.json': '/config.json declares quantization_config (AWQ 4-bit, quant_method "awq")',
    # nvfp4
    'nvfp4/RedHatAI__DeepSeek-V4-Flash-NVFP4-FP8.json':
        '/config.json declares quantization_config (compressed-tensors, quant_method "compressed-tensors") with 2 '
        'config groups (the converter: "Can\'t handle multiple config groups for compressed-tensors yet")',
    # modelopt
    'modelopt/nvidia__DeepSeek-V3.1-NVFP4.json': 'view',
    # its routed experts ModelOpt NVFP4 under DeepSeek's names: the converter stops on them (measured on a fixture of
    # that form: tests/test_family_deepseek_v4.py::test_nvfp4_experts_are_refused_as_the_converter_fails_on_them)
    'modelopt/nvidia__DeepSeek-V4-Flash-NVFP4.json':
        'with quant_algo \'MIXED_PRECISION\' and NVFP4 routed experts (ModelOpt\'s per-layer quant_algo): the pinned '
        'converter\'s DeepseekV4Model reads routed experts only as DeepSeek\'s MXFP4 pairs, and its NVFP4 path cannot '
        'name DeepSeek\'s expert tensors (measured: "Can not map tensor \'layers.0.ffn.experts.0.w1.weight\'")',
    'modelopt/nvidia__GLM-5-NVFP4.json': 'view',
    'modelopt/nvidia__GLM-5.1-NVFP4.json': 'view',
    'modelopt/nvidia__Gemma-4-31B-IT-NVFP4.json': 'view',
    'modelopt/nvidia__Llama-3.1-70B-Instruct-FP8.json': 'view',
    'modelopt/nvidia__MiniMax-M2.5-NVFP4.json': 'view',
    'modelopt/nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4.json': 'view',
    'modelopt/nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json':
        '/hf_quant_config.json declares quantization (FP8, no quant_method stated) and names no producer: the pinned '
        'converter takes the producer\'s name as the quant method',
    'modelopt/nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8.json':
        '/hf_quant_config.json declares quantization (FP8, no quant_method stated) and names no producer: the pinned '
        'converter takes the producer\'s name as the quant method',
    'modelopt/nvidia__Qwen3-235B-A22B-NVFP4.json': 'view',
    'modelopt/nvidia__Qwen3.5-122B-A10B-NVFP4.json': 'view',
    # gptq
    'gptq/Qwen__Qwen-VL-Chat-Int4.json': 'view',
    'gptq/TheBloke__Genz-70b-GPTQ.json': '/config.json declares quantization_config (GPTQ 3-bit, quant_method "gptq")',
    'gptq/TheBloke__Llama-2-13B-chat-GPTQ.json': 'view',
    'gptq/TheBloke__Wizard-Vicuna-30B-Uncensored-GPTQ-first-revision.json': '/quantize_config.json declares quantization (GPTQ 4-bit, quant_method "gptq")',
    'gptq/TheBloke__Wizard-Vicuna-30B-Uncensored-GPTQ.json': 'view',
    'gptq/TheBloke__WizardCoder-15B-1.0-GPTQ.json': '/quantize_config.json declares quantization (GPTQ 4-bit, quant_method "gptq")',
    'gptq/TheBloke__wizard-mega-13B-GPTQ.json': '/quantize_config.json declares quantization (GPTQ 4-bit, quant_method "gptq")',
    # Qwen's and 01-ai's own GPTQ 4-bit uploads (groups of 128, no act-order), stated in config.json
    'gptq/Qwen__Qwen1.5-32B-Chat-GPTQ-Int4.json': 'view',
    'gptq/01-ai__Yi-1.5-34B-Chat-GPTQ-Int4.json': 'view',
    # fbgemm_fp8
    'fbgemm_fp8/meta-llama__Llama-3.1-405B-Instruct-FP8.json':
        '/config.json declares quantization_config (FP8 (FBGEMM), quant_method "fbgemm_fp8")',
}

# file -> why today's outcome is not the wanted one (the form the pinned converter reads, or a form it refuses
# that hfview does not see)
GAPS: dict[str, str] = {
    "modelopt/nvidia__DeepSeek-V3.1-NVFP4.json": (
        "read as the converter reads it (its bytes on a DeepSeek-V3 NVFP4 fixture: tests/test_nvfp4.py; export and "
        "mount write them), but the runner refuses to run it: llama.cpp's deepseek2 graph applies no per-tensor .scale "
        "(weight_scale_2) to FFNs or experts (RunnerFacts.applies_ffn_scales), and on the fixture the converter's own "
        "file gives NaN logits"),
    "modelopt/nvidia__MiniMax-M2.5-NVFP4.json": (
        "its config reads (its partial_rotary_factor 0.5 is rotary_dim / head_dim), but its tensors are refused as the "
        "pinned converter fails on them: its NVFP4 path stacks only experts named experts.<i>.(gate|up|down)_proj and "
        "cannot map MiniMax's experts.<i>.w1/w2/w3 ('Can not map tensor ...experts.0.w1.weight', measured on a "
        "fixture: tests/test_nvfp4_more.py test_minimax_m2_nvfp4_experts_are_refused_as_the_converter_fails)"),
}


@pytest.mark.parametrize("rel", CONFIGS)
def test_released_quantized_config_has_todays_outcome(rel):
    expected = EXPECTED[rel]
    if expected in ("view", "torch"):
        assert through_the_config_path(DATA / rel) == expected
    else:
        with pytest.raises(HfviewError, match=re.escape(expected)):
            through_the_config_path(DATA / rel)


def test_expected_names_exactly_the_collected_files():
    assert set(EXPECTED) == set(CONFIGS)
    assert not set(GAPS) - set(CONFIGS)


# forms with fewer than three collected, and why
FEWER = {
    "nvfp4": "compressed-tensors nvfp4-pack-quantized releases (RedHatAI/*-NVFP4) publish on the Hub only; one copy "
             "reached (aiconfigurator kept RedHatAI/DeepSeek-V4-Flash-NVFP4-FP8's for one commit); NVIDIA's NVFP4 "
             "exports are under modelopt/",
    "fbgemm_fp8": "one copy reached (meta-llama/Llama-3.1-405B-Instruct-FP8, in ome's test data); the other FBGEMM "
                  "releases (Llama-3.1-8B/70B-Instruct-FP8 by others) reached only as fragments quoted in code",
    "awq": "two copies reached (01-ai's Yi-6B-Chat-4bits and Yi-34B-Chat-4bits, kept with a model directory in "
           "smalltong02/keras-llm-robot); otherwise the search finds AutoAWQ's writers and configs printed by "
           "transformers, and ome's awq-llama-2-7b test file, whose model is not named",
    "bitsandbytes": "no copy of a released config.json reached (unsloth/*-bnb-4bit publish on the Hub only; the "
                    "search finds configs written by code and printed BitsAndBytesConfig objects)",
}


@pytest.mark.parametrize("form", FORMS)
def test_every_form_has_three_released_configs(form):
    have = released(form)
    if form in FEWER:
        assert len(have) < 3, f"{form}: {len(have)} collected; drop it from FEWER"
    else:
        assert len(have) >= 3, f"{form}: {len(have)} collected"


@pytest.mark.parametrize("form", sorted(p.name for p in DATA.iterdir() if p.is_dir()))
def test_sources_name_every_file(form):
    """Each form's SOURCES.md has a row for each of its files (the first column names it)."""
    assert form in FORMS
    sources = (DATA / form / "SOURCES.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `?([^`|]+\.json)`? \|", sources, flags=re.M))
    assert listed == {p.name for p in (DATA / form).glob("*.json")}


def test_beside_files_have_their_config():
    for form in FORMS:
        for p in (DATA / form).glob("*.json"):
            for suffix in BESIDE:
                if p.name.endswith(suffix):
                    assert p.with_name(p.name.removesuffix(suffix) + ".json").is_file(), p


def test_naive_quantized_other_than_8_bit_is_refused(tmp_path):
    """naive-quantized FP8 (neuralmagic's FP8-dynamic) is read; the same release stating 4-bit weights is refused by
    name before any weight is read (the converter's dequant_simple would read the codes as 8-bit values)."""
    import json
    rel = "compressed_tensors/neuralmagic__Meta-Llama-3.1-8B-Instruct-FP8-dynamic.json"
    assert through_the_config_path(DATA / rel) == "view"
    config = json.loads((DATA / rel).read_text())
    config["quantization_config"]["config_groups"]["group_0"]["weights"]["num_bits"] = 4
    (tmp_path / "c.json").write_text(json.dumps(config))
    with pytest.raises(HfviewError, match="format 'naive-quantized' with weights other than 8-bit float or int"):
        through_the_config_path(tmp_path / "c.json")
