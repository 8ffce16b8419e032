"""TeleChat3 (Telechat3ForCausalLM, remote code -> llama.cpp llama under hfview's own mapping).

No byte oracle: the pinned converter has no class for TeleChat3 (checked below), so docs/families.md's bytes column says
n/a. Logits oracle: transformers 5.24 has no TeleChat3 class. The release's modeling code, as its public copy states
it (github.com/wenet-e2e/west at 1a55a713, west/models/goat_slm/modeling_telechat3.py: Tele-AI's TeleChat3 modeling
file carried by GOAT-SLM, whose speech model wraps a TeleChat3), computes transformers' LlamaForCausalLM for a
released 36B layout: Telechat3RMSNorm (x * rsqrt(mean(x^2) + eps) * weight) before attention and MLP and at the end,
q/k/v/o_proj without biases (attention_bias false), rotate_half rotary over the whole head (cos and sin times the
rope's attention_scaling), repeat_kv over consecutive query heads, scores times head_dim^-0.5, causal softmax in
float32, down_proj(silu(gate_proj(x)) * up_proj(x)) (mlp_bias false), residuals around both, lm_head untied.
(That copy also carries GOAT-SLM's own embedding_size factorisation and grouped layers, which no TeleChat3 release
states: the family refuses their keys by name.) Its rotary is _compute_telechat_yarn_parameters, ROPE_INIT_FUNCTIONS
["telechat3-yarn"]: transformers' YaRN with the attention factor 0.07 * ln(factor) + 1. So a LlamaForCausalLM twin of
the fixture over the same safetensors, with rope_parameters yarn at the release's factor, original length and that
attention_factor, run by transformers, is the reference for llama.cpp fed from the view; test_the_twins_rotary_is_
the_releases shows its rotary tables are the release's formula's.
"""
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from family_oracle import NMSE_BAR, PROMPT, assert_converter_has_no_class, nmse, twin_logits_test
from family_variants import assert_refused, variant
from released_config import DATA, config_path_kv, released_configs

FIXTURES = ["telechat3", "telechat3-plain"]
# a text long enough to pass the fixture's original_max_position_embeddings (16) by far: 60 positions of 64
LONG_TEXT = " ".join([PROMPT] * 4)


def release_rotary(c: dict) -> tuple[np.ndarray, float]:
    """(inv_freq, attention_scaling) as the release's _compute_telechat_yarn_parameters computes them (float32 where
    it computes in float32), read off its public copy: the reference's own statement of the formula, written here
    from the config alone, independent of hfview's."""
    import torch
    rope = c["rope_scaling"]
    base, dim = c["rope_theta"], c["head_dim"]
    if "original_max_position_embeddings" in rope:
        original = rope["original_max_position_embeddings"]
        factor = c["max_position_embeddings"] / original
    else:
        original, factor = c["max_position_embeddings"], rope["factor"]

    def mscale(scale, m=1):
        return 1.0 if scale <= 1 else 0.07 * m * math.log(scale) + 1.0
    attention = rope.get("attention_factor")
    if attention is None:
        attention = mscale(factor, rope["mscale"]) / mscale(factor, rope["mscale_all_dim"]) \
            if rope.get("mscale") and rope.get("mscale_all_dim") else mscale(factor)
    beta_fast, beta_slow = rope.get("beta_fast") or 32, rope.get("beta_slow") or 1

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))
    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)
    extrapolation = 1 - ramp
    inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
    return inv_freq.numpy(), attention


def twin_rope(c: dict, slope: float = 0.07) -> dict:
    """rope_parameters of the LlamaConfig twin: transformers' yarn at the release's factor, original length and (at
    slope 0.07) its attention factor; slope 0.1 gives plain YaRN's (mlx-lm's reading of the type)."""
    rope = c.get("rope_scaling")
    if rope is None:
        return {"rope_type": "default", "rope_theta": c["rope_theta"]}
    original = rope.get("original_max_position_embeddings", c["max_position_embeddings"])
    factor = c["max_position_embeddings"] / original if "original_max_position_embeddings" in rope else rope["factor"]
    return {"rope_type": "yarn", "rope_theta": c["rope_theta"], "factor": factor,
            "original_max_position_embeddings": original, "attention_factor": slope * math.log(factor) + 1.0,
            "beta_fast": rope.get("beta_fast") or 32, "beta_slow": rope.get("beta_slow") or 1, "truncate": True}


