"""The `hfview` command line."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from .errors import HfviewError

OUTTYPES = click.Choice(["auto", "f32", "f16", "bf16", "q8_0"])
FP8_AS_Q8_HELP = ("An FP8 checkpoint's matrices written as Q8_0 (F16 where a row is not whole blocks of 32), the "
                  "rest at --outtype: the converter's --fp8-as-q8.")
QUANT_HELP = ("A llama-quantize file type (Q4_K_M, Q8_0, ...), applied over --outtype: the file "
              "llama_model_quantize would write from the converter's.")
IMATRIX_HELP = "llama-imatrix's importance matrix (GGUF or legacy .dat), as llama-quantize --imatrix reads it."


INTERNAL_ERROR = 70  # sysexits' EX_SOFTWARE: hfview itself failed, not the input


class _Group(click.Group):
    """No traceback unless --debug: a refusal (HfviewError) or a system error (OSError) prints as one line
    on stderr and exits 1; anything else is an internal error, one line naming the command and asking for
    the --debug output in a bug report, exit 70."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # usage errors and exits are click's own business
        except BrokenPipeError:  # `hfview families | head`: the reader has all it wants
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
            ctx.exit(0)
        except Exception as e:  # noqa: BLE001 - the one place every failure becomes a message
            if ctx.params.get("debug") or "--debug" in sys.argv:
                raise
            command = ctx.invoked_subcommand or ctx.info_name
            if isinstance(e, (HfviewError, OSError)):
                click.echo(f"hfview: {_one_line(e)}", err=True)
                ctx.exit(1)
            click.echo(f"hfview: internal error in `hfview {command}` ({type(e).__name__}: {_one_line(e)}); "
                       f"please report it with the output of the same command run as `hfview --debug {command} ...`",
                       err=True)
            ctx.exit(INTERNAL_ERROR)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


@click.group(cls=_Group)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def main(debug: bool) -> None:
    """Run Hugging Face checkpoints with llama.cpp, read in place as the GGUF the converter would write."""


@main.command()
@click.argument("model")
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit); default main.")
@click.option("--outtype", type=OUTTYPES, default="auto", show_default=True)
@click.option("--quant", default=None, metavar="TYPE", help=QUANT_HELP)
@click.option("--imatrix", default=None, metavar="FILE", help=IMATRIX_HELP)
@click.option("--fp8-as-q8", is_flag=True, help=FP8_AS_Q8_HELP)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def inspect(model: str, revision: str | None, outtype: str, quant: str | None, imatrix: str | None,
            fp8_as_q8: bool, as_json: bool) -> None:
    """Architecture, KV and tensor table of MODEL's view (a directory or Hub id; reads headers only)."""
    from .checkpoint import HfCheckpoint
    from .inspect import describe, render
    from .runner.resolve import local_dir

    path, model_revision = local_dir(model, revision)
    info = {"model_revision": model_revision, **describe(HfCheckpoint(path, outtype, quant=quant, imatrix=imatrix,
                                                                      vocab_apart=False, fp8_as_q8=fp8_as_q8))}
    click.echo(json.dumps(info, indent=1, default=str) if as_json else render(info))


@main.command()
@click.argument("model")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--revision", default=None, help="Hub revision (branch, tag or commit); default main.")
@click.option("--outtype", type=OUTTYPES, default="auto", show_default=True)
@click.option("--quant", default=None, metavar="TYPE", help=QUANT_HELP)
@click.option("--imatrix", default=None, metavar="FILE", help=IMATRIX_HELP)
@click.option("--fp8-as-q8", is_flag=True, help=FP8_AS_Q8_HELP)
@click.option("--progress/--no-progress", default=True)
def export(model: str, out: Path, revision: str | None, outtype: str, quant: str | None, imatrix: str | None,
           fp8_as_q8: bool, progress: bool) -> None:
    """Write MODEL's view to OUT as a GGUF file (byte-identical to convert_hf_to_gguf.py's, and with --quant to
    llama-quantize's over it; for a family the converter has no class for, hfview's own mapping, said so)."""
    from .checkpoint import HfCheckpoint
    from .export import export as write
    from .runner.resolve import local_dir

    ckpt = HfCheckpoint(local_dir(model, revision)[0], outtype, quant=quant, imatrix=imatrix, vocab_apart=False,
                        fp8_as_q8=fp8_as_q8)
    write(ckpt, out, progress=progress)
    click.echo(f"wrote {out} ({ckpt.size:,} bytes, {ckpt.arch}, {ckpt.outtype}"
               f"{', ' + ckpt.quant if ckpt.quant else ''})"
               + (f"; no converter class: {ckpt.family.no_converter}" if ckpt.family.no_converter else ""), err=True)
    if ckpt.load_kv:
        from .checkpoint import override_kv_flags
        click.echo(f"llama.cpp loads {out} only with {' '.join(override_kv_flags(ckpt.load_kv))} (as it loads the "
                   f"converter's file of this checkpoint)", err=True)
    for key, values in ckpt.load_arrays.items():
        click.echo(f"llama.cpp runs {out} (as the converter's file of this checkpoint) only with {key} read as "
                   f"{values}: an array, which llama-cli cannot override; hfview's runner presents it so", err=True)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def families(as_json: bool) -> None:
    """The model types the view reads: each with the llama.cpp architecture it is presented as and the
    `architectures` entries it reads; then those it refuses, with why."""
    from . import families as registry

    by_type: dict[str, dict] = {}
    own_format = []
    for f in registry.FAMILIES:
        if f.config_file != "config.json":  # Mistral's params.json: reached by its file, not a model_type
            own_format.append({"family": f.name, "config_file": f.config_file, "gguf_arch": f.gguf_arch})
            continue
        for t in f.model_types:  # a model_type two families share (bailing_moe) is one row, each arch named
            row = by_type.setdefault(t, {"model_type": t, "gguf_arch": [], "architectures": []})
            row["gguf_arch"].append(f.gguf_arch)
            row["architectures"].extend(f.architectures)
    read = [{**r, "gguf_arch": "/".join(dict.fromkeys(r["gguf_arch"]))} for _, r in sorted(by_type.items())]
    refused = {**registry.NOT_PRESENTED, **registry.NOT_COMPUTABLE}
    if as_json:
        click.echo(json.dumps({"read": read, "own_format": own_format, "refused": refused}, indent=1))
        return
    width = max(len(r["model_type"]) for r in read)
    for r in read:
        click.echo(f"{r['model_type']:<{width}}  {r['gguf_arch']:<16} {', '.join(r['architectures'])}")
    for r in own_format:
        click.echo(f"{r['config_file']:<{width}}  {r['gguf_arch']:<16} (hfview.families.{r['family']}: no model_type)")
    for model_type, why in sorted(refused.items()):
        click.echo(f"{model_type:<{width}}  refused: {why}")


def _register_commands() -> None:
    """generate / parity / ... live beside their code in runner/, tokenize / tokenizer-check in tokenizer/, mount /
    umount in mount.py: the CLI imports their COMMANDS (they never import the CLI)."""
    from .mount import COMMANDS as MOUNT_COMMANDS
    from .runner.commands import COMMANDS as RUNNER_COMMANDS
    from .tokenizer.commands import COMMANDS as TOKENIZER_COMMANDS

    for command in (*RUNNER_COMMANDS, *TOKENIZER_COMMANDS, *MOUNT_COMMANDS):
        main.add_command(command)


_register_commands()

if __name__ == "__main__":
    main()
