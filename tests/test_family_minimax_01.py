"""MiniMax-Text-01 / MiniMax-M1 (lightning attention with softmax attention every 8th layer, w1/w2/w3 experts in
every layer, residuals scaled by the layernorm alphas): converter bytes at every outtype, llama.cpp logits against
transformers' MiniMaxForCausalLM over the same weights (a twin in transformers' names: transformers reads the
release's names through remote code only), released configs, refusals of what llama.cpp's minimax-01 cannot run."""
import json
import shutil
from pathlib import Path

import pytest

from family_oracle import oracle_tests, twin_logits_test
from family_variants import DROP, variant
from released_config import config_path_kv, released_configs

test_export, _ = oracle_tests("minimax_01", ["minimax_01"])


def minimax_twin(src: Path, out: Path) -> None:
    """The checkpoint as transformers' own MiniMax port names it: model_type minimax, layer_types from
    attn_type_list, the alphas and betas as its *_alpha_factor / *_beta_factor, rope_parameters; the weights as
    they are (the decay buffers transformers computes from the layer index)."""
    cfg = json.loads((src / "config.json").read_text(encoding="utf-8"))
    twin = {k: cfg[k] for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act",
                                "max_position_embeddings", "rms_norm_eps", "num_local_experts",
                                "num_experts_per_tok", "bos_token_id", "eos_token_id", "tie_word_embeddings")}
    assert cfg["rotary_dim"] == cfg["head_dim"], "transformers' MiniMax rotates the whole head"
    twin.update(model_type="minimax", architectures=["MiniMaxForCausalLM"],
                layer_types=["full_attention" if k else "linear_attention" for k in cfg["attn_type_list"]],
                rope_parameters={"rope_type": "default", "rope_theta": cfg["rope_theta"]},
                full_attn_alpha_factor=cfg["layernorm_full_attention_alpha"],
                full_attn_beta_factor=cfg["layernorm_full_attention_beta"],
                linear_attn_alpha_factor=cfg["layernorm_linear_attention_alpha"],
                linear_attn_beta_factor=cfg["layernorm_linear_attention_beta"],
                mlp_alpha_factor=cfg["layernorm_mlp_alpha"], mlp_beta_factor=cfg["layernorm_mlp_beta"])
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(twin, indent=2), encoding="utf-8")
    shutil.copyfile(src / "model.safetensors", out / "model.safetensors")


test_logits = twin_logits_test("minimax_01", ["minimax_01"], minimax_twin, "MiniMax")

# released configs the view refuses, and the reason it names
REFUSED: dict[str, str] = {}


@pytest.mark.parametrize("path", released_configs("minimax_01"), ids=lambda p: p.stem)
def test_released_config_is_accepted_or_refused_by_name(path: Path):
    """Each released config passes the key check and the family's checks, and its hyperparameter KV carries
    the released widths, counts, residual scale and rotary width, or it is refused for the reason REFUSED names."""
    from hfview.errors import ConfigError

    if path.stem in REFUSED:
        with pytest.raises(ConfigError, match=REFUSED[path.stem]):
            config_path_kv(path)
        return
    released = json.loads(path.read_text(encoding="utf-8"))
    kv = config_path_kv(path)
    assert kv["minimax-01.block_count"] == released["num_hidden_layers"] == len(released["attn_type_list"])
    assert kv["minimax-01.expert_count"] == released["num_local_experts"]
    assert kv["minimax-01.expert_used_count"] == released["num_experts_per_tok"]
    assert kv["minimax-01.feed_forward_length"] == released["intermediate_size"]
    assert kv["minimax-01.attention.head_count_kv"] == released["num_key_value_heads"]
    assert kv["minimax-01.attention.key_length"] == released["head_dim"]
    assert kv["minimax-01.rope.dimension_count"] == released["rotary_dim"]
    assert kv["minimax-01.residual_scale"] == pytest.approx(released["layernorm_mlp_alpha"])