def llama_twin(src: Path, out: Path, slope: float = 0.07, rope: dict | None = None) -> Path:
    """The TeleChat3 checkpoint `src` as a LlamaForCausalLM checkpoint in `out`: the same safetensors (TeleChat3
    stores Llama's names), a LlamaConfig of the same sizes and the release's rotary."""
    from transformers import LlamaConfig

    c = json.loads((src / "config.json").read_text())
    d = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    LlamaConfig(vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
                num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
                num_key_value_heads=c["num_key_value_heads"], head_dim=d, rms_norm_eps=c["rms_norm_eps"],
                max_position_embeddings=c["max_position_embeddings"], tie_word_embeddings=c["tie_word_embeddings"],
                attention_bias=False, mlp_bias=False,
                rope_parameters=rope or twin_rope(c, slope)).save_pretrained(out)
    shutil.copyfile(src / "model.safetensors", out / "model.safetensors")
    return out


test_logits = twin_logits_test("telechat3", FIXTURES, llama_twin, "Llama")


def _view_logits(path: Path, text: str, n: int, outtype: str = "f32") -> tuple[list[int], np.ndarray]:
    from hfview import HfCheckpoint
    from hfview.runner.stream import StreamModel

    with StreamModel(HfCheckpoint(path, outtype), n_ctx=64) as m:
        ids = m.tokenize(text)[:n]
        assert len(ids) == n
        return ids, m.logits(ids)


