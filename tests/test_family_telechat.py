"""TeleChat2 (TelechatForCausalLM / TeleChat2ForCausalLM, remote code -> llama.cpp llama under hfview's own mapping).

No byte oracle: the pinned converter has no class for TeleChat (checked below), so docs/families.md's bytes column says
n/a. Logits oracle: transformers has no TeleChat class either; the release's modeling code (github.com/Tele-AI/
TeleChat2 at cd9287f3, model/115B/modeling_telechat.py and llama_factory_training/modeling_telechat2.py) computes
transformers' LlamaForCausalLM: MixedFusedRMSNorm (x * rsqrt(mean(x^2) + eps) * weight, Llama's RMSNorm) before
attention and MLP and after the last block; `query` (no bias) viewed as [n_head, head width]; `key_value` (no bias)
viewed as [num_key_value_heads, 2 * head width] and split on its last axis into k and v; rotate_half rotary over
the whole head (Llama's), at base 10000 * alpha^(d / (d - 2)) with alpha = 2^ceil(log2(L / base_seqlen) + 1) - 1
(at least 1) and L = max(length, training_seqlen), and mscale 1 while L = training_seqlen; k and v expanded over
consecutive query heads (repeat_kv); scores times 1/sqrt(head width) (inv_norm_factor), causal softmax; `dense`
with a bias; down_proj(silu(gate_proj(x)) * up_proj(x)) with a bias on down_proj only; residuals around both
(apply_residual_connection_post_layernorm false); ln_f; lm_head without bias. So a LlamaForCausalLM twin of the
fixture (key_value split as the code splits it, q and k kept in rotate-half order, zero biases where TeleChat has
none, rope_theta from the formula above) run by transformers is the reference for llama.cpp fed from the view.
The code rounds its cos/sin tables to float16; the twin does not (that rounding is the release's, not the view's).
"""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from family_oracle import PROMPT, assert_converter_has_no_class, nmse, twin_logits_test
from family_variants import assert_refused, variant
from released_config import DATA, config_path_kv, released_configs

FIXTURES = ["telechat", "telechat-32k"]


def _rope_theta(c: dict) -> float:
    """The release's RotaryEmbedding.forward base at any length up to training_seqlen."""
    d = c["hidden_size"] // c["n_head"]
    seq_len = c["training_seqlen"]  # max(length, training_seqlen) for every prompt this short
    alpha = max(2 ** math.ceil(math.log(seq_len / c["base_seqlen"], 2) + 1) - 1, 1)
    return 10000 * alpha ** (d / (d - 2))


