"""Released config.json files of public models (tests/data/released_configs/<family>/, sources in each
directory's SOURCES.md), each run through the config path HfCheckpoint runs before it opens a shard: the
architecture gate, the quantized refusal, the key check, the values' checks, the config class's defaults, the
family's refusals, its hyperparameter KV (tests/released_config.py). Each is accepted, or refused for the reason REFUSED names. And the key check's value-awareness: a flag in its
off position is harmless, the same flag on is refused by name with its value."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from hfview import families
from hfview.config import ANY, COMMON_HARMLESS, check_keys, class_defaults, merge_text_config, read_as, read_config
from hfview.config_values import layer_count
from hfview.errors import ConfigError, HfviewError
from released_config import DATA, config_path_kv, released_configs

BY_NAME = {f.name: f for f in families.FAMILIES}
FAMILIES = list(BY_NAME)
CONFIGS = [p.relative_to(DATA).as_posix() for family in FAMILIES for p in released_configs(family)]

# file -> (what the refusal says, why that refusal is right)
REFUSED: dict[str, tuple[str, str]] = {
    # (Falcon-7B's and Falcon-40B's first, remote-code revisions, model_type RefinedWebModel / RefinedWeb, are read:
    # the converter registers RWForCausalLM for its Falcon class; tests/test_family_falcon.py's falcon-rw-* fixtures)
    "mpt/replit__replit-code-v1_5-3b.json": (
        "attn_config.attn_type 'grouped_query_attention': the converter fails on it",
        "grouped-query MPT: the converter asks transformers' MptConfig for the tokenizer class, which accepts only "
        "multihead_attention / multiquery_attention, and its SentencePiece fallback finds no tokenizer.model "
        "(tests/test_converter_refusals.py measures it on the mpt fixture with replit's attention)"),
}

# Families with fewer than three collected, and why. For most the Hub publishes more, but the search reaches
# only copies kept in GitHub repositories (SOURCES.md), and for these it found fewer than three.
_UNREACHED = "fewer than three copies of released config.json files in the repositories the search reaches"
FEWER: dict[str, str] = {
    "internlm3": "one released text model (InternLM3-8B-Instruct)",
    "smollm3": "two released models (SmolLM3-3B, SmolLM3-3B-Base); one copy reached",
    **dict.fromkeys((
        "apertus", "arcee", "bloom", "cohere", "cohere2", "ernie4_5", "exaone", "exaone4", "gemma",
        "glm", "glm4", "gpt_bigcode", "granite", "granite_swa", "granitemoe",
        "hunyuan_v1_dense", "internlm2", "iquestcoder", "jais2", "lfm2", "mamba", "mamba2", "minicpm",
        "mistral_format", "mpt", "nemotron", "olmo", "olmo2", "olmoe", "orion", "phi", "qwen2_moe", "seed_oss",
        "stablelm", "starcoder2",
    ), _UNREACHED),
    **dict.fromkeys(("jamba", "granitemoehybrid", "falcon_h1"), _UNREACHED),
    # mixtures, wave 2a part B
    "minimax_m2": "MiniMax-M2, M2.1, M2.5 and M2.7 are released in FP8 only (refused as quantized before download); "
                  "no copy of a config.json file reached, only copies quoted in documents",
    "llama4": "Llama-4-Scout and Maverick are gated on the Hub; no copy of their config.json files reached, only "
              "fragments quoted in code and documents",
    "granitemoe_swa": "no released config.json reached (transformers names ibm-granite/granite-swash-3b-a600m; the "
                      "search finds only test configs)",
    "hunyuan_v1_moe": "one released model (Hunyuan-A13B, Instruct and Pretrain share its config); one copy reached",
}
# mixtures, part A
FEWER.update(dict.fromkeys(("phimoe", "dbrx", "gpt_oss", "ernie4_5_moe"), _UNREACHED))
FEWER["deepseek_v4"] = ("two copies reached (DeepSeek-V4-Flash's and -Pro's, in aiconfigurator); the -Base releases' "
                       "only as transcriptions inside other projects' code")
# latent attention and GLM mixtures: zai-org publishes on the Hub only; beside GLM-4.5's copy in rtp-llm's
# test data, the search reached printed configs (a training tool's log of Glm4MoeConfig) and copies quoted inside
# documents
FEWER["glm4_moe"] = ("one copy reached (GLM-4.5's, in rtp-llm's test data); GLM-4.5-Air's, 4.6's and 4.7's only printed "
                     "or quoted")
FEWER["glm4_moe_lite"] = "no copy of a released config.json file reached, only configs printed in logs and quoted in documents"
FEWER["kimi_k3"] = ("one released model (Kimi-K3), published quantized: its config.json is "
                    "tests/data/released_quantized/compressed_tensors/moonshotai__Kimi-K3.json (tests/test_kimi_k3.py)")


def _through_the_config_path(rel: str) -> dict:
    kv = config_path_kv(DATA / rel, 1)
    released = merge_text_config(read_config(DATA / rel))
    family = BY_NAME[rel.split('/')[0]]
    # the arch the KV is written under: a family may write another than its gguf_arch (Nemotron-H with experts writes
    # nemotron_h_moe)
    block_count, = (v for k, v in kv.items() if k.endswith(".block_count"))
    layers = layer_count(released)
    if layers is None:  # stated only as a per-layer list (Nemotron-3-Ultra's layers_block_type): the family counts it
        layers = layer_count(family.normalise(dict(released)))
    assert block_count == layers + family.extra_blocks(released)
    for key, value in kv.items():
        assert not (isinstance(value, float) and not math.isfinite(value)), f"{rel}: {key} = {value}"
    return kv


# file -> (what the refusal says, what the converter does with it): refusals the converter does not share, where the
# view does not yet present what the converter writes. Tested as refused, so that reading them is a change to this table.
# (Nemotron-3-Ultra-550B-A55B, refused here for its MTP head before, is read: tests/test_family_nemotron_h.py's
# nemotron_h-mtp fixture carries that head, and test_nemotron_3_ultras_mtp_head_is_one_more_block checks its KV.)
GAPS: dict[str, tuple[str, str]] = {}


@pytest.mark.parametrize("rel", CONFIGS)
def test_released_config_is_accepted_or_refused_for_its_reason(rel):
    if rel in REFUSED or rel in GAPS:
        words, _why = REFUSED.get(rel) or GAPS[rel]
        with pytest.raises(HfviewError, match=re.escape(words)):
            _through_the_config_path(rel)
    else:
        _through_the_config_path(rel)


def test_refusal_table_names_collected_files():
    assert not set(REFUSED) - set(CONFIGS), "REFUSED names files that are not collected"
    assert not set(GAPS) - set(CONFIGS), "GAPS names files that are not collected"
    assert not set(GAPS) & set(REFUSED), "a file is either refused rightly or a gap"


# latent attention and DeepSeek-style routing: DeepSeek-MoE copies found only embedded in code or edited;
# DeepSeek-V2-Lite's one copy reached
FEWER.update(dict.fromkeys(("deepseek", "deepseek_v2"), _UNREACHED))
FEWER["minicpm3"] = "one released text model (MiniCPM3-4B); its copy reached (sgl-project/ome's test data)"
# latent attention, second pass: ai-dynamo/aiconfigurator keeps whole copies of DeepSeek-V3's, R1's, V3.2's,
# Kimi-K2-Instruct's and GLM-5 / 5.1 / 5.2's config.json files (BF16 and FP8 uploads). The FP8 ones (and
# Qwen3-32B-FP8, DeepSeek-R1-0528) state the converter's quant_method "fp8" (e4m3 over [128, 128]
# blocks), which the view reads as the converter does, before any family code (tests/test_fp8.py: bytes and logits
# on Qwen3 and DeepSeek-V3 fixtures); so they are accepted as their BF16 exports are.
FP8_ACCEPTED = [
    "qwen3/Qwen__Qwen3-32B-FP8.json", "deepseek_v3/deepseek-ai__DeepSeek-R1-0528.json",
    "deepseek_v3/deepseek-ai__DeepSeek-V3.json", "deepseek_v3/deepseek-ai__DeepSeek-R1.json",
    "deepseek_v3/moonshotai__Kimi-K2-Instruct.json", "deepseek_v32/deepseek-ai__DeepSeek-V3.2.json",
    "glm_moe_dsa/zai-org__GLM-5-FP8.json", "glm_moe_dsa/zai-org__GLM-5.1-FP8.json",
    "glm_moe_dsa/zai-org__GLM-5.2-FP8.json",
]


@pytest.mark.parametrize("rel", FP8_ACCEPTED)
def test_fp8_release_is_accepted(rel):
    config = read_config(DATA / rel)
    assert config["quantization_config"]["quant_method"] == "fp8" and rel not in REFUSED
    _through_the_config_path(rel)


# Ling-style mixtures: Sarvam-30B, Ling 2.0 and Hy3 publish on the Hub only; no copy reached
FEWER.update(dict.fromkeys(("sarvam_moe", "bailing_moe_v2", "hy_v3"), _UNREACHED))
# Hy4: Hy4-preview publishes on the Hub only; copies found only as other projects' toy test configs
FEWER["hy_v4"] = _UNREACHED
# mixtures, part C: Trinity, North Mini Code, K-EXAONE and Mellum 2 publish on the Hub only; copies found only as
# fields quoted in code
FEWER.update(dict.fromkeys(("afmoe", "cohere2_moe", "exaone_moe", "mellum"), _UNREACHED))
FEWER["laguna"] = ("two copies reached (Laguna-S-2.1-FP8's and Laguna-XS.2-FP8's, on branches of aiconfigurator); "
                   "Laguna-M.1's and the BF16 uploads' were not")
FEWER.update(dict.fromkeys(("bailing_moe",), _UNREACHED))
# Kimi Linear: Kimi-Linear-48B-A3B (Base, Instruct) publish on the Hub only; copies found only embedded
# in other projects' test code, none as released
FEWER["kimi_linear"] = _UNREACHED
# dots3-note: dots3-note-prev publishes on the Hub only; its GitHub namesake holds a README and images
FEWER["dots3_note"] = _UNREACHED
# Muse Glimmer: Muse-Glimmer-30B publishes on the Hub only; beside aiconfigurator's copy, the search found other
# projects' hand-written test configs, and its GitHub namesakes hold benchmarks
FEWER["muse_glimmer_text"] = "one copy reached (Muse-Glimmer-30B's, on a branch of aiconfigurator)"
# BitNet b1.58: microsoft's and 1bitLLM's releases publish on the Hub only; copies found only quoted in READMEs and
# other projects' test code
FEWER["bitnet"] = _UNREACHED


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_has_three_released_configs(family):
    have = [rel for rel in CONFIGS if rel.startswith(family + "/")]
    if family in FEWER:
        assert len(have) < 3, f"{family}: {len(have)} collected; drop it from FEWER"
    else:
        assert len(have) >= 3, f"{family}: {len(have)} released configs collected: {have}"


@pytest.mark.parametrize("family", sorted({p.parent.name for p in DATA.glob("*/*.json")}))
def test_sources_name_every_file(family):
    """Each family directory's SOURCES.md has a row for each of its files (the first column names it)."""
    sources = (DATA / family / "SOURCES.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `?([^`|]+\.json)`? \|", sources, flags=re.M))
    assert listed == {p.name for p in (DATA / family).glob("*.json")}