def _twin_logits(twin: Path, ids: list[int]) -> np.ndarray:
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(twin, dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


def test_the_twins_rotary_is_the_releases(checkpoint, tmp_path):
    """The twin's LlamaRotaryEmbedding (transformers' yarn at the twin's rope_parameters) has the inverse
    frequencies and the cos/sin scale the release's telechat3-yarn computes: the twin is the release's forward."""
    import torch
    import transformers

    path = checkpoint("telechat3")
    c = json.loads((path / "config.json").read_text())
    model = transformers.AutoModelForCausalLM.from_pretrained(llama_twin(path, tmp_path / "twin"), dtype=torch.float32)
    inv_freq, scale = release_rotary(c)
    assert np.allclose(model.model.rotary_emb.inv_freq.numpy(), inv_freq, rtol=1e-6, atol=0)
    assert model.model.rotary_emb.attention_scaling == pytest.approx(scale, rel=1e-12)
    assert scale == pytest.approx(0.07 * math.log(4) + 1)  # factor 64 / 16


def test_long_sequence_past_the_original_length(checkpoint, tmp_path):
    """Past original_max_position_embeddings (16), to position 59: llama.cpp fed from the view against the twin,
    where YaRN's interpolated frequencies matter (the same twin at plain rope, the same attention factor, differs)."""
    path = checkpoint("telechat3")
    c = json.loads((path / "config.json").read_text())
    ids, ours = _view_logits(path, LONG_TEXT, 60)
    ref = _twin_logits(llama_twin(path, tmp_path / "twin"), ids)
    value = nmse(ours, ref)
    print(f"telechat3 f32, 60 positions: NMSE {value:.3e} against its Llama twin")
    assert value < NMSE_BAR
    # the same twin with the frequencies unscaled (yarn at factor 1) and the same cos/sin scale: only YaRN's
    # interpolated frequencies differ, and they act with the distance
    unscaled = _twin_logits(llama_twin(path, tmp_path / "unscaled", rope=dict(twin_rope(c), factor=1.0)), ids)
    early, late = nmse(unscaled[:16], ref[:16]), nmse(unscaled[16:], ref[16:])
    print(f"unscaled vs telechat3-yarn frequencies: NMSE {early:.3e} before position 16, {late:.3e} from it")
    moved = late
    assert moved > 100 * NMSE_BAR


def test_the_attention_factor_is_0_07_not_yarns_0_1(checkpoint, tmp_path):
    """The release's 0.07 * ln(factor) + 1, not YaRN's 0.1 (mlx-lm's reading): the reference moves with the slope,
    and llama.cpp fed from the view sits on the release's side."""
    path = checkpoint("telechat3")
    ids, ours = _view_logits(path, PROMPT, 16)
    release = _twin_logits(llama_twin(path, tmp_path / "t007"), ids)
    yarn = _twin_logits(llama_twin(path, tmp_path / "t01", slope=0.1), ids)
    apart, ours_release, ours_yarn = nmse(yarn, release), nmse(ours, release), nmse(ours, yarn)
    print(f"0.1 vs 0.07 references: NMSE {apart:.3e}; view vs 0.07: {ours_release:.3e}; view vs 0.1: {ours_yarn:.3e}")
    assert apart > 10 * NMSE_BAR
    assert ours_release < NMSE_BAR < ours_yarn


def test_the_reference_is_causal(checkpoint, tmp_path):
    """The twin's logits at a position do not depend on later tokens (a comparison over two prompts' prefix)."""
    path = checkpoint("telechat3-plain")
    ids, _ = _view_logits(path, PROMPT, 16)
    twin = llama_twin(path, tmp_path / "twin")
    full, cut = _twin_logits(twin, ids), _twin_logits(twin, ids[:8] + ids[:8])
    assert np.allclose(full[:8], cut[:8], atol=1e-5) and not np.allclose(full[8:], cut[8:], atol=1e-3)


def test_the_pinned_converter_has_no_class_for_telechat3():
    """The premise of the missing byte oracle: no converter module registers a TeleChat3 architecture."""
    assert_converter_has_no_class("telechat3")


def test_inspect_names_the_mapping_and_the_rotary(checkpoint):
    from hfview import HfCheckpoint
    from hfview.inspect import describe

    info = describe(HfCheckpoint(checkpoint("telechat3"), "f32"))
    assert info["architecture"] == "llama" and info["family"] == "telechat3"
    assert "no class" in info["no_converter"]
    kv = {k["key"]: k["value"] for k in info["kv"]}
    assert kv["llama.rope.scaling.type"] == "yarn" and kv["llama.rope.scaling.factor"] == 4.0
    assert kv["llama.rope.scaling.original_context_length"] == 16 and kv["llama.context_length"] == 64
    assert kv["llama.rope.scaling.attn_factor"] == pytest.approx((0.07 * math.log(4) + 1) / (0.1 * math.log(4) + 1),
                                                                 rel=1e-6)
    views = {t["name"]: t["view"] for t in info["tensors"]}
    assert "rotation pairs over 1 heads" in views["blk.0.attn_k.weight"]
    assert "rotation pairs over 6 heads" in views["blk.0.attn_q.weight"]


def test_plain_rope_writes_no_scaling(checkpoint):
    from hfview import HfCheckpoint

    ckpt = HfCheckpoint(checkpoint("telechat3-plain"), "f32")
    keys = {kv.key: kv.value for kv in ckpt.kv}
    assert not any(k.startswith("llama.rope.scaling") for k in keys)
    assert keys["llama.rope.freq_base"] == 1000000.0 and keys["llama.rope.dimension_count"] == 16
    assert "output.weight" not in {t.name for t in ckpt.tensors}  # tied


def test_the_code_takes_the_factor_from_the_lengths(checkpoint, tmp_path):
    """The release's code interpolates by max_position_embeddings / original_max_position_embeddings when the latter
    is stated, by rope_scaling.factor over max_position_embeddings otherwise."""
    from hfview import HfCheckpoint

    no_original = {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 2.0, "rope_type": "telechat3-yarn",
                   "type": "telechat3-yarn"}
    ckpt = HfCheckpoint(variant(checkpoint("telechat3"), tmp_path / "v", rope_scaling=no_original), "f32")
    kv = {k.key: k.value for k in ckpt.kv}
    assert kv["llama.rope.scaling.factor"] == 2.0 and kv["llama.rope.scaling.original_context_length"] == 64
    assert kv["llama.rope.scaling.attn_factor"] == pytest.approx((0.07 * math.log(2) + 1) / (0.1 * math.log(2) + 1),
                                                                 rel=1e-6)


def test_truncate_true_is_what_the_code_computes(checkpoint, tmp_path):
    from hfview import HfCheckpoint

    base = json.loads((checkpoint("telechat3") / "config.json").read_text())["rope_scaling"]
    kv = {k.key: k.value for k in HfCheckpoint(variant(checkpoint("telechat3"), tmp_path / "t", rope_scaling=dict(
        base, truncate=True)), "f32").kv}
    assert kv["llama.rope.scaling.type"] == "yarn"


def test_mscale_pair_and_a_stated_attention_factor(checkpoint, tmp_path):
    from hfview import HfCheckpoint

    base = json.loads((checkpoint("telechat3") / "config.json").read_text())["rope_scaling"]
    pair = HfCheckpoint(variant(checkpoint("telechat3"), tmp_path / "m", rope_scaling=dict(
        base, mscale=0.5, mscale_all_dim=1.0)), "f32")
    want = (0.035 * math.log(4) + 1) / (0.07 * math.log(4) + 1) / (0.1 * math.log(4) + 1)
    assert {k.key: k.value for k in pair.kv}["llama.rope.scaling.attn_factor"] == pytest.approx(want, rel=1e-6)
    stated = HfCheckpoint(variant(checkpoint("telechat3"), tmp_path / "a", rope_scaling=dict(
        base, attention_factor=1.0)), "f32")
    assert {k.key: k.value for k in stated.kv}["llama.rope.scaling.attn_factor"] == \
        pytest.approx(1 / (0.1 * math.log(4) + 1), rel=1e-6)


_YARN = {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 4.0, "original_max_position_embeddings": 16,
         "rope_type": "telechat3-yarn", "type": "telechat3-yarn"}


@pytest.mark.parametrize("changes, message", [
    (dict(attention_bias=True), "'attention_bias' is true"),
    (dict(mlp_bias=True), "'mlp_bias' is true"),
    (dict(embedding_size=48), "config key 'embedding_size'"),  # GOAT-SLM's factorised embedding
    (dict(num_hidden_layer_groups=1), "config key 'num_hidden_layer_groups'"),
    (dict(head_dim=32), "head_dim 32 is not hidden_size / num_attention_heads"),
    (dict(num_key_value_heads=4), "is not a multiple of num_key_value_heads"),
    (dict(hidden_act="gelu"), "hidden_act 'gelu'"),
    (dict(rope_scaling=dict(_YARN, rope_type="yarn", type="yarn")), "rope_type 'yarn'"),
    (dict(rope_scaling=dict(_YARN, beta_fast=16.0)), "beta_fast 16.0"),
    (dict(rope_scaling=dict(_YARN, truncate=False)), "rope_scaling truncate False"),
    (dict(rope_scaling=dict(_YARN, attn_factor=1.2)), "rope_scaling key 'attn_factor'"),  # vLLM's name, not read
    (dict(rope_scaling=dict(_YARN, factor=8.0)), "rope_scaling factor 8 differs"),
    (dict(rope_scaling=dict(_YARN, original_max_position_embeddings=64)), "factor 1"),
    (dict(rope_scaling=dict(_YARN, type="dynamic")), "states type 'dynamic'"),
])
def test_refused(changes, message, checkpoint, tmp_path):
    assert_refused(checkpoint("telechat3"), tmp_path, message, **changes)


def test_a_stand_in_vocabulary_is_read_as_sentencepiece(checkpoint):
    from hfview import HfCheckpoint

    kv = {k.key: k.value for k in HfCheckpoint(checkpoint("telechat3"), "f32").kv}
    assert kv["tokenizer.ggml.model"] == "llama" and kv["tokenizer.ggml.add_bos_token"] is False


def test_missing_tokenizer_model_is_refused_by_name(checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import HfviewError

    copy = tmp_path / "c"
    shutil.copytree(checkpoint("telechat3"), copy)
    (copy / "tokenizer.model").unlink()
    with pytest.raises(HfviewError, match="tokenizer.model is missing"):
        HfCheckpoint(copy, "f32").kv


# released configs: mlx-community's 4-bit conversion of TeleChat3-36B-Thinking states MLX's affine quantization
REFUSED = {"mlx-community__Telechat3-36B-Thinking-4bit": "quantized checkpoints are unsupported"}


@pytest.mark.parametrize("path", released_configs("telechat3"), ids=lambda p: p.stem)
def test_released_config_is_refused_by_name(path: Path):
    from hfview.errors import HfviewError

    with pytest.raises(HfviewError, match=REFUSED[path.stem]):
        config_path_kv(path)


def test_telechat3_36b_kv(tmp_path):
    """TeleChat3-36B-Thinking's own config.json: mlx-community's copy without the `quantization` mlx-lm adds."""
    quoted = json.loads((DATA / "telechat3" / "mlx-community__Telechat3-36B-Thinking-4bit.json").read_text())
    quoted.pop("quantization")
    path = tmp_path / "telechat3" / "Tele-AI__TeleChat3-36B-Thinking.json"
    path.parent.mkdir()
    path.write_text(json.dumps(quoted))
    kv = config_path_kv(path)
    assert kv["llama.block_count"] == 64 and kv["llama.attention.head_count"] == 48
    assert kv["llama.attention.head_count_kv"] == 8 and kv["llama.feed_forward_length"] == 24576
    assert kv["llama.rope.dimension_count"] == 128 and kv["llama.vocab_size"] == 131072
    assert kv["llama.context_length"] == 32768 and kv["llama.rope.freq_base"] == 1000000.0
    assert kv["llama.rope.scaling.factor"] == 4.0 and kv["llama.rope.scaling.original_context_length"] == 8192
    assert kv["llama.rope.scaling.attn_factor"] == pytest.approx((0.07 * math.log(4) + 1) / (0.1 * math.log(4) + 1),
                                                                 rel=1e-6)


def test_family_table_shows_no_byte_mark():
    """docs/families.md's family and coverage rows for telechat3 say n/a for bytes, never a mark without a
    byte oracle."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import family_table
    from hfview.coverage import route_for

    row = next(r for r in family_table.table().splitlines() if r.startswith("| telechat3 |"))
    assert row.split("|")[4].strip() == "n/a (no converter class)"
    assert route_for("telechat3").kind == "view" and "own mapping" in route_for("telechat3").detail


def test_export_is_a_file_llama_cpp_loads_with_the_views_logits(checkpoint, tmp_path):
    """`hfview export` writes the view as a file (no converter file to compare it with); llama.cpp loads that file
    and computes the view's logits."""
    from hfview import HfCheckpoint
    from hfview.export import export
    from hfview.runner.stream import StreamModel

    path = export(HfCheckpoint(checkpoint("telechat3"), "f16"), tmp_path / "telechat3.gguf")

    class _File:
        size = path.stat().st_size

        def read(self, offset, n):
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read(n)

    with StreamModel(HfCheckpoint(checkpoint("telechat3"), "f16"), n_ctx=64) as m:
        ids = m.tokenize(PROMPT)[:16]
        view = m.logits(ids)
    with StreamModel(_File(), n_ctx=64) as m:
        from_file = m.logits(ids)
    assert np.array_equal(view, from_file)