def llama_twin(src: Path, out: Path) -> Path:
    """The TeleChat checkpoint `src` as a LlamaForCausalLM checkpoint in `out` (same values)."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import LlamaConfig

    c = json.loads((src / "config.json").read_text())
    hidden, n_head = c["hidden_size"], c["n_head"]
    n_kv, d = c.get("num_key_value_heads") or n_head, hidden // n_head
    LlamaConfig(vocab_size=c["vocab_size"], hidden_size=hidden, intermediate_size=c["ffn_hidden_size"],
                num_hidden_layers=c["n_layer"], num_attention_heads=n_head, num_key_value_heads=n_kv,
                rms_norm_eps=c["layer_norm_epsilon"], max_position_embeddings=c["training_seqlen"],
                tie_word_embeddings=c["tie_word_embeddings"], attention_bias=True, mlp_bias=True,
                rope_parameters={"rope_type": "default", "rope_theta": _rope_theta(c)}).save_pretrained(out)
    renames = {"transformer.word_embeddings.": "model.embed_tokens.", "transformer.ln_f.": "model.norm.",
               "transformer.h.": "model.layers.", ".self_attention.query.": ".self_attn.q_proj.",
               ".self_attention.dense.": ".self_attn.o_proj."}
    tensors = {}
    for name, t in load_file(src / "model.safetensors").items():
        t = t.to(torch.float32)
        for old, new in renames.items():
            name = name.replace(old, new)
        if ".self_attention.key_value." in name:
            base = name.split(".self_attention.key_value.")[0]
            per_head = t.reshape(n_kv, 2 * d, hidden)  # the code's view(..., n_kv, 2 * head width) of the output
            k, v = torch.split(per_head, d, dim=1)
            tensors[f"{base}.self_attn.k_proj.weight"] = k.reshape(n_kv * d, hidden).contiguous()
            tensors[f"{base}.self_attn.v_proj.weight"] = v.reshape(n_kv * d, hidden).contiguous()
            continue
        tensors[name] = t
    for i in range(c["n_layer"]):  # the biases TeleChat's projections do not have
        p = f"model.layers.{i}."
        for part, width in (("self_attn.q_proj", hidden), ("self_attn.k_proj", n_kv * d),
                            ("self_attn.v_proj", n_kv * d), ("mlp.gate_proj", c["ffn_hidden_size"]),
                            ("mlp.up_proj", c["ffn_hidden_size"])):
            tensors[f"{p}{part}.bias"] = torch.zeros(width)
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    return out


test_logits = twin_logits_test("telechat", FIXTURES, llama_twin, "Llama")


def test_the_pinned_converter_has_no_class_for_telechat():
    """The premise of the missing byte oracle: no converter module registers a TeleChat architecture."""
    assert_converter_has_no_class("telechat")


@pytest.mark.parametrize("outtype", ["f32", "auto"])
def test_export_is_a_file_llama_cpp_loads_with_the_views_logits(outtype, checkpoint, tmp_path):
    """`hfview export` writes the view as a file; llama.cpp loads that file and computes the view's logits."""
    from hfview import HfCheckpoint
    from hfview.export import export
    from hfview.runner.stream import StreamModel

    path = export(HfCheckpoint(checkpoint("telechat"), outtype), tmp_path / "telechat.gguf")

    class _File:
        size = path.stat().st_size

        def read(self, offset, n):
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read(n)

    with StreamModel(HfCheckpoint(checkpoint("telechat"), outtype), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        view = m.logits(ids)
    with StreamModel(_File(), n_ctx=64) as m:
        from_file = m.logits(ids)
    assert np.array_equal(view, from_file)


def test_inspect_names_the_mapping_and_the_rotary_base(checkpoint):
    from hfview import HfCheckpoint
    from hfview.inspect import describe

    info = describe(HfCheckpoint(checkpoint("telechat-32k"), "f32"))
    assert info["architecture"] == "llama" and info["family"] == "telechat"
    assert "no class" in info["no_converter"]
    kv = {k["key"]: k["value"] for k in info["kv"]}
    assert kv["llama.context_length"] == 32768
    assert kv["llama.rope.freq_base"] == pytest.approx(10000 * 7 ** (16 / 14), rel=1e-6)  # alpha 7, width 16
    views = {t["name"]: t["view"] for t in info["tensors"]}
    assert "rotation pairs" in views["blk.0.attn_k.weight"] and "v rows" in views["blk.0.attn_v.weight"]


def test_tied_embeddings_leave_out_the_stored_lm_head(checkpoint, tmp_path):
    from hfview import HfCheckpoint

    tied = HfCheckpoint(variant(checkpoint("telechat"), tmp_path / "tied", tie_word_embeddings=True), "f32")
    assert "output.weight" not in {t.name for t in tied.tensors}


@pytest.mark.parametrize("changes, message", [
    (dict(base_seqlen=None), "base_seqlen is missing"),
    (dict(embed_layernorm=True), "embed_layernorm True"),
    (dict(apply_residual_connection_post_layernorm=True), "apply_residual_connection_post_layernorm"),
    (dict(semi_causal=True), "semi_causal"),
    (dict(rope_scaling={"type": "dynamic", "factor": 4.0}), "rope_scaling"),  # vLLM's edit; the code reads none
    (dict(num_key_value_heads=3), "num_key_value_heads"),
    (dict(n_head=5), "do not split"),
])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint("telechat"), tmp_path, message, **changes)


def test_a_key_value_of_the_wrong_height_is_refused(checkpoint, tmp_path):
    """num_key_value_heads 4 divides n_head 4, but the stored key_value has rows for 2 KV heads."""
    from hfview import HfCheckpoint
    from hfview.errors import HfviewError

    with pytest.raises(HfviewError, match="key_value"):
        HfCheckpoint(variant(checkpoint("telechat"), tmp_path / "v", num_key_value_heads=4), "f32").tensors


# released configs: TeleChat 1 states no base_seqlen (its modeling code fixes it), so its rotary base is unknown
# (measured below: the converter has no class for it, and a guessed base_seqlen runs another function)
REFUSED = {p: "base_seqlen is missing" for p in ("Tele-AI__TeleChat-7B", "Tele-AI__TeleChat-12B",
                                                  "Tele-AI__TeleChat-12B-V2")}


