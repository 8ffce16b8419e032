"""general.* entries against the pinned converter.

Two oracles, both the converter's own code:
- its gguf-py (`Metadata`, `GGUFWriter`, `size_label`) driven in one subprocess over many names and
  tiny directories (fast, wide);
- a few full `convert_hf_to_gguf.py` runs on tiny Llama/Mixtral checkpoints (end to end: the key
  order after general.type, the directory-name fallback, the size label from the real tensors).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader
from safetensors.numpy import save_file

from hfview.gguf_layout import encode_kv
from hfview.metadata import MetadataError, general_kv, model_id_components, parameter_counts, size_label, title_case

import oracle

REPO = Path(__file__).resolve().parent.parent
SPM_MODEL = REPO / "fixtures" / "tokenizers" / "llama-spm" / "tokenizer.model"

# --------------------------------------------------------------------------------------------------
# Tiny checkpoints

HIDDEN, FF, VOCAB = 16, 32, 32000


def _llama_config(**extra) -> dict:
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB,
           "hidden_size": HIDDEN, "intermediate_size": FF, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 64,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
           "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float16"}
    cfg.update(extra)
    return cfg


def _llama_tensors(moe_experts: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)

    def w(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float16)

    p = "model.layers.0."
    t = {"model.embed_tokens.weight": w(VOCAB, HIDDEN), "lm_head.weight": w(VOCAB, HIDDEN),
         "model.norm.weight": np.ones(HIDDEN, np.float16),
         p + "input_layernorm.weight": np.ones(HIDDEN, np.float16),
         p + "post_attention_layernorm.weight": np.ones(HIDDEN, np.float16)}
    for proj in "qkvo":
        t[p + f"self_attn.{proj}_proj.weight"] = w(HIDDEN, HIDDEN)
    if moe_experts:
        t[p + "block_sparse_moe.gate.weight"] = w(moe_experts, HIDDEN)
        for e in range(moe_experts):
            q = p + f"block_sparse_moe.experts.{e}."
            t[q + "w1.weight"], t[q + "w3.weight"], t[q + "w2.weight"] = w(FF, HIDDEN), w(FF, HIDDEN), w(HIDDEN, FF)
    else:
        t[p + "mlp.gate_proj.weight"], t[p + "mlp.up_proj.weight"] = w(FF, HIDDEN), w(FF, HIDDEN)
        t[p + "mlp.down_proj.weight"] = w(HIDDEN, FF)
    return t


def make_checkpoint(parent: Path, dirname: str, *, readme: str | None = None, generation: dict | str | None = None,
                    config_extra: dict | None = None, moe_experts: int = 0, weights: bool = True) -> Path:
    d = parent / dirname
    d.mkdir(parents=True)
    cfg = _llama_config(**(config_extra or {}))
    if moe_experts:
        cfg.update(architectures=["MixtralForCausalLM"], model_type="mixtral",
                   num_local_experts=moe_experts, num_experts_per_tok=2)
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    if weights:
        save_file(_llama_tensors(moe_experts), str(d / "model.safetensors"))
        shutil.copy(SPM_MODEL, d / "tokenizer.model")
    if readme is not None:
        (d / "README.md").write_text(readme, encoding="utf-8")
    if generation is not None:
        text = generation if isinstance(generation, str) else json.dumps(generation)
        (d / "generation_config.json").write_text(text)
    return d


# --------------------------------------------------------------------------------------------------
# Oracle 1: the converter's gguf-py in a subprocess

_GGUF_PY_PROBE = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import numpy as np
    import gguf
    from gguf.metadata import Metadata

    req = json.load(sys.stdin)
    assert Path(gguf.__file__).parent.parent == Path(req["gguf_py"]), gguf.__file__
    out = {"ids": [list(Metadata.get_model_id_components(i, n)) for i, n in req["ids"]],
           "titles": [Metadata.id_to_title(s) for s in req["titles"]], "counts": [], "dirs": []}
    for tensors in req["tensors"]:
        w = gguf.GGUFWriter(None, "llama")
        for name, shape in tensors:
            w.add_tensor_info(name, shape, np.dtype(np.float32), 0)
        counts = w.get_total_parameter_count()
        out["counts"].append([list(counts), gguf.size_label(*counts)])
    for d in req["dirs"]:
        counts = d["counts"]
        w = gguf.GGUFWriter(None, "llama")
        n_before = len(w.kv_data[0])
        try:
            # What ModelBase.prepare_metadata does around Metadata.load, then set_gguf_meta_model.
            meta = Metadata.load(None, Path(d["path"]), d["model_name"], counts[0])
            if meta.name is None:
                meta.name = Path(d["path"]).name
            if meta.size_label is None and counts[0] > 0:
                meta.size_label = gguf.size_label(*counts)
            meta.set_gguf_meta_model(w)
            records = []
            for key, v in list(w.kv_data[0].items())[n_before:]:
                raw = w._pack_val(key, gguf.GGUFValueType.STRING, add_vtype=False)
                raw += w._pack_val(v.value, v.type, add_vtype=True, sub_type=v.sub_type)
                records.append([key, raw.hex()])
            out["dirs"].append({"kvs": records})
        except Exception as e:
            out["dirs"].append({"error": f"{type(e).__name__}: {e}"})
    json.dump(out, sys.stdout)
""")