# A released file with one of its off flags turned on (or a layout key at another value): refused by name,
# with the value, where the file itself is accepted.
FLIPPED = [
    ("qwen2/Qwen__Qwen2.5-7B.json", "use_mrope", True),
    ("phi3/microsoft__Phi-4-mini-instruct.json", "full_attn_mod", 4),
    ("phi3/microsoft__Phi-4-mini-instruct.json", "interpolate_factor", 2),
    ("starcoder2/bigcode__starcoder2-7b.json", "mlp_type", "gated"),
    ("starcoder2/bigcode__starcoder2-7b.json", "norm_type", "rms_norm"),
    ("starcoder2/bigcode__starcoder2-7b.json", "scale_attn_weights", False),
]


@pytest.mark.parametrize("rel, key, value", FLIPPED)
def test_released_config_with_a_flag_on_is_refused_by_name(rel, key, value, tmp_path):
    config = json.loads((DATA / rel).read_text())
    assert key in config and rel not in REFUSED
    family = families.family_for(config["model_type"])
    with pytest.raises(ConfigError, match=f"config key '{key}' is {re.escape(json.dumps(value))}"):
        read_as(family, config | {key: value}, tmp_path / "config.json")


def test_starcoder2_epsilons_that_disagree_are_refused(tmp_path):
    """The converter writes layer_norm_epsilon, transformers computes with norm_epsilon: equal in the release."""
    config = json.loads((DATA / "starcoder2/bigcode__starcoder2-7b.json").read_text())
    family = families.family_for("starcoder2")
    with pytest.raises(ConfigError, match="layer_norm_epsilon 1e-06 differs from norm_epsilon 1e-05"):
        read_as(family, {**config, "layer_norm_epsilon": 1e-6}, tmp_path / "config.json")


