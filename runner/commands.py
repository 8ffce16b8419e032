"""`hfview generate`, `hfview parity` and `hfview serve` (registered into hfview's CLI through COMMANDS)."""
from __future__ import annotations

import json
import sys

import click

from hfview.errors import HfviewError

PRECISION = click.Choice(["auto", "f32", "f16", "bf16", "q8_0"])
DEVICE = click.Choice(["cpu", "cuda", "metal"], case_sensitive=False)


def _note(text: str) -> None:
    click.echo(f"hfview: {text}", err=True)


@click.command()
@click.option("--model", default=None, help="Checkpoint directory or Hub id (default: the embedded model).")
@click.option("--prompt", required=True, help="The prompt (the user message in chat mode).")
@click.option("--system", default=None, help="System message: TEXT, or a FILE holding it (chat mode).")
@click.option("--max-tokens", type=click.IntRange(min=0), default=256, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0.0), default=None,
              help="0 is greedy. Default, as for each sampling option: the model's (generation_config.json), "
                   "else llama.cpp's.")
@click.option("--top-k", type=int, default=None, help="<= 0: the whole vocabulary.")
@click.option("--top-p", type=click.FloatRange(min=0.0, max=1.0, min_open=True), default=None)
@click.option("--min-p", type=click.FloatRange(min=0.0, max=1.0), default=None)
@click.option("--repeat-penalty", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="1 is off (transformers' repetition_penalty).")
@click.option("--repeat-last-n", type=click.IntRange(min=-1), default=None,
              help="Tokens the repeat penalty looks back over (prompt included).")
@click.option("--seed", type=click.IntRange(min=0, max=2**32 - 1), default=None,
              help="Sampling seed: the same seed gives the same output (default: a new one, shown by --json).")
@click.option("--precision", type=PRECISION, default="auto", show_default=True,
              help="The view's outtype (what convert_hf_to_gguf.py --outtype would write).")
@click.option("--quant", default=None, metavar="TYPE",
              help="A llama-quantize file type (Q4_K_M, Q8_0, ...) over --precision, quantized as llama.cpp reads "
                   "each tensor: the model llama_model_quantize would write, with no file written.")
@click.option("--imatrix", default=None, metavar="FILE",
              help="llama-imatrix's importance matrix for --quant (GGUF or legacy .dat).")
@click.option("--device", type=DEVICE, default="cpu", show_default=True)
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@click.option("--n-ctx", type=click.IntRange(min=1), default=None,
              help="Context length (default: min(4096, the model's training context)).")
@click.option("--backend", type=click.Choice(["auto", "llama.cpp", "torch"]), default="auto", show_default=True,
              help="auto: llama.cpp when the view covers the family, else transformers.")
@click.option("--chat/--no-chat", default=None,
              help="Apply the model's chat template (default: on when the model has one).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of streaming text.")