@pytest.mark.parametrize("changes, reason", [
    (dict(attn_type_list=[0, 0, 0, 1, 0, 0, 0, 1]), "every 8th layer"),
    (dict(attn_type_list=[0, 1]), "attn_type_list lists 2 layers"),
    (dict(attn_type_list=DROP), "attn_type_list None: missing"),
    (dict(num_hidden_layers=3, attn_type_list=[0, 0, 0]), "none of them softmax attention"),
    (dict(layernorm_mlp_alpha=1.0), "alphas must be equal"),
    (dict(layernorm_mlp_beta=0.5), "betas 1.0"),
    (dict(layernorm_full_attention_alpha=DROP), "layernorm_full_attention_alpha missing"),
    (dict(postnorm=False), "postnorm False"),
    (dict(rotary_dim=DROP), "rotary_dim None: missing"),
    (dict(rotary_dim=7), "rotary_dim 7"),
    (dict(shared_intermediate_size=64), "shared_intermediate_size"),
    (dict(tie_word_embeddings=True), "tie_word_embeddings"),
    (dict(hidden_act="gelu"), "hidden_act"),
], ids=["layer_kinds", "short_list", "no_list", "no_softmax_layer", "unequal_alphas", "beta", "no_alpha", "prenorm",
        "no_rotary_dim", "odd_rotary_dim", "shared_expert", "tied", "gelu"])
def test_refuses_what_minimax_01_cannot_run(changes, reason, checkpoint, tmp_path):
    """What llama.cpp's minimax-01 computes only one way, and what the converter would fail on or write from
    weight values, is refused by name."""
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    with pytest.raises(ConfigError, match=reason):
        HfCheckpoint(variant(checkpoint("minimax_01"), tmp_path / "v", **changes), "f32")


def test_embedding_rows_past_the_tokenizer_are_refused_by_name(checkpoint):
    """The converter writes suppress_tokens from the values of embedding rows past the tokenizer's vocabulary
    (those all zero); the view does not derive metadata from weight values, so it refuses such a vocabulary."""
    from hfview.errors import ConfigError
    from hfview.families.minimax_01 import vocab

    with pytest.raises(ConfigError, match="suppress_tokens"):
        vocab(checkpoint("minimax_01"), {"vocab_size": 50304})


def test_transformers_port_is_not_presented(checkpoint, tmp_path):
    """transformers' own port (model_type minimax, MiniMaxForCausalLM): the pinned converter registers no such
    class, so there is no converter file to present; the architecture gate sends it to transformers."""
    from hfview.runner.resolve import gate

    twin = tmp_path / "twin"
    minimax_twin(checkpoint("minimax_01"), twin)
    config = json.loads((twin / "config.json").read_text(encoding="utf-8"))
    assert gate(config, twin / "config.json") == "torch"


def test_m1_architecture_is_the_same_file(checkpoint, tmp_path):
    """MiniMax-M1's names (MiniMaxM1ForCausalLM, model_type minimax_m1), which the converter registers beside
    MiniMaxText01ForCausalLM: the view's file is the converter's, byte for byte."""
    import oracle
    from hfview import HfCheckpoint
    from hfview.export import export

    m1 = variant(checkpoint("minimax_01"), tmp_path / "MiniMax-M1-tiny", architectures=["MiniMaxM1ForCausalLM"],
                 model_type="minimax_m1")
    theirs = oracle.convert_cached(m1, "f32")
    ours = export(HfCheckpoint(m1, "f32"), tmp_path / "ours.gguf")
    assert oracle.sha256(ours) == oracle.sha256(theirs), oracle.first_difference(ours, theirs)


@pytest.mark.parametrize("model_type", ["minimax_text_01", "minimax_m1"])
def test_no_config_class_fills_defaults(model_type, checkpoint, tmp_path):
    """transformers 5.24 has no config class for the release's model types (they are remote code), so the
    converter reads config.json as written, and the family's defaults are empty."""
    from transformers import AutoConfig

    from hfview.families.minimax_01 import DEFAULTS

    assert DEFAULTS[model_type] == {}
    with pytest.raises(ValueError):
        AutoConfig.from_pretrained(variant(checkpoint("minimax_01"), tmp_path / "v", model_type=model_type))