# ---------------------------------------------------------------- the key check itself
def _qwen2(**extra) -> dict:
    return {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
            "num_attention_heads": 4, "num_hidden_layers": 2, **extra}


def _check(config: dict) -> None:
    family = families.family_for(config["model_type"])
    check_keys(config, Path("config.json"), family.name, family.reads, family.harmless,
               class_defaults(family, config))


def test_flag_off_is_harmless_and_on_is_refused_by_name_with_its_value():
    _check(_qwen2(use_mrope=False))
    with pytest.raises(ConfigError, match=r"'use_mrope' is true.*qwen2.*as if it were false"):
        _check(_qwen2(use_mrope=True))


def test_off_value_is_compared_as_json():
    """0 is not false, and the string "false" is not either: both refused."""
    for value in (0, "false", None):
        with pytest.raises(ConfigError, match="'use_mrope'"):
            _check(_qwen2(use_mrope=value))


def test_stamps_and_aliases_are_harmless_at_any_value():
    _check(_qwen2(internal_version="7b-alpha-v2.33.0.30", max_sequence_length=4096, pretraining_tp=2))


def test_a_flag_the_family_reads_is_its_business():
    """The off-value table applies to keys a family does not read; one that reads the flag checks it itself."""
    check_keys({"model_type": "qwen2_vl_like", "use_mrope": True}, Path("config.json"), "reader",
               frozenset({"use_mrope"}), {})


