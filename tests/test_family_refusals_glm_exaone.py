"""Configs the view refuses, with the key and the reason named, for glm4, glm, exaone, exaone4, internlm2,
hunyuan_v1_dense, jais2 and granite_swa: each edit makes the checkpoint one llama.cpp (or the converter's
fixed readings) would run differently from transformers."""
import pytest

from config_edit import edited

CASES = [
    ("glm4", lambda c: c.update(hidden_act="gelu"), "hidden_act 'gelu'"),
    ("glm4", lambda c: c.update(partial_rotary_factor=0.3), "rotary dims"),
    ("glm", lambda c: c.update(rope_theta=500000.0), "rope_theta 500000.0"),
    ("glm", lambda c: c.update(head_dim=32), "head_dim 32"),
    ("exaone", lambda c: c.update(head_dim=32), "head_dim 32"),
    ("exaone", lambda c: c.update(activation_function="gelu"), "activation_function 'gelu'"),
    ("exaone4", lambda c: c.update(sliding_window=4, layer_types=["sliding_attention", "full_attention"]),
     "only for 64-layer models"),
    ("exaone4", lambda c: c.update(head_dim=24), "assumes they are equal"),
    ("internlm2", lambda c: c.update(bias=True), "bias true"),
    ("internlm2", lambda c: c.pop("num_key_value_heads"), "num_key_value_heads is missing"),
    ("hunyuan_v1_dense", lambda c: c.update(rope_theta=20000.0), "assumes theta 10000"),
    ("hunyuan_v1_dense", lambda c: c.update(use_cla=True), "use_cla True"),
    ("jais2", lambda c: c.update(hidden_act="silu"), "hidden_act 'silu'"),
    ("granite_swa", lambda c: c.update(layer_rope_theta=[10000.0, 0.0, 10000.0, 10000.0]), "layer_rope_theta"),
]


@pytest.mark.parametrize("name, edit, says", CASES, ids=[f"{n}-{s}" for n, _, s in CASES])
def test_refused(name, edit, says, checkpoint, tmp_path):
    from hfview import HfCheckpoint
    from hfview.errors import ConfigError

    path = edited(checkpoint(name), tmp_path / name, edit)
    with pytest.raises(ConfigError, match=r"config\.json") as err:
        HfCheckpoint(path, "f32")
    assert says in str(err.value), str(err.value)
