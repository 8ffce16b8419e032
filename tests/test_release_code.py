"""The key check reads a remote-code release's own Python files as text (issue 32, part 1): where transformers has no
class for a model type, the release's configuration_*.py and modeling_*.py are its forward, so a config key that
neither that code nor the converter's class names cannot change what runs. The files are read, never run: the
ones here would leave a mark if they were.

Baichuan is the family (transformers 5.24 has no class for model_type baichuan; the converter's BaichuanModel)."""
import pytest

from hfview import HfCheckpoint
from hfview.config import release_code
from hfview.errors import ConfigError
from hfview.inspect import describe
from family_variants import variant

FIXTURE = "baichuan-7b"
KEY = "use_xformers"  # an attention-kernel switch some remote code carries; neither reference reads it

# What a remote-code file could do if it were imported or executed: it would leave this file behind.
_TRAP = "import pathlib\npathlib.Path(__file__).with_name('RAN').write_text('ran')\n"


def _release(checkpoint, tmp_path, code: dict[str, str], **changes):
    out = variant(checkpoint(FIXTURE), tmp_path / "release", **changes)
    for name, text in code.items():
        (out / name).write_text(_TRAP + text, encoding="utf-8")
    return out


def test_a_key_the_release_code_never_names_is_ignored_and_listed(checkpoint, tmp_path):
    code = {"configuration_baichuan.py": "class BaichuanConfig:\n    def __init__(self, hidden_size=4096, **kw):\n"
                                         "        self.hidden_size = hidden_size\n",
            "modeling_baichuan.py": "def forward(config):\n    return config.hidden_size\n"}
    out = _release(checkpoint, tmp_path, code, **{KEY: 0.001})
    ignored = describe(HfCheckpoint(out))["ignored_keys"]
    assert ignored[KEY] == ("neither the checkpoint's own code (configuration_baichuan.py, modeling_baichuan.py, "
                            "read as text) nor the converter's BaichuanModel names it")
    assert not (out / "RAN").exists(), "a release's code was run"


@pytest.mark.parametrize("named_as", [f"loss = loss + config.{KEY} * z", f'getattr(config, "{KEY}", 0.0)'])
def test_a_key_the_release_code_names_is_refused_naming_its_file(checkpoint, tmp_path, named_as):
    out = _release(checkpoint, tmp_path, {"modeling_baichuan.py": f"def forward(config, z):\n    {named_as}\n"},
                   **{KEY: 0.001})
    with pytest.raises(ConfigError, match=rf"config key '{KEY}' \(= 0.001\) is read by the checkpoint's own code "
                                          r"\(modeling_baichuan.py\)"):
        HfCheckpoint(out)
    assert not (out / "RAN").exists()


def test_without_the_release_code_an_unknown_key_stays_refused(checkpoint, tmp_path):
    out = variant(checkpoint(FIXTURE), tmp_path / "config-only", **{KEY: 0.001})
    assert release_code(out) is None
    with pytest.raises(ConfigError, match=rf"config key '{KEY}' .* is not one the baichuan family knows"):
        HfCheckpoint(out)


def test_a_key_transformers_shared_code_reads_is_not_ignored_for_silent_release_code(checkpoint, tmp_path):
    # PreTrainedConfig runs for remote code too: a key its shared code reads may change the forward however
    # silent the release's own files are
    from hfview import references_read as R

    assert "sliding_window" in R.SHARED  # transformers' masks read it
    out = _release(checkpoint, tmp_path, {"modeling_baichuan.py": "def forward():\n    pass\n"}, sliding_window=64)
    with pytest.raises(ConfigError, match=r"config key 'sliding_window' \(= 64\) is read by transformers' shared code"):
        HfCheckpoint(out)


def test_oversized_release_code_is_not_read(tmp_path):
    (tmp_path / "modeling_x.py").write_bytes(b"# x\n" * ((8 << 20) // 4 + 1))
    assert release_code(tmp_path) is None


def test_where_transformers_has_the_class_a_py_beside_the_config_is_not_the_forward(checkpoint, tmp_path):
    # hfview's reference is transformers' own llama class, which never runs a release's modeling file
    out = variant(checkpoint("llama3-bpe"), tmp_path / "llama", **{KEY: True})
    (out / "modeling_llama.py").write_text(f"def forward(config):\n    return config.{KEY}\n", encoding="utf-8")
    assert describe(HfCheckpoint(out))["ignored_keys"][KEY] == (
        "neither transformers' llama, mistral, mixtral code nor the converter's LlamaModel reads it")