def test_unknown_key_is_refused_before_a_flag_on():
    """A key a reference reads (the converter's TextModel takes model_max_length as the context length) is refused
    by name before a flag on; one neither reads (mystery_scale) is ignored (tests/test_key_policy.py)."""
    with pytest.raises(ConfigError, match=r"'model_max_length' \(= 8\) is read by the converter's TextModel"):
        _check(_qwen2(model_max_length=8, mystery_scale=2.0, use_mrope=True))


def test_a_family_entry_overrides_the_common_table():
    family = families.family_for("llama")
    assert family.harmless["use_sliding_window"] is ANY and "use_sliding_window" not in family.reads
    check_keys({"model_type": "llama", "use_sliding_window": True}, Path("config.json"), family.name,
               family.reads, family.harmless)


def test_every_off_value_table_is_a_tuple():
    """A value that is not ANY lists the off values as a tuple (a bare False would be iterated wrongly); a family
    declaring otherwise, or a set of names, is refused when it is defined."""
    from dataclasses import replace
    for key, off in COMMON_HARMLESS.items():
        assert off is ANY or isinstance(off, tuple), f"{key}: {off!r}"
    llama = families.family_for("llama")
    for bad in ({"use_mrope": False}, frozenset({"use_mrope"})):
        with pytest.raises(TypeError, match="family llama: harmless must map each key"):
            replace(llama, harmless=bad)


