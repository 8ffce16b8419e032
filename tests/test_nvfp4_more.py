"""NVFP4 beyond tests/test_nvfp4.py: q/k on LlamaModel's subclasses (Family.nvfp4_qk_pairs), --fp8-as-q8 over
ModelOpt NVFP4, Gemma 4's router per-expert scale folded into its NVFP4 experts' scales; each proven by the two
oracles as test_nvfp4 proves its fixtures (the converter's bytes at every outtype; llama.cpp's logits from the view
against transformers over the dequantized float32 twin, within the converter's own file's NMSE); and the measured
refusals: an NVFP4 Granite shared MLP (Family.nvfp4_unmapped), scales llama.cpp's graph drops (RunnerFacts)."""
import json
import subprocess
import sys

import numpy as np
import pytest

from family_oracle import OUTTYPES, check_export
from test_nvfp4 import check_twin_logits, nvfp4_twin

FIXTURES = {f: [f"{f}-nvfp4", f"{f}-nvfp4-record"] for f in ("granite", "granite_swa", "arcee", "smollm3")}
FIXTURES["llama"] = ["mistral3-mm-nvfp4"]
FIXTURES["ministral3"] = ["ministral3-nvfp4", "ministral3-nvfp4-record"]
FIXTURES["gemma4"] = ["gemma4-moe-nvfp4"]
FIXTURES["afmoe"] = ["afmoe-nvfp4-mlp"]
ALL = [n for names in FIXTURES.values() for n in names]
# llama.cpp's granite, granite_swa, arcee, smollm3 and afmoe graphs pass their FFNs no per-tensor scale
# (src/models/granite.cpp: NULL where llama passes ffn_*_s): the converter's own files of the fixtures with scales give
# NaN logits (test_nvfp4_ffn_scales_unapplied_are_refused_by_the_runner); their scales-of-1 twins run
SCALES_UNAPPLIED = ["granite-nvfp4", "granite_swa-nvfp4", "arcee-nvfp4", "smollm3-nvfp4", "afmoe-nvfp4-mlp"]
LOGITS = [n for n in ALL if n not in SCALES_UNAPPLIED]


@pytest.mark.parametrize("outtype", OUTTYPES + ["q8_0"])
@pytest.mark.parametrize("name", ALL)
def test_export(name, outtype, checkpoint, converted, tmp_path, record_property):
    record_property("family", next(f for f, names in FIXTURES.items() if name in names))
    record_property("oracle", "bytes")
    check_export(name, outtype, checkpoint, converted, tmp_path)


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", LOGITS)
def test_logits_within_converter_file_ceiling(name, outtype, checkpoint, converted, tmp_path_factory,
                                              record_property):
    """llama.cpp over the view vs transformers over the dequantized float32 twin, held to the NMSE of llama.cpp
    running the converter's own NVFP4 file against the same twin (or the ordinary bar, where that file meets it)."""
    from family_oracle import wrapper_logits

    record_property("family", next(f for f, names in FIXTURES.items() if name in names))
    record_property("oracle", "logits")
    # (Mistral 3's image-text wrapper: no AutoModelForCausalLM maps it)
    check_twin_logits(name, outtype, checkpoint, converted, tmp_path_factory,
                      make_twin=gemma4_twin if name.startswith("gemma4") else None,
                      reference=wrapper_logits("Mistral3ForConditionalGeneration") if name.startswith("mistral3")
                      else None)


_CONVERTER_CLASSES = r"""
import json, sys
sys.path[:0] = [sys.argv[1] + "/gguf-py", sys.argv[1]]
from conversion import get_model_class
from conversion.llama import LlamaModel
from conversion.base import TextModel
out = {}
for arch in json.loads(sys.argv[2]):
    try:
        cls = get_model_class(arch)
    except Exception:  # an architecture hfview reads that the converter has no class for (no_converter)
        continue
    # a wrapper (Mistral3Model: prepare_tensors and write delegated to `impl`, one of its nested classes chosen by
    # the text model's type) does what its implementations do: one fact each
    impls = [c for c in vars(cls).values() if isinstance(c, type) and issubclass(c, TextModel)] \
        if "impl" in vars(cls).get("__annotations__", {}) else [cls]
    out[arch] = sorted({issubclass(c, LlamaModel) and bool(c.undo_permute) for c in impls})
print(json.dumps(out))
"""