def test_the_pinned_converter_refuses_telechat_1(checkpoint, tmp_path):
    """Issue 32's rule, first half: run the pinned converter on TeleChat 1's layout (TeleChat2's block, config.json
    without base_seqlen, as Tele-AI/Telechat's models/7B, 12B and 12B-V2 state it). It has no class to convert it
    with; these are its words."""
    import oracle
    from family_variants import DROP

    tc1 = variant(checkpoint("telechat"), tmp_path / "telechat-1", base_seqlen=DROP)
    with pytest.raises(oracle.ConverterFailed, match="Model TelechatForCausalLM is not supported"):
        oracle.convert(tc1, tmp_path / "tc1.gguf", "f32")


def test_telechat_1_with_a_guessed_base_seqlen_runs_another_function(checkpoint, tmp_path):
    """Issue 32's rule, second half: no context cap makes base_seqlen irrelevant. TeleChat 1's code (models/7B/
    modeling_telechat.py: get_ntk_alpha's log2(L / 4096); 12B's: / 8192) takes L = max(length, training_seqlen), never
    below training_seqlen, so its rotary base at every length up to training_seqlen is 10000 * alpha^(d / (d - 2))
    with alpha from training_seqlen / base_seqlen: 3 for TeleChat-7B, 1 for TeleChat-12B, whose config.json files
    differ in nothing that says which. The release's function (TeleChat-7B's 4096, the Llama twin at that base) is
    what llama.cpp computes from the view given 4096; given the other value a TeleChat 1 code fixes (8192, which is
    also training_seqlen) it misses by NMSE ~6e-4 over 128 tokens on this fixture (measured), past the bar."""
    import torch
    import transformers

    from family_oracle import NMSE_BAR
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    src = checkpoint("telechat")
    assert json.loads((src / "config.json").read_text())["training_seqlen"] == 8192
    twin = llama_twin(variant(src, tmp_path / "b4096", base_seqlen=4096), tmp_path / "twin")
    model = transformers.AutoModelForCausalLM.from_pretrained(twin, dtype=torch.float32)
    values = {}
    for base_seqlen in (4096, 8192):
        with StreamModel(HfCheckpoint(variant(src, tmp_path / f"v{base_seqlen}", base_seqlen=base_seqlen), "f32"),
                         n_ctx=256) as m:
            ids = m.tokenize(PROMPT * 6)[:128]
            assert len(ids) == 128
            ours = m.logits(ids)
        with torch.no_grad():
            ref = model(torch.tensor([ids])).logits[0].numpy()
        values[base_seqlen] = nmse(ours, ref)
    print(f"TeleChat-7B's base_seqlen 4096: NMSE {values[4096]:.3e}; guessed 8192: NMSE {values[8192]:.3e}")
    assert values[4096] < NMSE_BAR < values[8192]


@pytest.mark.parametrize("path, base_seqlen, alpha", [("Tele-AI__TeleChat-7B", 4096, 3),
                                                      ("Tele-AI__TeleChat-12B", 8192, 1),
                                                      ("Tele-AI__TeleChat-12B-V2", 8192, 1)])
def test_telechat_1_configs_with_the_base_seqlen_their_code_fixes_are_read(path, base_seqlen, alpha, tmp_path):
    """base_seqlen is the one fact TeleChat 1's config.json files lack: stated as each release's code fixes it, the
    family reads them (rotary base 10000 * alpha^(128 / 126), context training_seqlen)."""
    released = json.loads((DATA / "telechat" / f"{path}.json").read_text())
    config = tmp_path / "telechat" / "c.json"
    config.parent.mkdir()
    config.write_text(json.dumps({**released, "base_seqlen": base_seqlen}))
    kv = config_path_kv(config)
    assert kv["llama.rope.freq_base"] == pytest.approx(10000 * alpha ** (128 / 126), rel=1e-7)
    assert kv["llama.context_length"] == released["training_seqlen"] == 8192
# TeleChat-52B: the FLM-2 lineage's layout (GPT-2 names, Conv1D c_attn, muP) under the same model_type, no
# architectures stated: its keys are not TeleChat2's, refused by the first of them
REFUSED["Tele-AI__TeleChat-52B"] = "config key 'activation_function'.*not one the telechat family knows"