def test_hfcheckpoint_refuses_a_flag_on(tmp_path):
    """The same check guards HfCheckpoint, before any shard is read."""
    from hfview import HfCheckpoint
    (tmp_path / "config.json").write_text(json.dumps(_qwen2(use_mrope=True)))
    with pytest.raises(ConfigError, match="'use_mrope' is true"):
        HfCheckpoint(tmp_path)


# older families with their own tensor paths (old-dense)
REFUSED.update({
    "chatglm/THUDM__chatglm2-6b.json": (
        "converter fails on it with KeyError: 'vocab_size'", "ChatGLM2 states only padded_vocab_size: the converter "
        "stops with KeyError: 'vocab_size' (tests/test_converter_refusals.py measures it)"),
})
FEWER["codeshell"] = "one released model (CodeShell-7B); its organisation's own copy reached"
REFUSED["chatglm/THUDM__glm-4-9b.json"] = (
    "converter fails on it with KeyError: 'vocab_size'", "GLM-4-9B states only padded_vocab_size, as ChatGLM2 does: the "
    "converter's GLM-4 vocabulary stops with KeyError: 'vocab_size' (ChatGLM3's SentencePiece path does not look it up)")
# hybrids, part B: LFM2-MoE copies found only embedded in code (trimmed LFM2-8B-A1B ones in other projects' tests), none
# as a config.json file. (Nemotron-H has its three: aiconfigurator keeps Nano-30B-A3B's, Ultra-550B's and H-56B's.)
FEWER["lfm2_moe"] = _UNREACHED
# newest dense and wrapped decoders: Ministral 3 publishes on the Hub only (its Instruct uploads in FP8); two copies
# reached (Devstral 2 123B's and Devstral Small 2's, kept by tt-metal); Ministral-3's own only as fragments quoted in code
# and documents. The wrapper's layout is tested through the config path in tests/test_family_ministral3.py
FEWER["ministral3"] = "two copies reached (Devstral-2-123B-Instruct-2512's and Devstral-Small-2-24B-Instruct-2512's)"
# Qwen's linear-attention hybrids: one byte copy of Qwen3-Next-80B-A3B-Instruct's config.json reached
# (a model report quoting the file whole); the other copies found are transcriptions or transformers' dumps
FEWER.update({"qwen3_next": "Qwen3-Next-80B-A3B Instruct and Thinking share one config; one byte copy reached"})
FEWER.update({"qwen3_5_text": "two byte copies reached (Qwen3.5-9B and 27B, image-text wrappers, in tt-metal); "
                              "Qwen3.5-0.8B's found only trimmed in other projects' tests"})
# converter classes without a transformers class: Nanbeige4.2-3B's config.json is reached only as quoted
# in other projects' notes and tests (none byte for byte); openPangu-Embedded-7B-V1.1's in one GitHub mirror
FEWER["nanbeige"] = "no byte copy of a released config.json reached (Nanbeige4.2-3B publishes on the Hub only)"
FEWER["pangu_embedded"] = "one copy reached (openPangu-Embedded-7B-V1.1, a mirror); the others publish on GitCode/the Hub"
# MiMo-V2-Flash: Xiaomi publishes on the Hub only; copies found only as fields quoted in other projects' code
FEWER["mimo_v2_flash"] = _UNREACHED
# families the converter has no class for: TeleChat 1 states no base_seqlen (its modeling code fixes it)
REFUSED.update({f"telechat/Tele-AI__TeleChat-{m}.json": (
    "base_seqlen is missing", "TeleChat 1: the rotary base depends on base_seqlen, which its modeling code fixes "
    "(4096 for 7B, 8192 for 12B) instead of config.json; the pinned converter has no class for it ('Model "
    "TelechatForCausalLM is not supported'), no context cap avoids it, and a guessed value runs another function "
    "(measured in tests/test_family_telechat.py)") for m in ("7B", "12B", "12B-V2")})