def test_qk_pairs_fact_is_the_converters_class_chain():
    """Family.nvfp4_qk_pairs, declared by each family, is what the pinned converter's class for each of its
    architectures does: a LlamaModel subclass with undo_permute regroups NVFP4 q/k (LlamaModel._repack_nvfp4), every
    other class writes them as stored. Read from the converter's own classes, not from a list."""
    import oracle

    from hfview.families import FAMILIES

    archs = sorted({a for f in FAMILIES for a in f.architectures})
    done = subprocess.run([sys.executable, "-c", _CONVERTER_CLASSES, str(oracle.converter_root()), json.dumps(archs)],
                          capture_output=True, text=True, check=True)
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    assert sum(facts == [True] for facts in theirs.values()) >= 10
    for family in FAMILIES:
        for arch in family.architectures:
            if arch in theirs:
                # (a wrapper's implementations may differ: Mistral3Model's mistral4 one is a DeepseekV2Model, a text
                # model no family of these architectures reads; mistral3-mm-nvfp4's bytes prove the one they read)
                assert family.nvfp4_qk_pairs({"architectures": [arch]}) in theirs[arch], (family.name, arch)


@pytest.mark.parametrize("name", SCALES_UNAPPLIED)
def test_nvfp4_ffn_scales_unapplied_are_refused_by_the_runner(name, checkpoint, converted):
    """Measured: llama.cpp running the converter's own NVFP4 Granite / Granite SWA / Arcee / SmolLM3 / AFMoE file, whose
    FFN weights carry a .scale, gives NaN logits (its graph drops the scale: RunnerFacts.applies_ffn_scales), so the
    runner refuses the view, naming the scale; its bytes are the converter's all the same (test_export), and the
    -record fixture, whose scales are 1, runs (test_logits_within_converter_file_ceiling). Once llama.cpp applies the
    scales the first assertion fails: declare the fact true and move the fixture into LOGITS."""
    from converter_ceiling import GGUFFile, llama_cpp_logits

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    ids = list(range(100, 116))
    _, theirs = llama_cpp_logits(GGUFFile(converted(name, "bf16")), ids)
    assert np.isnan(theirs).any()
    view = HfCheckpoint(checkpoint(name), "bf16")
    with pytest.raises(CheckpointError, match=rf"'blk\.\d+\.ffn_[a-z_]+\.scale' \(NVFP4's per-tensor weight_scale_2\) "
                                              rf"is a scale llama.cpp's {view.arch} graph does not apply"):
        llama_cpp_logits(view, ids)


@pytest.mark.parametrize("name, outtype", [("qwen3-nvfp4-mixed", "bf16"), ("qwen3-nvfp4-mixed", "f32"),
                                           ("qwen3-nvfp4-mixed", "auto"), ("llama-nvfp4", "f16")])
def test_fp8_as_q8_over_modelopt_nvfp4_is_the_converters(name, outtype, checkpoint, tmp_path):
    """The converter's --fp8-as-q8 over ModelOpt NVFP4: a MIXED_PRECISION checkpoint's FP8 layers (layer 0's MLP)
    dequantized and written Q8_0, its NVFP4 layers NVFP4, the rest at the outtype, the file type MOSTLY_NVFP4; a pure
    NVFP4 one unchanged. Byte for byte."""
    import oracle

    from hfview import HfCheckpoint
    from hfview.export import export
    from hfview.gguf_layout import GGMLType

    view = HfCheckpoint(checkpoint(name), outtype, fp8_as_q8=True)
    q8 = sorted(t.name for t in view.tensors if t.ggml_type == GGMLType.Q8_0)
    if name == "qwen3-nvfp4-mixed":
        assert q8 == sorted(f"blk.0.ffn_{p}.weight" for p in ("down", "gate", "up")), q8
        assert view.file_type == 39
    else:
        assert q8 == []
    ours = export(view, tmp_path / "ours.gguf")
    theirs = oracle.convert(checkpoint(name), tmp_path / "theirs.gguf", outtype, "--fp8-as-q8")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