@pytest.mark.parametrize("path", released_configs("telechat"), ids=lambda p: p.stem)
def test_released_config_is_accepted_or_refused_by_name(path: Path):
    from hfview.errors import ConfigError

    if path.stem in REFUSED:
        with pytest.raises(ConfigError, match=REFUSED[path.stem]):
            config_path_kv(path)
        return
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["llama.block_count"] == released["n_layer"]
    assert kv["llama.embedding_length"] == released["hidden_size"]
    assert kv["llama.feed_forward_length"] == released["ffn_hidden_size"]
    assert kv["llama.attention.head_count"] == released["n_head"]
    assert kv["llama.attention.head_count_kv"] == released["num_key_value_heads"]
    assert kv["llama.attention.layer_norm_rms_epsilon"] == released["layer_norm_epsilon"]
    assert kv["llama.context_length"] == released["training_seqlen"]
    assert kv["llama.rope.freq_base"] == 10000.0  # training_seqlen == base_seqlen: alpha 1


def test_telechat2_115b_kv():
    kv = config_path_kv(DATA / "telechat" / "Tele-AI__TeleChat2-115B.json")
    assert kv["llama.block_count"] == 96 and kv["llama.attention.head_count_kv"] == 8
    assert kv["llama.rope.dimension_count"] == 128 and kv["llama.vocab_size"] == 131072


def test_family_table_shows_no_byte_mark():
    """docs/families.md's family and coverage rows for telechat say n/a for bytes, never a mark without a byte
    oracle."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import family_table
    from hfview.coverage import route_for

    row = next(r for r in family_table.table().splitlines() if r.startswith("| telechat |"))
    assert row.split("|")[4].strip() == "n/a (no converter class)"
    cov = next(r for r in family_table.coverage_table().splitlines() if r.startswith("| telechat |"))
    assert "own mapping" in cov and "bytes n/a (no converter class)" in cov
    assert route_for("telechat").kind == "view" and "own mapping" in route_for("telechat").detail


def test_logits_within_the_bar_of_the_releases_float16_rotary_tables(checkpoint, tmp_path_factory):
    """The release's RotaryEmbedding rounds its cos/sin tables to float16 (`.half()`) before q and k (float32 at
    float32) are rotated; llama.cpp computes them in float32. The twin with its tables so rounded still agrees with
    llama.cpp fed from the view under the bar: the rounding is the release's arithmetic, not a different function."""
    import torch
    import transformers

    from family_oracle import NMSE_BAR
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    path = checkpoint("telechat")
    twin = llama_twin(path, tmp_path_factory.mktemp("telechat-half-rotary"))
    with StreamModel(HfCheckpoint(path, "f32"), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        ours = m.logits(ids)
    model = transformers.AutoModelForCausalLM.from_pretrained(twin, dtype=torch.float32)
    rotary = model.model.rotary_emb
    plain = rotary.forward
    rotary.forward = lambda x, position_ids: tuple(t.half().float() for t in plain(x, position_ids))
    with torch.no_grad():
        ref = model(torch.tensor([ids])).logits[0].numpy()
    value = nmse(ours, ref)
    print(f"telechat f32 vs the twin with float16 rotary tables: NMSE {value:.3e}")
    assert value < NMSE_BAR


def test_cli_export_says_there_is_no_converter_file_to_match(checkpoint, tmp_path):
    from click.testing import CliRunner

    from hfview.cli import main

    res = CliRunner().invoke(main, ["export", str(checkpoint("telechat")), str(tmp_path / "t.gguf"), "--outtype",
                                    "f16", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "no converter class: the pinned converter has no class for" in res.output
    assert (tmp_path / "t.gguf").is_file()


@pytest.mark.parametrize("training, base, alpha", [(8192, 8192, 1), (8192, 4096, 3), (32768, 8192, 7),
                                                    (4096, 8192, 1), (12000, 8192, 3)])
def test_rotary_base_follows_the_codes_ntk_factor(training, base, alpha, tmp_path):
    """alpha = max(2^ceil(log2(training_seqlen / base_seqlen) + 1) - 1, 1); base 10000 * alpha^(d / (d - 2))."""
    released = json.loads((DATA / "telechat" / "Tele-AI__TeleChat2-115B.json").read_text())
    path = tmp_path / "telechat" / "c.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**released, "training_seqlen": training, "base_seqlen": base}))
    kv = config_path_kv(path)
    assert kv["llama.rope.freq_base"] == pytest.approx(10000 * alpha ** (128 / 126), rel=1e-7)
    assert kv["llama.context_length"] == training