# Tele-FLM / FLM-2: CofeAI publishes on the Hub only; no copy of a config.json file reached
FEWER["teleflm"] = _UNREACHED
REFUSED["telechat/Tele-AI__TeleChat-52B.json"] = (
    "config key 'activation_function'", "TeleChat-52B: the FLM-2 lineage's GPT-2-named layout (n_embd, Conv1D c_attn, "
    "muP multipliers) under model_type telechat, another architecture than TeleChat2's; its config.json states no "
    "architectures, and the converter stops on it with \"ValueError: Failed to detect model architecture\" (it has no "
    "TeleChat class at all; tests/test_converter_refusals.py measures it on the telechat fixture with 52B's config)")
# Solar Open: upstage publishes Solar-Open-100B on the Hub only; the search reached copies of its config
# quoted in code and documents (tests/test_family_solar_open.py tests a config with every key they state)
FEWER["solar_open"] = _UNREACHED
# Gemma 4: Google publishes on the Hub only; one copy reached (gemma-4-26B-A4B's, in aiconfigurator); otherwise configs
# printed by transformers in reports, fragments quoted in other projects' code and tests, and ome's trimmed test files
FEWER["gemma4"] = _UNREACHED
# sparse attention's indexer: DeepSeek-V3.2 / V3.2-Exp (FP8 releases) publish on the Hub only; one copy of
# V3.2's config.json reached (glm_moe_dsa, GLM-5 / 5.1 / 5.2, has its three: see its SOURCES.md)
FEWER["deepseek_v32"] = ("one copy reached (DeepSeek-V3.2's FP8 config.json, aiconfigurator and InferSim hold the same "
                         "bytes); V3.2-Exp's and V3.2-Speciale's did not")
# Nemotron-NAS (deci): the releases (Llama-3.1-Nemotron-51B-Instruct, Llama-3.3-Nemotron-Super-49B-v1 /
# v1.5, Llama-3.1-Nemotron-Ultra-253B-v1) publish on the Hub only; one copy reached (Super-49B-v1's, in aiconfigurator);
# the others are embedded in other projects' code (Ultra-253B's inside a Python string literal of a file whose
# repository the index does not name)
FEWER["deci"] = _UNREACHED
# Gemma 3n: Google publishes on the Hub only; the search reached test code and hand-written dicts only
FEWER["gemma3n"] = _UNREACHED
# MiniMax-01 (minimax_01): MiniMax-Text-01 and MiniMax-M1-40k/80k publish on the Hub only; one copy of M1's
# config.json reached, embedded in a markdown dump of the M1 repository whose repository the index does not name
FEWER["minimax_01"] = "one copy reached (MiniMax-M1's, inside a repository dump); Text-01's and M1-40k/80k's did not"
# Nemotron-H Puzzle: NVIDIA-Nemotron-Labs-3-Puzzle-75B-A9B (BF16, FP8, NVFP4) publishes on the Hub only;
# its config.json found only as fields quoted in other projects' test code, no byte copy
FEWER["nemotron_h_puzzle"] = _UNREACHED
# HRM-Text: sapientinc/HRM-Text-1B publishes on the Hub only; its config.json reached only printed whole in
# an agent transcript (kept as data in tests/test_family_hrm_text.py), KoHRM-Text-1.4B's only as quoted highlights
FEWER["hrm_text"] = "no copy of a released config.json file reached; HRM-Text-1B's printed copy is tested in " \
                    "tests/test_family_hrm_text.py"
# VaultGemma and HyperCLOVA X: google/vaultgemma-1b and naver-hyperclovax/HyperCLOVAX-SEED-* publish on the
# Hub only; the search reached a keras-hub test's dict and tiny random models' test code, no config.json
FEWER["vaultgemma"] = _UNREACHED
FEWER["hyperclovax"] = _UNREACHED
# GLM-5.3-Flash (glm5_next_text): zai-org publishes on the Hub only; one copy reached (tt-metal's), the others
# are other projects' hand-written test configs (tests/data/released_configs/glm5_next_text/SOURCES.md)
FEWER["glm5_next_text"] = "one copy reached (GLM-5.3-Flash's FP8 config.json, kept by tt-metal's reference code)"
# (accepted: its layer_types' "deepseek_sparse_attention" is transformers' legacy name of indexed_attention, read so
# by the config class and so by the converter; its FP8, quant_method fp8 with 128-blocks, is read)