def test_fp8_as_q8_over_compressed_tensors_nvfp4_is_refused(checkpoint):
    """compressed-tensors' NVFP4 has no FP8 layer the converter could dequantize (it fails on a scale left beside no
    NVFP4 weight, nvfp4_stored): the flag has nothing to apply to, refused as for any checkpoint without FP8."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match="--fp8-as-q8 applies to FP8 checkpoints; this one is Nvfp4"):
        HfCheckpoint(checkpoint("qwen3-nvfp4-ct"), "f32", fp8_as_q8=True)


def gemma4_twin(src, dst):
    """The dequantized float32 twin of a Gemma 4 NVFP4 mixture (nvfp4_twin), its per-expert linears stacked back
    into transformers' Gemma4TextExperts parameters (gate_up_proj [E, 2I, H], gate rows first; down_proj [E, H, I])."""
    import re
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    flat = nvfp4_twin(src, dst.with_name(dst.name + ".flat"))
    tensors = load_file(str(flat / "model.safetensors"))
    out, experts = {}, {}
    for name, t in tensors.items():
        m = re.match(r"(.*\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$", name)
        if m:
            experts.setdefault(m.group(1), {})[(int(m.group(2)), m.group(3))] = t
        else:
            out[name] = t
    for prefix, parts in experts.items():
        n = 1 + max(e for e, _ in parts)
        out[prefix + ".gate_up_proj"] = torch.stack([torch.cat([parts[(e, "gate")], parts[(e, "up")]])
                                                     for e in range(n)])
        out[prefix + ".down_proj"] = torch.stack([parts[(e, "down")] for e in range(n)])
    tmp = dst.with_name(dst.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(flat, tmp)
    save_file({k: v.contiguous() for k, v in out.items()}, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    tmp.rename(dst)
    return dst


def test_minimax_m2_nvfp4_experts_are_refused_as_the_converter_fails(checkpoint, tmp_path):
    """nvidia/MiniMax-M2.5-NVFP4's experts are block_sparse_moe.experts.<e>.w1/w2/w3: the pinned converter's NVFP4
    path stacks only experts.<e>.(gate|up|down)_proj, so it maps each such expert by name and fails (measured on the
    fixture in that form); hfview refuses the checkpoint quoting that failure, naming the tensor."""
    import oracle

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    with pytest.raises(oracle.ConverterFailed, match=r"_repack_nvfp4[\s\S]*Can not map tensor "
                                                     r"'model\.layers\.0\.block_sparse_moe\.experts\.0\.w1\.weight'"):
        oracle.convert(checkpoint("minimax_m2-nvfp4"), tmp_path / "c.gguf", "bf16")
    with pytest.raises(CheckpointError, match=r"block_sparse_moe\.experts\.0\.w1\.weight'\.\.\. are not the "
                                              r"converter's "
                                              r"[\s\S]*\"Can not map tensor 'model\.layers\.0\.block_sparse_moe\."
                                              r"experts\.0\.w1\.weight'\"\)"):
        HfCheckpoint(checkpoint("minimax_m2-nvfp4"), "bf16")


def test_afmoe_nvfp4_qk_is_refused_as_the_converters_file_is_another_model(checkpoint, converted, tmp_path):
    """AfmoeModel is a LlamaModel with undo_permute: its NVFP4 path regroups q/k into rotation pairs, while its own
    path (and llama.cpp's afmoe graph) keeps them as stored. Measured: llama.cpp on the converter's NVFP4 file (scales
    of 1, only the attention NVFP4) misses transformers over the dequantized twin by NMSE 0.058 (top-1 0.63), far
    past the ordinary bar; hfview refuses the checkpoint, naming the tensor and that figure."""
    from converter_ceiling import GGUFFile, llama_cpp_logits
    from family_oracle import NMSE_BAR, nmse, transformers_logits

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    twin = nvfp4_twin(checkpoint("afmoe-nvfp4"), tmp_path / "twin")
    ids, theirs = llama_cpp_logits(GGUFFile(converted("afmoe-nvfp4", "bf16")))
    value = nmse(theirs, transformers_logits(twin, ids))
    print(f"afmoe-nvfp4: the converter's file misses its twin by NMSE {value:.3e}")
    assert value > 100 * NMSE_BAR
    with pytest.raises(CheckpointError, match=r"attn_k\.weight \(from 'model\.layers\.0\.self_attn\.k_proj\.weight'\): "
                                              r"the pinned converter's NVFP4 path regroups it into rotation pairs"):
        HfCheckpoint(checkpoint("afmoe-nvfp4"), "bf16")


def test_gemma4_router_scale_beside_partly_nvfp4_experts_is_refused_as_the_converter_fails(checkpoint, tmp_path):
    """Gemma 4's fold needs every expert's down_proj NVFP4 with a weight_scale_2: with expert 1's stored in bfloat16
    instead, the converter's Gemma4Model asserts (measured); hfview refuses, quoting it and naming the expert."""
    import shutil

    import oracle
    from safetensors.torch import load_file, save_file

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError
    from test_nvfp4 import nvfp4_dequantized

    path = tmp_path / "partial"
    shutil.copytree(checkpoint("gemma4-moe-nvfp4"), path)
    tensors = load_file(str(path / "model.safetensors"))
    base = "model.layers.0.experts.1.down_proj"
    tensors[base + ".weight"] = nvfp4_dequantized(tensors[base + ".weight"], tensors.pop(base + ".weight_scale"),
                                                  tensors.pop(base + ".weight_scale_2")).bfloat16()
    tensors.pop(base + ".input_scale")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path / "model.safetensors"),
              metadata={"format": "pt"})
    with pytest.raises(oracle.ConverterFailed, match=r"layer 0: partial NVFP4 quantization across experts"):
        oracle.convert(path, tmp_path / "c.gguf", "bf16")
    with pytest.raises(CheckpointError, match=r"'model\.layers\.0\.experts\.1\.down_proj\.weight' is not NVFP4 with a "
                                              r"weight_scale_2; the pinned converter fails on it \(\"layer 0: partial "
                                              r"NVFP4 quantization across experts\"\)"):
        HfCheckpoint(path, "bf16")