@click.option("--progress/--no-progress", default=None, help="Loading bar (default: on a terminal).")
@click.pass_context
def generate(ctx, model, prompt, system, max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
             repeat_last_n, seed, precision, quant, imatrix, device, revision, n_ctx, backend, chat, as_json, progress):
    """Generate text from a checkpoint, run by llama.cpp straight from the view."""
    from .api import load
    from .chat import read_system

    if progress is None:
        progress = sys.stderr.isatty()
    system_text = read_system(system)
    runner = None
    try:
        runner = load(model, precision=precision, device=device.lower(), n_ctx=n_ctx, revision=revision,
                      progress=progress, backend=backend, quant=quant, imatrix=imatrix)
        for note in runner.notes:
            _note(note)
        if chat and not runner.chat_template:
            raise HfviewError("--chat: this model has no chat template (tokenizer.chat_template); use --no-chat")
        ids = runner.prompt_ids(prompt, system=system_text, chat=chat)

        def stream(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        result = runner.run(ids=ids, max_tokens=max_tokens, on_text=None if as_json else stream,
                            temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                            repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n, seed=seed)
        if as_json:
            click.echo(json.dumps({
                "model": str(model) if model is not None else str(runner.model_path),
                "model_revision": runner.model_revision,
                "text": result.text, "tokens": result.tokens, "prompt_tokens": result.prompt_tokens,
                "stop": result.stop, "seconds": round(result.seconds, 4),
                "first_token_seconds": round(result.first_token_seconds, 4),
                "tokens_per_second": None if result.tokens_per_second != result.tokens_per_second
                else round(result.tokens_per_second, 2),
                "chat": chat if chat is not None else runner.chat_template is not None,
                "precision": runner.checkpoint.outtype if runner.checkpoint is not None else None,
                "quant": runner.checkpoint.quant if runner.checkpoint is not None else None,
                "device": device.lower(), "n_ctx": runner.n_ctx, "seed": result.sampling["seed"],
                "sampling": result.sampling, "backend": runner.backend,
            }, ensure_ascii=False))
        else:
            sys.stdout.write("\n")
            sys.stdout.flush()
            if result.stop == "context":
                _note(f"stopped: the context ({runner.n_ctx} tokens) is full")
    except KeyboardInterrupt:
        # Ctrl-C: end the line, no traceback, the shell's convention for SIGINT.
        sys.stdout.write("\n")
        sys.stdout.flush()
        ctx.exit(130)
    finally:
        if runner is not None:
            runner.close()


@click.command()
@click.option("--model", default=None, help="Checkpoint directory or Hub id (default: the embedded model).")
@click.option("--prompt", default=None, help="Text to compare on (default: a short mixed sentence).")
@click.option("--threshold", type=click.FloatRange(min=0.0), default=1e-4, show_default=True,
              help="Pass when NMSE is below this.")
@click.option("--precision", type=PRECISION, default="f32", show_default=True)
@click.option("--revision", default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def parity(ctx, model, prompt, threshold, precision, revision, as_json):
    """Compare llama.cpp (from the view) with transformers' forward pass: exit 0 only under the threshold."""
    from .parity import DEFAULT_PROMPT, compare

    report = compare(model, prompt=prompt or DEFAULT_PROMPT, threshold=threshold, precision=precision,
                     revision=revision)
    click.echo(json.dumps(report.as_dict()) if as_json else report.render())
    ctx.exit(0 if report.passed else 1)


@click.command()
@click.option("--model", default=None, help="Checkpoint directory or Hub id (default: the embedded model).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind (0.0.0.0: every interface; set --api-key then).")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=8080, show_default=True,
              help="0: a free port (the log line says which).")
@click.option("--n-ctx", type=click.IntRange(min=1), default=None,
              help="Context length each request gets; requests queue on one context (default: min(4096, the "
                   "model's training context)).")
@click.option("--api-key", default=None, envvar="HFVIEW_API_KEY",
              help="Require 'Authorization: Bearer KEY' (or env HFVIEW_API_KEY).")
@click.option("--precision", type=PRECISION, default="auto", show_default=True,
              help="The view's outtype (what convert_hf_to_gguf.py --outtype would write).")
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit).")
@click.option("--rpc", default=None, metavar="HOST:PORT,...",
              help="llama.cpp rpc-servers to split the layers over (needs a build with -DGGML_RPC=ON).")
@click.pass_context
def serve(ctx, model, host, port, n_ctx, api_key, precision, revision, rpc):
    """OpenAI-compatible server (llama-cpp-python's) over the view: /v1/models, /v1/completions,
    /v1/chat/completions, /health. Ctrl-C stops it (exit 0)."""
    from .serve import serve as run

    try:
        run(model, host=host, port=port, n_ctx=n_ctx, api_key=api_key, precision=precision, revision=revision,
            rpc=[e.strip() for e in rpc.split(",") if e.strip()] if rpc else None, log=_note)
    except KeyboardInterrupt:
        # Ctrl-C while loading, before serving (once serving, Ctrl-C is how it stops: exit 0)
        ctx.exit(130)


from tokenizer.commands import COMMANDS as _TOKENIZER_COMMANDS  # noqa: E402 - tokenize, tokenizer-check

COMMANDS = [generate, parity, serve, *_TOKENIZER_COMMANDS]