# MiMo-7B: its checkpoints publish config.json on the Hub only; one copy reached (XiaomiMiMo/MiMo's
# GitHub repository), the others found only as dicts quoted in other projects' tests
FEWER["mimo"] = _UNREACHED
# Sarvam MLA (sarvam_mla): sarvamai/sarvam-105b publishes its config.json on the Hub only; the search reached
# other projects' hand-written dicts of it (Megatron-Bridge's and SGLang's tests), no copy of the file
FEWER["sarvam_mla"] = _UNREACHED

# PLaMo 3 (plamo3): pfnet/plamo-3-nict-2b-base, -8b-base, -31b-base (and -2604-31b-base) are gated repositories on the
# Hub; the search reached other projects' READMEs and code naming them, and hand-written test configs, no config.json
FEWER["plamo3"] = _UNREACHED

# MiniMax-M3 (minimax_m3_vl_text): the search reached other projects' hand-written test configs and parsers
# (text_config excerpts), no copy of MiniMaxAI/MiniMax-M3's config.json
FEWER["minimax_m3_vl_text"] = _UNREACHED
# Step-3.5-Flash (step3p5): stepfun-ai/Step-3.5-Flash publishes its config.json on the Hub only; the search reached
# other projects' hand-written dicts of it (SGLang's, aiconfigurator's, mlx ports' tests), no copy of the file
FEWER["step3p5"] = _UNREACHED
# Step-3.7-Flash (step3p7): stepfun-ai/Step-3.7-Flash publishes on the Hub only; the search reached the config only as
# other projects' test dicts and aiconfigurator's flattened summary (tests/data/released_quantized/fp8/SOURCES.md),
# no byte copy of its config.json
FEWER["step3p7"] = _UNREACHED
# PLaMo 1: pfnet/plamo-13b and its instruct models publish on the Hub only; copies found only as fields
# quoted in other projects' test code (a Swift port's "legacy" config string), none as a config.json file
FEWER["plamo"] = _UNREACHED
# JAIS 1 (jais): core42 / inceptionai publish jais-13b, jais-30b-* and jais-family-* config.json on the Hub only; the
# search reached other projects' loaders (vLLM's JAISConfig, Rust ports reading its keys) and model cards, no copy of
# the file
FEWER["jais"] = _UNREACHED
# Baichuan 1 and 2 (baichuan): baichuan-inc publishes its config.json files on the Hub only (its GitHub
# repositories hold code and READMEs); one copy reached (Baichuan2-7B's, in sgl-project/ome's test data), beside a
# derivative's config printed in a log and a 13B one quoted in a document (tests/test_family_baichuan.py runs those two)
FEWER["baichuan"] = _UNREACHED
# TeleChat3 (telechat3): Tele-AI publishes TeleChat3-36B-Thinking on the Hub and ModelScope only; the one
# copy reached is mlx-community's 4-bit conversion's config.json, quoted field for field in a port's test
FEWER["telechat3"] = _UNREACHED
REFUSED["telechat3/mlx-community__Telechat3-36B-Thinking-4bit.json"] = (
    "quantized checkpoints are unsupported", "MLX affine 4-bit (mlx-lm's `quantization`, group_size 64): the converter "
    "has no TeleChat3 class, and for the Llama it computes reads no `quantization` from config.json and stops at the "
    "packed weights' scales / biases (\"Can not map tensor 'model.embed_tokens.biases'\"; tests/test_converter_refusals.py "
    "measures both on telechat3-plain packed so)")