# Issue 32: NVFP4 on the Granite mixture / hybrid families, Nemotron-H, IQuest-Coder and Nanbeige, whose
# nvfp4_qk_pairs were declared from the converter's classes alone. Where their converter class is a LlamaModel with
# undo_permute, the -attn fixtures' NVFP4 q/k (attention NVFP4, the MLPs as stored) prove the rotation pairs reach
# llama.cpp as transformers computes them.
MORE = {"granitemoehybrid": ["granite-4.0-h-nvfp4-attn", "granite-4.0-h-dense-nvfp4-attn"],
        "granitemoe": ["granitemoe-nvfp4-attn"],
        "nemotron_h": ["nemotron_h-moe-nvfp4", "nemotron_h-moe-nvfp4-record"],
        "nemotron_h_puzzle": ["nemotron_h_puzzle-nvfp4", "nemotron_h_puzzle-nvfp4-record"],
        "iquestcoder": ["iquestcoder-nvfp4", "iquestcoder-nvfp4-record"],
        "nanbeige": ["nanbeige-nvfp4", "nanbeige-nvfp4-record", "nanbeige-nvfp4-attn"],
        "granitemoe_swa": ["granitemoe_swa-nvfp4-attn"]}
MORE_ALL = [n for names in MORE.values() for n in names]
# llama.cpp's nanbeige loads the looped layers' weights without their .scale (RunnerFacts.applies_ffn_scales)
MORE_SCALES_UNAPPLIED = ["nanbeige-nvfp4", "nanbeige-nvfp4-attn"]
# llama.cpp cannot load the converter's file: its loader leaves the latent projections' .scale unread
MORE_UNLOADABLE = ["nemotron_h_puzzle-nvfp4"]


