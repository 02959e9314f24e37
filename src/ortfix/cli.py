"""The click layer: parse options, call the library, render. Nothing below this module imports click."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from ortfix import __version__
from ortfix.errors import ExitCode, OrtfixError

F = TypeVar("F", bound=Callable[..., Any])


def _target_options(func: F) -> F:
    func = click.option("--json", "as_json", is_flag=True, help="Print a JSON document instead of text.")(func)
    func = click.option(
        "--python", "python", metavar="PATH",
        help="Interpreter (or environment folder) to inspect; default: the activated venv/conda env, else this "
             "Python.")(func)
    return func


def _handle_errors(func: F) -> F:
    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OrtfixError as exc:
            click.echo(f"ortfix: error: {exc.one_line()}", err=True)
            sys.exit(int(exc.exit_code))
        except KeyboardInterrupt:
            click.echo("ortfix: interrupted", err=True)
            sys.exit(int(ExitCode.INTERRUPTED))

    return wrapper  # type: ignore[return-value]


def _emit_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ortfix")
def main() -> None:
    """Make ONNX Runtime actually run on the GPU.

    \b
    ortfix check   what is wrong with the GPU path, with evidence
    ortfix plan    the exact changes that would fix it (changes nothing)
    """


@main.command()
@_target_options
@click.option("--driver", "driver_version", metavar="VERSION", help="Assume this NVIDIA driver version.")
@click.option("--compute-capability", metavar="X.Y", help="Assume a GPU of this compute capability.")
@_handle_errors
def check(python: str | None, as_json: bool, driver_version: str | None, compute_capability: str | None) -> None:
    """Detect the ONNX Runtime GPU stack and explain what is wrong.

    Exit status: 0 healthy, 1 problems found, 2 could not run.

    \b
    Examples:
      ortfix check
      ortfix check --python ~/venvs/infer/bin/python --json
    """
    from ortfix.commands import run_check
    from ortfix.report import check_json, render_check

    result = run_check(python, driver_version=driver_version, compute_capability=compute_capability)
    if as_json:
        _emit_json(check_json(result.facts, result.findings, int(result.exit_code)))
    else:
        click.echo(render_check(result.facts, result.findings))
    sys.exit(int(result.exit_code))


@main.command()
@_target_options
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=Path),
              help="Save the plan as JSON for a later `ortfix apply FILE`.")
@click.option("--ort-version", metavar="V", help="Plan for this onnxruntime-gpu version.")
@click.option("--cuda", "cuda_major", type=click.IntRange(10, 20), metavar="MAJOR", help="Plan for this CUDA major.")
@click.option("--driver", "driver_version", metavar="VERSION",
              help="Plan for a machine with this NVIDIA driver (e.g. a GPU host, planned from a CPU build host).")
@click.option("--compute-capability", metavar="X.Y", help="Plan for a GPU of this compute capability.")
@click.option("--hook", type=click.Choice(["auto", "conda", "preload", "none"]), default="auto", show_default=True,
              help="How to make libraries findable: conda activate.d hooks, a preload hook, or not at all.")
@_handle_errors
def plan(python: str | None, as_json: bool, output: Path | None, ort_version: str | None, cuda_major: int | None,
         driver_version: str | None, compute_capability: str | None, hook: str) -> None:
    """Preview the exact changes that would fix the GPU path. Nothing is touched.

    Exit status: 0 nothing to change, 1 changes are pending or problems remain, 2 could not run.

    \b
    Examples:
      ortfix plan
      ortfix plan --ort-version 1.22.0 -o plan.json
      ortfix plan --driver 535.104.12 --compute-capability 8.6
    """
    from ortfix.commands import run_plan
    from ortfix.plan import PlanOptions
    from ortfix.report import render_plan

    if compute_capability and not _valid_cc(compute_capability):
        raise OrtfixError(f"--compute-capability {compute_capability!r}: expected MAJOR.MINOR such as 8.6")
    result = run_plan(python, PlanOptions(ort_version=ort_version, cuda_major=cuda_major, hook=hook),
                      driver_version=driver_version, compute_capability=compute_capability)
    doc = result.plan.to_json()
    if output is not None:
        try:
            output.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
        except OSError as exc:
            raise OrtfixError(f"cannot write {output}: {exc.strerror or exc}") from exc
    if as_json:
        _emit_json(doc)
    else:
        click.echo(render_plan(result.plan))
        if output is not None:
            click.echo(f"Saved to {output}.")
    sys.exit(int(ExitCode.OK if result.plan.empty and not result.plan.unresolved else ExitCode.PROBLEMS))


def _valid_cc(text: str) -> bool:
    parts = text.split(".")
    return len(parts) == 2 and all(p.isdigit() for p in parts)


@main.command()
@click.argument("text", required=False)
@click.option("--file", "log_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Read the log from FILE ('-' for standard input).")
@click.option("--python", "python", metavar="PATH", help="Connect the explanation to this environment's check.")
@click.option("--no-check", is_flag=True, help="Only explain the text; do not look at this machine.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON document instead of text.")
@_handle_errors
def explain(text: str | None, log_file: Path | None, python: str | None, no_check: bool, as_json: bool) -> None:
    """Explain an ONNX Runtime / CUDA / cuDNN error message, and why it happens on this machine.

    TEXT is the message; without it, the log is read from --file or standard input.

    Exit status: 0 recognised, 1 not recognised, 2 could not run.

    \b
    Examples:
      ortfix explain "libcudnn.so.9: cannot open shared object file"
      python app.py 2>&1 | ortfix explain
    """
    from ortfix.commands import run_explain
    from ortfix.report import explain_json, render_explain

    if text is None:
        if log_file is not None and str(log_file) != "-":
            try:
                text = log_file.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise OrtfixError(f"cannot read {log_file}: {exc.strerror or exc}") from exc
        elif log_file is not None or not sys.stdin.isatty():
            text = sys.stdin.read()
        else:
            raise OrtfixError("nothing to explain", hint='give the message as an argument, --file LOG, or pipe it in')
    result = run_explain(text, python=python, check=not no_check)
    if as_json:
        _emit_json(explain_json(result))
    else:
        click.echo(render_explain(result))
    sys.exit(int(ExitCode.OK if result.explanations else ExitCode.PROBLEMS))


@main.group()
def matrix() -> None:
    """Show or validate the compatibility matrix (ORT ↔ CUDA ↔ cuDNN ↔ driver)."""


@matrix.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print the matrix as JSON.")
@_handle_errors
def matrix_show(as_json: bool) -> None:
    """Print the builds, CUDA majors and NVIDIA wheels ortfix knows."""
    from dataclasses import asdict

    from ortfix.matrix import load_matrix
    from ortfix.report import render_matrix

    m = load_matrix()
    if as_json:
        _emit_json({"schema": "ortfix.matrix/1", **asdict(m)})
    else:
        click.echo(render_matrix(m))


@matrix.command("validate")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@_handle_errors
def matrix_validate(files: tuple[Path, ...]) -> None:
    """Validate matrix FILES (default: the matrix ortfix uses); prints file:line of the first problem."""
    from ortfix.matrix import compat_files, default_compat_dir, validate_document

    paths = list(files) or compat_files(default_compat_dir())
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise OrtfixError(f"cannot read {path}: {exc.strerror or exc}") from exc
        doc = validate_document(data, str(path))
        click.echo(f"{path}: ok ({doc['kind']}, schema {doc['schema_version']}, data {doc['data_version']})")