# Param2 MoE (param2moe): bharatgenai/Param2-17B-A2.4B-Thinking publishes its config.json on the Hub only;
# the search reached Megatron-Bridge's bridge (the keys it writes), vLLM's / SGLang's code and transformers' port
# (tests/data/released_configs/param2moe/SOURCES.md), no copy of the file
FEWER["param2moe"] = _UNREACHED
# Qwen-1: the first Qwen-7B-Chat revision's Megatron names, Qwen-VL (GPTQ) and Qwen-Audio's encoders
REFUSED.update({
    "qwen/Qwen__Qwen-7B-Chat-2023-08.json": (
        "ffn_hidden_size 22016", "Qwen-7B-Chat's first revision (n_embd, n_layer, ffn_hidden_size): the converter "
        "converts it writing no feed-forward length, and llama.cpp refuses its file (check_tensor_dims: blk.0.ffn_gate "
        "has wrong shape; tests/test_converter_refusals.py measures it); the current config reads"),
})
# (Qwen-VL-Chat-Int4 and Qwen-Audio are read: the converter drops the encoder and writes the text decoder with the
# release's tokenizer tags, as the view does; tests/test_family_qwen.py's qwen-vl and qwen-audio fixtures)
# Ling 3.0: Ling-3.0-tiny and Ling-3.0-flash publish on the Hub only; copies found only as other projects'
# subsets and transcriptions of their values (and one quantized derivative's, without model_type)
FEWER["bailing_hybrid"] = _UNREACHED
# Mistral Large 3 / Small 4 (params.json): no copy of a released params.json file reached; only copies quoted
# inside other projects' tests (unsloth, TensorRT-LLM, vLLM), every one FP8 (quantization_config / quantization),
# which the view refuses as quantized before any download
FEWER["mistral_moe_format"] = _UNREACHED
# PLaMo 2: pfnet/plamo-2-1b, plamo-2-8b and plamo-2-translate publish on the Hub only; one trimmed copy of
# plamo-2-1b's config reached, quoted in a Swift port's test (tests/data/released_configs/plamo2/SOURCES.md)
FEWER["plamo2"] = _UNREACHED


# Laguna-S.2.1 states gating_types beside gating, Laguna-XS.2 a top-level partial_rotary_factor beside the per-kind
# ones: accepted where transformers (gating; the per-kind factors) and the converter (gating_types first; the per-kind
# factors only) compute alike, refused by name where they would not
def test_laguna_gating_types_of_another_kind_than_gating_are_refused(tmp_path):
    config = json.loads((DATA / "laguna/poolside__Laguna-S-2.1-FP8.json").read_text())
    assert config["gating"] == "per-head" and set(config["gating_types"]) == {"per_head"}
    family = families.family_for("laguna")
    read_as(family, config, tmp_path / "config.json")
    mixed = config | {"gating_types": ["per_element"] + config["gating_types"][1:]}
    with pytest.raises(ConfigError, match=r"gating 'per-head' / gating_types \['per_element'"):
        read_as(family, mixed, tmp_path / "config.json")
    with pytest.raises(ConfigError, match="gating_types"):
        read_as(family, config | {"gating_types": config["gating_types"][1:]}, tmp_path / "config.json")


def test_laguna_top_level_partial_rotary_factor_where_a_kind_states_none_is_refused(tmp_path):
    config = json.loads((DATA / "laguna/poolside__Laguna-XS.2-FP8.json").read_text())
    assert config["partial_rotary_factor"] == 0.5
    family = families.family_for("laguna")
    read_as(family, config, tmp_path / "config.json")
    rope = json.loads(json.dumps(config["rope_parameters"]))
    del rope["sliding_attention"]["partial_rotary_factor"]
    with pytest.raises(ConfigError, match=r"partial_rotary_factor 0.5 with rope_parameters.sliding_attention stating "
                                          r"none"):
        read_as(family, config | {"rope_parameters": rope}, tmp_path / "config.json")
    # without the top-level factor both read 1.0 there: accepted
    read_as(family, {k: v for k, v in config.items() if k != "partial_rotary_factor"} | {"rope_parameters": rope},
            tmp_path / "config.json")
