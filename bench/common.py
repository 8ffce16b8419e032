"""What the benchmarks share: the generated >= 1 GB checkpoint, and one child process measured."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import oracle  # noqa: E402

WORK = oracle.CACHE / "bench"


def make_checkpoint(out: Path, layers: int, hidden: int, vocab: int = 32000, experts: int = 0) -> Path:
    """Random bf16 Llama weights written with numpy + safetensors (no torch), with a real tokenizer; with
    `experts`, a Mixtral (that many experts of width hidden / 2 per layer, 2 per token)."""
    if (out / "config.json").is_file():
        return out
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    heads, kv_heads, ff = hidden // 64, max(1, hidden // 256), int(hidden * 2.75) // 64 * 64
    rng = np.random.default_rng(0)

    def bf16(*shape):
        x = rng.standard_normal(shape, dtype=np.float32) * 0.02
        return (x.view(np.uint32) >> 16).astype(np.uint16)

    def save(name, tensors):
        """A safetensors file written by hand: numpy has no bfloat16, so the header says BF16 itself."""
        header, offset = {}, 0
        for key, arr in tensors.items():
            header[key] = {"dtype": "BF16", "shape": list(arr.shape), "data_offsets": [offset, offset + arr.nbytes]}
            offset += arr.nbytes
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(tmp / name, "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text)
            for arr in tensors.values():
                f.write(arr.tobytes())

    kvd = kv_heads * 64
    shard = {"model.embed_tokens.weight": bf16(vocab, hidden), "lm_head.weight": bf16(vocab, hidden),
             "model.norm.weight": bf16(hidden)}
    save("model-00000.safetensors", shard)
    for i in range(layers):
        p = f"model.layers.{i}."
        save(f"model-{i + 1:05d}.safetensors", {
            p + "input_layernorm.weight": bf16(hidden), p + "post_attention_layernorm.weight": bf16(hidden),
            p + "self_attn.q_proj.weight": bf16(hidden, hidden), p + "self_attn.k_proj.weight": bf16(kvd, hidden),
            p + "self_attn.v_proj.weight": bf16(kvd, hidden), p + "self_attn.o_proj.weight": bf16(hidden, hidden),
            **({p + "mlp.gate_proj.weight": bf16(ff, hidden), p + "mlp.up_proj.weight": bf16(ff, hidden),
                p + "mlp.down_proj.weight": bf16(hidden, ff)} if not experts else {
                p + "block_sparse_moe.gate.weight": bf16(experts, hidden),
                **{f"{p}block_sparse_moe.experts.{x}.{w}.weight": bf16(*shape) for x in range(experts)
                   for w, shape in (("w1", (hidden // 2, hidden)), ("w2", (hidden, hidden // 2)),
                                    ("w3", (hidden // 2, hidden)))}})})
    mixture = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_local_experts": experts,
               "num_experts_per_tok": 2, "intermediate_size": hidden // 2, "sliding_window": None}
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
              "hidden_size": hidden, "intermediate_size": ff, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": kv_heads, "rms_norm_eps": 1e-5,
              "max_position_embeddings": 4096, "rope_theta": 10000.0, "torch_dtype": "bfloat16",
              "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False}
    if experts:
        config.update(mixture)
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    shutil.copy(ROOT / "fixtures" / "tokenizers" / "llama-spm" / "tokenizer.model", tmp)
    tmp.rename(out)
    return out


def run(cmd: list[str], env=None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS bytes (this child alone, from wait4) and stdout of one child process."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode:
            raise RuntimeError(f"{cmd[:3]} failed:\n{err.read()[-3000:]}")
        return wall, usage.ru_maxrss * 1024, out.read()


def checkpoint(layers: int, hidden: int, experts: int = 0) -> Path:
    """The benchmark checkpoint, made once in a child process (a forked child's peak RSS would otherwise
    include this process's arrays), with its shards read once so every contender starts warm."""
    path = WORK / (f"mixtral-{layers}x{hidden}x{experts}" if experts else f"llama-{layers}x{hidden}")
    if not (path / "config.json").is_file():
        subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); "
                        f"import common; common.make_checkpoint(common.WORK / {path.name!r}, {layers}, {hidden}, "
                        f"experts={experts})"], check=True)
    for f in path.glob("*.safetensors"):
        with open(f, "rb") as fh:
            while fh.read(64 << 20):
                pass
    return path


def convert(ckpt: Path, out: Path, outtype: str = "bf16") -> tuple[float, int]:
    root = oracle.converter_root()
    env = dict(os.environ, PYTHONPATH=str(root))
    wall, rss, _ = run([sys.executable, str(root / "convert_hf_to_gguf.py"), str(ckpt), "--outfile", str(out),
                        "--outtype", outtype], env)
    return wall, rss


# A child that loads a model (the view, or a GGUF file with or without mmap) and computes first logits.
FIRST_LOGITS = r"""
import sys, time, json
t0 = time.perf_counter()
mode, path = sys.argv[1], sys.argv[2]
from runner.stream import StreamModel, load_model_from_path
if mode == "view":
    from hfview import HfCheckpoint
    src = HfCheckpoint(path)
else:
    src = load_model_from_path(path, use_mmap=(mode == "mmap"))
with StreamModel(src, n_ctx=32) as m:
    logits = m.logits([1, 450, 4996])
print(json.dumps({"seconds": time.perf_counter() - t0, "finite": bool(abs(logits).max() < 1e30)}))
"""