def gguf_py_oracle(*, ids=(), titles=(), tensors=(), dirs=()) -> dict:
    gguf_py = oracle.converter_root() / "gguf-py"
    req = {"gguf_py": str(gguf_py), "ids": list(ids), "titles": list(titles), "tensors": list(tensors),
           "dirs": list(dirs)}
    env = dict(os.environ, PYTHONPATH=str(gguf_py))
    proc = subprocess.run([sys.executable, "-c", _GGUF_PY_PROBE], input=json.dumps(req), env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def ours_raw(kvs) -> list[list[str]]:
    return [[kv.key, encode_kv(kv).hex()] for kv in kvs]


TINY_TOTAL = 1_026_608  # what the tiny Llama above has; only used as a plausible count here

NAMES = [
    "Meta-Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B-Instruct", "mistral-7b-v0.3",
    "mistralai/Mistral-7B-Instruct-v0.3", "tiny", "Qwen2.5-0.5B-Chat-GGUF-v2", "Qwen/Qwen2.5-0.5B",
    "bigscience/bloom-7b1", "Mixtral-8x7B-Instruct-v0.1", "microsoft/Phi-3-mini-4k-instruct",
    "google/gemma-2-2b-it", "Llama-2-7b-chat-hf", "TinyLlama-1.1B-intermediate-step-1431k-3T",
    "deepseek-coder-1.3b-base", "some model name", "model-Q4_K_M", "Llama-2-7B-bf16", "Qwen3-30B-A3B",
    "my-model-1M", "my-model-1m-v2", "foo-v1.2-small", "t5-xl", "gpt2", "gpt2-xl", "./local-7B",
    "../x/y", "org/-leading--dashes-", "v2-model", "Model-v1.5", "3B-model", "iter1-7B-lora",
    "Falcon-180B-chat", "stabilityai/stablelm-2-1_6b", "Yi-34B-200K", "", "ÉCOLE-7B",
]


def test_model_id_components_match_converter():
    cases = [(name, n) for name in NAMES for n in (0, TINY_TOTAL, 7_241_732_096, 1_600_000_000, -5_000_000)]
    theirs = gguf_py_oracle(ids=cases, titles=NAMES)
    for (name, n), expected in zip(cases, theirs["ids"]):
        assert list(model_id_components(name, n)) == expected, (name, n)
    for name, expected in zip(NAMES, theirs["titles"]):
        assert title_case(name) == expected, name


def _expert_tensors(n_expert: int, *, bias: bool = False) -> list:
    t = [("token_embd.weight", [VOCAB, HIDDEN]), ("blk.0.ffn_gate_inp.weight", [n_expert, HIDDEN]),
         ("blk.0.ffn_gate_exps.weight", [n_expert, FF, HIDDEN]), ("blk.0.ffn_up_exps.weight", [n_expert, FF, HIDDEN]),
         ("blk.0.ffn_down_exps.weight", [n_expert, HIDDEN, FF]), ("output_norm.weight", [HIDDEN]),
         ("blk.0.ffn_gate_exps.scale", [n_expert]), ("rope_freqs.weight", [])]
    if bias:
        t += [("blk.0.ffn_down_exps.bias", [n_expert, HIDDEN]),           # 2-D: counted as shared
              ("blk.1.ffn_up_exps.bias", [2, n_expert, FF])]             # >=3-D bias: experts at -2
    return t


def test_parameter_counts_and_size_label_match_converter_writer():
    lists = [
        [("token_embd.weight", [VOCAB, HIDDEN]), ("output.weight", [VOCAB, HIDDEN])],
        [("token_embd.weight", [7_000_000, 1000])],        # "7.0B"
        [("token_embd.weight", [999_999])],                # just under 1M: "1000K"
        [("token_embd.weight", [1_000_001])],
        [("a.weight", [123]), ("b.weight", [45, 6])],
        [("token_embd.weight", [2_000_000_000, 600])],     # "1.2T"
        _expert_tensors(8),
        _expert_tensors(4, bias=True),
        _expert_tensors(8) + [("blk.1.ffn_gate_exps.weight", [16, FF, HIDDEN])],  # varying expert counts
    ]
    theirs = gguf_py_oracle(tensors=lists)["counts"]
    for tensors, (counts, label) in zip(lists, theirs):
        ours = parameter_counts((name, tuple(shape)) for name, shape in tensors)
        assert list(ours) == counts, tensors
        assert size_label(*ours) == label, tensors


def test_parameter_counts_refuses_an_empty_expert_dim():
    with pytest.raises(ValueError, match="ffn_up_exps"):
        parameter_counts([("blk.0.ffn_up_exps.weight", (0, 4, 4))])


FULL_CARD = """\
---
license: llama3.1
license_name: llama3.1-community
license_link: https://llama.meta.com/llama3_1/license/
base_model:
- meta-llama/Llama-3.1-8B
- https://huggingface.co/mistralai/Mistral-7B-v0.3
- https://example.com/some/model
- name: Hand Written
  organization: ACME
  repo_url: https://example.com/acme
- 12
tags:
- facebook
- llama-3
pipeline_tag: text-generation
language:
- en
- de
- no
datasets:
- HuggingFaceH4/ultrachat_200k
- https://huggingface.co/datasets/allenai/c4
- https://huggingface.co/Open-Orca/OpenOrca
author: Meta
model_creator: Someone Else
description: A tiny test model
model_type: llama
url: https://example.com/paper
doi: 10.1234/abcd
---

# Title

Body text --- with dashes.
"""

CARD_VARIANTS = {
    "full": FULL_CARD,
    "license_list": "---\nlicense:\n- apache-2.0\n- mit\nbase_model: Qwen/Qwen2.5-0.5B\nlanguage: fr\n"
                    "datasets: tatsu-lab/alpaca\ntags: 5\n---\ntext\n",
    "nulls_and_falsy": "---\nname:\nmodel_name: Named In Card\nversion: 0\nlicense: no\nbase_model:\n"
                       "datasets: []\ntags:\nsize_label: 9000B\nfinetune: ''\n---\n",
    "tabs": "---\nlicense: mit\ntags:\n\t- a\n\t- b\n---\n",
    "not_a_mapping": "---\n- just\n- a list\n---\n",
    "no_front_matter": "# Just a readme\n\nlicense: mit\n",
    "unclosed": "---\nlicense: bsd\ntags: [x, y]\n",
    "crlf": "---\r\nlicense: gpl\r\nlanguage:\r\n- no\r\n- en\r\n---\r\n",
    "source_ids": "---\nmodel_name: Card Name\nmodel_version: v9\nmodel_organization: Org\n"
                  "model_basename: Base\nmodel_finetune: ft\nmodel_size_label: 3x1M\nmodel_url: https://u\n"
                  "model_doi: d\nmodel_uuid: u-u\nmodel_repo_url: https://r\nmodel_description: desc\n---\n",
    "base_models_key": "---\nbase_models: [a/b-7B-v1, c]\nbase_model_sources: ignored/because-later\n"
                       "dataset_sources: [org/set-v2]\n---\n",
    "bool_tags": "---\ntags: [true, false]\nlanguages: [1.5, 2.5]\n---\n",
    # the converter fails on these: we must refuse them, with a clear message
    "bad_version": "---\nversion: 1.0\n---\n",
    "bad_mixed_tags": "---\ntags: [a, 1]\n---\n",
    "bad_yaml": "---\nlicense: [unclosed\n---\n",
    "bad_license_list": "---\nlicense: [mit, 3]\n---\n",
    "bad_entry_value": "---\nbase_model:\n- name: 7\n---\n",
}

GENERATION_VARIANTS = {
    "sampling": {"temperature": 0.6, "top_p": 0.9, "top_k": 50, "repetition_penalty": 1.1, "do_sample": True,
                 "min_p": 0.05, "max_length": 4096},
    "llama_cpp_names": {"sequence": "edkypmxt", "penalty_repeat": None, "repetition_penalty": 1.3,
                        "penalty_last_n": 64, "mirostat": 2, "mirostat_tau": 5, "mirostat_eta": 0.1,
                        "xtc_probability": 0.5, "xtc_threshold": 0.1, "top_k": True},
    "invalid_json": "{not json",
    "empty_list": "[]",
    "bad_top_k": {"top_k": 40.0},
    "bad_list": "[1, 2]",
}

# (directory name, README variant, generation_config variant, config.json extras, model_name)
DIR_CASES = [
    ("Meta-Llama-3.1-8B-Instruct", "full", "sampling", {}, None),
    ("mistral-7b-v0.3", None, None, {}, None),
    ("tiny", None, None, {}, None),
    ("Qwen2.5-0.5B-Chat-GGUF-v2", "license_list", "llama_cpp_names", {}, None),
    ("tiny-1M-v2", "nulls_and_falsy", "invalid_json", {}, None),
    ("tiny", "tabs", "empty_list", {"_name_or_path": "acme/Tiny-Llama-1M-instruct-v2"}, None),
    ("tiny", "not_a_mapping", None, {"_name_or_path": "/home/someone/models/Llama-7B"}, None),
    ("tiny", "no_front_matter", None, {"_name_or_path": ""}, None),
    ("Some-Model-7B", "unclosed", None, {"_name_or_path": "just-a-name-v3"}, "Given Name"),
    ("crlf-model", "crlf", None, {}, ""),
    ("x", "source_ids", None, {}, None),
    ("y-2B", "base_models_key", None, {}, None),
    ("z", "bool_tags", None, {}, None),
    ("tiny", "bad_version", None, {}, None),
    ("tiny", "bad_mixed_tags", None, {}, None),
    ("tiny", "bad_yaml", None, {}, None),
    ("tiny", "bad_license_list", None, {}, None),
    ("tiny", "bad_entry_value", None, {}, None),
    ("tiny", None, "bad_top_k", {}, None),
    ("tiny", None, "bad_list", {}, None),
]
COUNT_VARIANTS = [(TINY_TOTAL, TINY_TOTAL, 0, 0), (46_702_792_704, 1_604_063_232, 5_637_144_576, 8), (0, 0, 0, 0)]


def test_general_kv_matches_converter_metadata(tmp_path):
    dirs, requests = [], []
    for i, (name, card, gen, cfg, model_name) in enumerate(DIR_CASES):
        d = make_checkpoint(tmp_path / str(i), name, readme=CARD_VARIANTS.get(card),
                            generation=GENERATION_VARIANTS.get(gen), config_extra=cfg, weights=False)
        for counts in COUNT_VARIANTS if i < 5 else COUNT_VARIANTS[:1]:
            dirs.append((d, counts, model_name, (name, card, gen, cfg, model_name)))
            requests.append({"path": str(d), "counts": list(counts), "model_name": model_name})
    theirs = gguf_py_oracle(dirs=requests)["dirs"]
    assert len(theirs) == len(dirs)
    refused = 0
    for (d, counts, model_name, case), expected in zip(dirs, theirs):
        total, shared, expert, n_expert = counts
        kwargs = dict(total_params=total, shared_params=shared, expert_params=expert, expert_count=n_expert,
                      model_name=model_name)
        if "error" in expected:
            with pytest.raises(MetadataError) as info:
                general_kv(d, **kwargs)
            assert str(d) in str(info.value), (case, str(info.value))
            refused += 1
            continue
        assert ours_raw(general_kv(d, **kwargs)) == expected["kvs"], (case, counts)
    assert refused == 7  # every bad_* variant is one the converter fails on too


def test_nested_lists_are_refused(tmp_path):
    # The converter would write an array of arrays, which llama.cpp's GGUF reader cannot load.
    d = make_checkpoint(tmp_path, "nested", readme="---\ntags:\n- [a, b]\n---\n", weights=False)
    with pytest.raises(MetadataError, match="nested"):
        general_kv(d, total_params=1, shared_params=1, expert_params=0, expert_count=0)


# --------------------------------------------------------------------------------------------------
# Oracle 2: full converter runs (about 6 s each), cached for the session

E2E = {
    "llama31": dict(dirname="Meta-Llama-3.1-8B-Instruct", readme=FULL_CARD,
                    generation=GENERATION_VARIANTS["sampling"]),
    "mistral": dict(dirname="mistral-7b-v0.3"),
    "qwen": dict(dirname="Qwen2.5-0.5B-Chat-GGUF-v2", generation=GENERATION_VARIANTS["llama_cpp_names"]),
    "tiny": dict(dirname="tiny", readme=CARD_VARIANTS["license_list"],
                 config_extra={"_name_or_path": "acme/Tiny-Llama-1M-instruct-v2"}),
    "moe": dict(dirname="tiny-moe", moe_experts=4),
}


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    cache: dict[str, tuple[Path, Path]] = {}

    def get(case: str) -> tuple[Path, Path]:
        if case not in cache:
            root = tmp_path_factory.mktemp(case)
            spec = dict(E2E[case])
            d = make_checkpoint(root, spec.pop("dirname"), **spec)
            cache[case] = d, oracle.convert(d, root / "out.gguf", "f32")
        return cache[case]

    return get


def _field_bytes(field) -> bytes:
    return b"".join(bytes(p.tobytes()) for p in field.parts)


@pytest.mark.parametrize("case", list(E2E))
def test_general_kv_equals_converted_file(converted, case):
    model_dir, out = converted(case)
    reader = GGUFReader(out)
    fields = [f for f in reader.fields.values() if not f.name.startswith("GGUF.")]  # header pseudo-fields
    assert [f.name for f in fields[:2]] == ["general.architecture", "general.type"]

    counts = parameter_counts((t.name, tuple(reversed(t.shape.tolist()))) for t in reader.tensors)
    ours = general_kv(model_dir, total_params=counts[0], shared_params=counts[1], expert_params=counts[2],
                      expert_count=counts[3])
    theirs = fields[2:2 + len(ours)]
    assert [f.name for f in theirs] == [kv.key for kv in ours]
    assert [_field_bytes(f) for f in theirs] == [encode_kv(kv) for kv in ours]
    # what follows is the family's hyperparameters, not more general.* identity entries
    following = fields[2 + len(ours)].name
    assert not following.startswith("general.") or following in ("general.quantization_version",
                                                                 "general.file_type"), following


def test_size_label_from_tensors_matches_converted_file(converted):
    # "tiny-moe" names no size, so the converter's label comes from its tensor counts, experts included.
    _, out = converted("moe")
    reader = GGUFReader(out)
    counts = parameter_counts((t.name, tuple(reversed(t.shape.tolist()))) for t in reader.tensors)
    assert counts[3] == 4 and counts[2] > 0
    assert size_label(*counts) == reader.fields["general.size_label"].contents()