def _llama_of(path, ids):
    """IQuest-Coder (no transformers class; its decoder is Llama's): transformers' Llama over the same weights."""
    import torch
    import transformers

    cfg = json.loads((path / "config.json").read_text())
    config = transformers.LlamaConfig(**{k: v for k, v in cfg.items()
                                         if k not in ("architectures", "auto_map", "model_type")})
    model = transformers.LlamaForCausalLM.from_pretrained(path, config=config, dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def _reference(name):
    from family_oracle import transformers_logits
    if name.startswith("iquestcoder"):
        return _llama_of
    if name.startswith("nanbeige"):
        from test_family_nanbeige import looped_llama_logits
        return looped_llama_logits
    if name.startswith("nemotron_h_puzzle"):
        from test_family_nemotron_h_puzzle import puzzle_logits
        return puzzle_logits
    return transformers_logits


@pytest.mark.parametrize("outtype", OUTTYPES + ["q8_0"])
@pytest.mark.parametrize("name", MORE_ALL)
def test_more_export(name, outtype, checkpoint, converted, tmp_path, record_property):
    record_property("family", next(f for f, names in MORE.items() if name in names))
    record_property("oracle", "bytes")
    check_export(name, outtype, checkpoint, converted, tmp_path)


@pytest.mark.parametrize("outtype", OUTTYPES)
@pytest.mark.parametrize("name", [n for n in MORE_ALL if n not in MORE_SCALES_UNAPPLIED + MORE_UNLOADABLE])
def test_more_logits_within_converter_file_ceiling(name, outtype, checkpoint, converted, tmp_path_factory,
                                                   record_property):
    """As test_logits_within_converter_file_ceiling: llama.cpp over the view vs the family's reference (transformers,
    or its Llama modules where transformers has no class) over the dequantized float32 twin, held to the NMSE of
    llama.cpp running the converter's own file (or the ordinary bar)."""
    record_property("family", next(f for f, names in MORE.items() if name in names))
    record_property("oracle", "logits")
    check_twin_logits(name, outtype, checkpoint, converted, tmp_path_factory, reference=_reference(name))


@pytest.mark.parametrize("name", ["nanbeige-nvfp4", "nanbeige-nvfp4-attn"])
def test_nanbeige_nvfp4_scales_unapplied_on_loops_are_refused_by_the_runner(name, checkpoint, converted, tmp_path):
    """Measured: llama.cpp's nanbeige copies the stored layers into the loop slots (load_arch_tensors) before its
    generic pass loads each blk.N.*.scale, so the second pass runs unscaled: the converter's own NVFP4 file of a
    two-loop Nanbeige gives NaN logits (every linear NVFP4) or misses transformers over the dequantized twin by
    NMSE 1.3 (the attention alone NVFP4). The runner refuses the view (RunnerFacts.applies_ffn_scales and
    applies_attn_scales), naming the scale; the scales-of-1 twin runs (test_more_logits_within_converter_file_ceiling).
    Once llama.cpp loads the loop slots' scales, the first assertion fails: declare the facts true."""
    from converter_ceiling import GGUFFile, llama_cpp_logits
    from family_oracle import nmse
    from test_family_nanbeige import looped_llama_logits

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    ids, theirs = llama_cpp_logits(GGUFFile(converted(name, "bf16")))
    if name == "nanbeige-nvfp4":
        assert np.isnan(theirs).any()
    else:
        value = nmse(theirs, looped_llama_logits(nvfp4_twin(checkpoint(name), tmp_path / "twin"), ids))
        print(f"{name}: the converter's file misses its twin by NMSE {value:.3e}")
        assert value > 0.1
    with pytest.raises(CheckpointError, match=r"'blk\.0\.(attn|ffn)_[a-z]+\.scale' \(NVFP4's per-tensor weight_scale_2\) "
                                              r"is a scale llama.cpp's nanbeige graph does not apply to its "
                                              r"(attention|FFN and expert) weights"):
        llama_cpp_logits(HfCheckpoint(checkpoint(name), "bf16"), ids)


@pytest.mark.parametrize("name", ["granite-4.0-h-nvfp4", "granite-4.0-h-nvfp4-record", "granite-4.0-h-dense-nvfp4",
                                  "granite-4.0-h-dense-nvfp4-record", "granitemoeshared-nvfp4",
                                  "granitemoeshared-nvfp4-record", "granitemoe_swa-nvfp4",
                                  "granitemoe_swa-nvfp4-record"])
def test_granite_nvfp4_shared_mlp_is_refused_as_the_converter_fails(name, checkpoint, tmp_path):
    """A ModelOpt export quantizes the shared MLP's fused input_linear (an nn.Linear): the pinned converter's NVFP4
    path maps each NVFP4 weight by its stored name, which its tensor map does not know (the Granite classes'
    modify_tensors split or rename it first; that path is bypassed), and fails (measured on Granite 4.0-H with and
    without experts, Granite MoE Shared and Granite MoE SWA); hfview refuses quoting that failure
    (Family.nvfp4_unmapped), where without the fact it would present Granite MoE SWA's fused input_linear as
    ffn_up_shexp, a file the converter cannot write."""
    import oracle

    from hfview import HfCheckpoint
    from hfview.errors import CheckpointError

    with pytest.raises(oracle.ConverterFailed, match=r"_repack_nvfp4[\s\S]*Can not map tensor "
                                                     r"'model\.layers\.0\.shared_mlp\.input_linear\.weight'"):
        oracle.convert(checkpoint(name), tmp_path / "c.gguf", "bf16")
    with pytest.raises(CheckpointError, match=r"\(from 'model\.layers\.0\.shared_mlp\.input_linear\.weight'\): the "
                                              r"pinned converter's NVFP4 path [\s\S]*\(\"Can not map tensor "
                                              r"'model\.layers\.0\.shared_mlp\.input_linear\.weight'\"\)"):
        HfCheckpoint(checkpoint(name), "bf16")


@pytest.mark.parametrize("outtype", OUTTYPES + ["q8_0"])
def test_nemotron_h_dense_nvfp4_export_matches_the_converter_on_config_as_stated(outtype, checkpoint, tmp_path,
                                                                                 record_property):
    """A dense Nemotron-H's NVFP4 export (every mixer linear NVFP4): the pinned converter under transformers 5.24
    writes any dense Nemotron-H as nemotron_h_moe (test_family_nemotron_h's strict xfail), so its bytes are those of
    the converter on config.json as written, as for the family's unquantized dense fixture."""
    import oracle
    from test_family_nemotron_h import convert_as_stated

    from hfview import HfCheckpoint
    from hfview.export import export

    record_property("family", "nemotron_h")
    record_property("oracle", "bytes")
    path = checkpoint("nemotron_h-dense-nvfp4")
    theirs = convert_as_stated(path, outtype, tmp_path)
    ours = export(HfCheckpoint(path, outtype), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


@pytest.mark.parametrize("outtype", OUTTYPES)
def test_nemotron_h_dense_nvfp4_logits_within_converter_file_ceiling(outtype, checkpoint, tmp_path, tmp_path_factory,
                                                                    record_property):
    """llama.cpp over the dense NVFP4 view vs transformers over its dequantized twin, held to llama.cpp on the
    converter's file (config.json as written): its graph applies the MLPs' scales (measured: no NaN)."""
    from test_family_nemotron_h import convert_as_stated

    record_property("family", "nemotron_h")
    record_property("oracle", "logits")
    check_twin_logits("nemotron_h-dense-nvfp4", outtype, checkpoint,
                      lambda name, outtype: convert_as_stated(checkpoint(name), outtype, tmp_path), tmp_path_factory)


def test_nemotron_latent_nvfp4_scales_fail_llama_cpp_as_the_converters_file(checkpoint, converted):
    """Measured: with the latent projections (fc1/fc2_latent_proj) NVFP4 and their scales not 1, the converter writes
    blk.N.ffn_latent_down/up.scale and .input_scale, which llama.cpp's nemotron_h_moe loader does not read: it refuses
    the converter's own file ("wrong number of tensors"), and the view, byte-equal (test_more_export), the same way;
    with scales of 1 (no .scale written) both run (test_more_logits_within_converter_file_ceiling)."""
    from converter_ceiling import GGUFFile, llama_cpp_logits

    from hfview import HfCheckpoint
    from hfview.runner.stream import ModelLoadError

    ids = list(range(100, 116))
    failure = r"wrong number of tensors; expected 84, got 76"
    with pytest.raises(ModelLoadError, match=failure):
        llama_cpp_logits(GGUFFile(converted("nemotron_h_puzzle-nvfp4", "bf16")), ids)
    with pytest.raises(ModelLoadError, match=failure):
        llama_cpp_logits(HfCheckpoint(checkpoint("nemotron_h_puzzle-nvfp4"), "bf16"), ids)
