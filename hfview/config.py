"""config.json as the converter sees it.

The converter reads the config through transformers' AutoConfig, so an absent key reads as that config
class's default and legacy rope keys are folded into `rope_parameters`. hfview does the same from plain
data (each family lists its config class's defaults) without importing transformers.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .errors import ConfigError

# Keys every transformers config carries that never change a forward pass.
COMMON_HARMLESS = frozenset({
    "architectures", "model_type", "transformers_version", "_name_or_path", "torch_dtype", "dtype",
    "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
    "use_cache", "initializer_range", "attention_dropout", "hidden_dropout", "dropout",
    "output_attentions", "output_hidden_states", "return_dict", "id2label", "label2id", "problem_type",
    "chunk_size_feed_forward", "is_encoder_decoder", "tokenizer_class", "auto_map", "_attn_implementation",
    "_attn_implementation_autoset", "tie_encoder_decoder", "is_decoder", "add_cross_attention",
    "prefix", "task_specific_params", "finetuning_task", "use_bfloat16", "pruned_heads",
    "torchscript", "cross_attention_hidden_size", "tf_legacy_loss", "max_length", "min_length",
    "do_sample", "early_stopping", "num_beams", "temperature", "top_k", "top_p", "typical_p",
    "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens", "diversity_penalty", "num_beam_groups",
    "encoder_no_repeat_ngram_size", "output_router_logits", "router_aux_loss_coef", "router_jitter_noise",
    "quantization_config",  # refused separately, with the method named
})


def _drop_non_finite(value: Any) -> Any:
    """Python's Infinity/-Infinity/NaN in a config read as unstated (the key is dropped)."""
    if isinstance(value, dict):
        return {k: _drop_non_finite(v) for k, v in value.items()
                if not (isinstance(v, float) and not math.isfinite(v))}
    if isinstance(value, list):
        return [_drop_non_finite(v) for v in value]
    return value


def read_config(model_dir: Path) -> tuple[dict, Path]:
    """config.json parsed, non-finite numbers dropped, a multimodal `text_config` merged over it."""
    path = model_dir / "config.json"
    if not path.is_file():
        raise ConfigError(f"model config is missing: {path}; a Hugging Face checkpoint needs its config.json")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"failed to read {path}: {e.strerror}") from e
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"invalid model config {path}: {e}") from e
    if not isinstance(raw, dict):
        raise ConfigError(f"invalid model config {path}: not a JSON object")
    config = _drop_non_finite(raw)
    if isinstance(config.get("text_config"), dict):
        config = {**config, **config["text_config"]}
    return config, path


def refuse_quantized(config: dict, path: Path) -> None:
    q = config.get("quantization_config")
    if q:
        method = q.get("quant_method") or q.get("quant_algo") or q.get("format") or "unknown method"
        raise ConfigError(f"{path}: the checkpoint is quantized ({method}); hfview reads unquantized weights "
                          f"(f32, f16, bf16): use the model's BF16 release, or export one with the method's tool")


def with_defaults(config: dict, defaults: dict) -> dict:
    """The config as transformers' config class presents it: defaults under the stated keys, rope folded."""
    h = {**defaults, **{k: v for k, v in config.items() if k != "text_config"}}
    # transformers folds legacy `rope_scaling` and `rope_theta` into `rope_parameters`
    rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    if "type" in rope and "rope_type" not in rope:
        rope["rope_type"] = rope["type"]
    rope.setdefault("rope_type", "default")
    theta = config.get("rope_theta", rope.get("rope_theta", defaults.get("rope_parameters", {}).get("rope_theta")))
    if theta is not None:
        rope["rope_theta"] = theta
    h["rope_parameters"] = rope
    h.pop("rope_scaling", None)
    h.pop("rope_theta", None)
    return h


def check_keys(config: dict, path: Path, family: str, reads: frozenset[str], harmless: frozenset[str]) -> None:
    """Every key is read, known to leave the computation unchanged, or refused by name."""
    known = reads | harmless | COMMON_HARMLESS | {"text_config"}
    unknown = sorted(k for k in config if k not in known)
    if unknown:
        raise ConfigError(f"{path}: config key {unknown[0]!r} (= {config[unknown[0]]!r}) is not one the {family} "
                          f"family knows; hfview will not guess whether it changes the model"
                          + (f" (also unknown: {', '.join(unknown[1:])})" if len(unknown) > 1 else ""))
