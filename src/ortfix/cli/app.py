"""The click layer: parse options, call the command functions (commands/), render their results (text, or the JSON
envelope of cli/output.py) and exit with the code the result carries. Nothing below this package imports click.

Over 400 lines: most of it is the commands' help texts (what `--help` prints); the command bodies are a few lines
each, and spreading the click declarations over several modules would only hide which commands exist. The help
texts are marked English (`help=N_(...)`), translated where click renders them (cli/helptext.py)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

import click

from ortfix import __version__
from ortfix.cli import helptext, options
from ortfix.cli.output import Carried, Command, dump_json, envelope, print_error
from ortfix.cli.streams import fit
from ortfix.errors import ExitCode, OrtfixError
from ortfix.i18n import N_, Msg, _, tr
from ortfix.safetext import visible, visible_lines

if TYPE_CHECKING:
    from ortfix.check.facts import ProbeRun
    from ortfix.cli.invocation import Invocation
    from ortfix.commands.requests import PlanInputs
    from ortfix.target.choose import TargetDescription

F = TypeVar("F", bound=Callable[..., Any])



def _echo(text: str, err: bool = False) -> None:
    """Everything a command prints goes through here: what the environment said (versions, paths, pip's output) is
    data, so its controls are shown escaped (safetext.visible_lines); the lines ortfix laid out stay lines. The
    symbols the stream's encoding cannot carry are written as ASCII (cli/streams.py)."""
    click.echo(fit(visible_lines(text), sys.stderr if err else sys.stdout), err=err)


def _target_options(func: F) -> F:
    func = click.option("--json", "as_json", is_flag=True, help=N_("Print a JSON document instead of text."))(func)
    func = click.option(
        "--python", "python", metavar="PATH",
        help=N_("Interpreter (or environment folder) to work on; default: the activated venv/conda env "
             "(VIRTUAL_ENV, CONDA_PREFIX), else the python3 on PATH."))(func)
    return func


def _change_options(func: F) -> F:
    """--project and --with, as plan and apply both take them (apply: when planning now)."""
    func = options.with_(N_("Also provide an optional part (tensorrt: the TensorRT libraries of the build's TensorRT "
                            "major, tensorrt-cuNN-libs, made findable like the CUDA libraries)."))(func)
    func = click.option(
        "--project", "project", is_flag=True,
        help=N_("Also change the project around the environment (uv, poetry, pdm: their own remove/add; "
                "requirements files: the onnxruntime line) so that its next sync keeps the fix; journaled and "
                "rolled back with the rest."))(func)
    return func


class _Group(helptext.Group):
    """The top-level group: whatever goes wrong in a command (its body, an option's validation, a subcommand group)
    goes on to the entry point, which ends it the way every command ends (output.ended); `ortfix --debug` adds the
    traceback of a bug. Only Ctrl-C needs carrying: click would make it its own "Aborted!"."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Carried(exc) from exc


def run(invocation: Invocation) -> int:
    """Run the command line through click; its exit code. A usage error is click's own message on standard error
    (and, under --json, the error envelope on standard output); anything else that ends a command is raised to the
    entry point (ortfix/__main__.py), the one place that renders it."""
    argv = list(invocation.argv)
    try:
        code = main.main(args=argv, prog_name="ortfix", standalone_mode=False, obj={"lang": invocation.lang})
    except click.ClickException as exc:
        exc.show()
        command = invocation.json_command()
        if command is not None:
            print_error(command, exc.exit_code, exc.format_message())
        return exc.exit_code
    except click.exceptions.Abort:
        _echo(_("Aborted!"), err=True)
        return 1
    return code if isinstance(code, int) else 0


class _Result(Protocol):
    @property
    def exit_code(self) -> ExitCode: ...


R = TypeVar("R", bound=_Result)


def _finish(command: Command, result: R, as_json: bool, to_json: Callable[[R], Mapping[str, Any]],
            render: Callable[[R], str]) -> NoReturn:
    """Print the result (its JSON envelope, or text) and exit with the code it carries."""
    if as_json:
        _echo(dump_json(envelope(command, result.exit_code, to_json(result))))
    else:
        _echo(render(result))
    sys.exit(int(result.exit_code))


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]}, help=N_(
    "Make ONNX Runtime actually run on the GPU.\n"
    "\n"
    "\b\n"
    "ortfix check     what is wrong with the GPU path, with evidence\n"
    "ortfix plan      the exact changes that would fix it (changes nothing)\n"
    "ortfix apply     make those changes as one transaction; verify; undo all if it fails\n"
    "ortfix rollback  undo the last transaction, byte for byte\n"
    "ortfix history   the transactions made in an environment (show one, prune stashes)\n"
    "ortfix verify    proof: the libraries load, the session gets CUDA, a model matches the CPU\n"
    "ortfix tune      CPU vs CUDA under the provider options that matter for dynamic shapes\n"
    "ortfix explain   what an ORT/CUDA/cuDNN error message means here\n"
    "ortfix matrix    show or validate the compatibility matrix\n"
    "ortfix export    the plan as requirements, a Dockerfile fragment, or sh/ps1 scripts with their undo\n"
    "ortfix wheelhouse  download what the plan needs (and ortfix) for an offline machine\n"
    "\n"
    "With --json every command prints one JSON document: schema, command, exit_code, then its data (an error too)."
))
@click.version_option(__version__, prog_name="ortfix")
@click.option("--debug", is_flag=True,
              help=N_("Show the traceback of an unexpected error (a bug in ortfix); also ORTFIX_DEBUG=1."))
@click.option("--lang", metavar="LANG", help=helptext.LANG_HELP)
def main(debug: bool, lang: str | None) -> None:
    """--debug and --lang (here or after the command's name) are read by the entry point (cli/invocation.py)."""


@main.command(help=N_(
    "Detect the ONNX Runtime GPU stack and explain what is wrong.\n"
    "\n"
    "Exit status: 0 healthy, 1 problems found, 2 could not run.\n"
    "\n"
    "Findings come errors first, those `ortfix plan` can fix before the others. The library tables show only the "
    "libraries that are a problem (not found, shadowed, another CUDA major) and count the rest; --verbose lists all. "
    "The TensorRT provider's table and findings appear only where TensorRT libraries are installed or findable, or "
    "with --with tensorrt.\n"
    "\n"
    "An identical earlier check is replayed while nothing it looked at has changed (its probe of the environment "
    "still runs); --fresh looks at everything again.\n"
    "\n"
    "\b\n"
    "Examples:\n"
    "  ortfix check\n"
    "  ortfix check --python ~/venvs/infer/bin/python --json\n"
    "  ortfix check --verbose"
))
@_target_options
@options.driver(N_("Assume this NVIDIA driver version."))
@options.compute_capability(N_("Assume a GPU of this compute capability."))
@click.option("--fresh", is_flag=True,
              help=N_("Look at everything again, even when nothing changed since an identical earlier check."))
@click.option("--verbose", "-v", is_flag=True,
              help=N_("List every library the provider needs, not only those that are a problem."))
@options.with_(N_("Judge an optional part even where none is installed (tensorrt: the TensorRT provider's libraries)."))
def check(python: str | None, as_json: bool, driver_version: str | None, compute_capability: str | None,
          fresh: bool, verbose: bool, with_: tuple[str, ...]) -> None:
    from ortfix.cli.fastcheck import check_command

    sys.exit(check_command(python, as_json, driver_version, compute_capability, _echo, fresh=fresh, verbose=verbose,
                           with_=with_, lang=click.get_current_context().find_root().obj["lang"]))


@main.command(help=N_(
    "Preview the exact changes that would fix the GPU path. Nothing is touched.\n"
    "\n"
    "Exit status: 0 nothing to change, 1 changes are pending or problems remain, 2 could not run.\n"
    "\n"
    "\b\n"
    "Examples:\n"
    "  ortfix plan\n"
    "  ortfix plan --ort-version 1.22.0 -o plan.json\n"
    "  ortfix plan --driver 535.104.12 --compute-capability 8.6"
))
@_target_options
@click.option("-o", "--output", type=click.Path(path_type=Path), metavar="FILE",
              help=N_("Save the plan as JSON for a later `ortfix apply FILE` (a new file, renamed into place)."))
@options.ort_version(N_("Plan for this onnxruntime-gpu version."))
@options.cuda(N_("Plan for this CUDA major."))
@options.driver(N_("Plan for a machine with this NVIDIA driver (e.g. a GPU host, planned from a CPU build host)."))
@options.compute_capability(N_("Plan for a GPU of this compute capability."))
@options.hook(N_("How to make libraries findable: conda activate.d hooks, a preload hook (Windows: a PATH hook), the "
              "Windows user PATH in the registry (user-path), or not at all."))
@options.installer(N_("Who installs packages: uv when it is found and your pip configuration translates to it, "
                      "else the environment's pip (auto); the environment's pip; or uv."))
@_change_options
def plan(python: str | None, as_json: bool, output: Path | None, ort_version: str | None, cuda: str | None,
         driver_version: str | None, compute_capability: str | None, hook: str, installer: str,
         project: bool, with_: tuple[str, ...]) -> None:
    from ortfix.cli.render import plan_document, render_plan
    from ortfix.commands.inputs import plan_request
    from ortfix.commands.plan import PlanResult, run_plan
    from ortfix.commands.requests import PlanInputs

    python, options, output = plan_request(python, PlanInputs(ort_version, cuda, hook, installer, driver_version,
                                                              compute_capability, project, with_), output)
    result = run_plan(python, options)
    if output is not None:
        from ortfix.outfile import write_output

        write_output(output, dump_json(plan_document(result)) + "\n")

    def text(r: PlanResult) -> str:
        saved = "" if output is None else "\n" + tr("Saved to {output}.", output=str(output))
        return render_plan(r.plan, r.check.target) + saved

    _finish(Command.PLAN, result, as_json, plan_document, text)


@main.command(help=N_(
    "Explain an ONNX Runtime / CUDA / cuDNN error message, and why it happens on this machine.\n"
    "\n"
    "TEXT is the message; without it, the log is read from --file or standard input.\n"
    "\n"
    "Exit status: 0 recognised, 1 not recognised, 2 could not run.\n"
    "\n"
    "\b\n"
    "Examples:\n"
    "  ortfix explain \"libcudnn.so.9: cannot open shared object file\"\n"
    "  python app.py 2>&1 | ortfix explain"
))
@click.argument("text", required=False)
@click.option("--file", "log_file", type=click.Path(path_type=Path), metavar="FILE",
              help=N_("Read the log from FILE ('-' for standard input)."))
@click.option("--python", "python", metavar="PATH",
              help=N_("Connect the explanation to this environment's check."))
@click.option("--no-check", is_flag=True, help=N_("Only explain the text; do not look at this machine."))
@click.option("--json", "as_json", is_flag=True, help=N_("Print a JSON document instead of text."))
def explain(text: str | None, log_file: Path | None, python: str | None, no_check: bool, as_json: bool) -> None:
    from ortfix.cli.render import explain_json, render_explain
    from ortfix.commands.explain import run_explain
    from ortfix.commands.inputs import explain_request

    request = explain_request(python, text, log_file, sys.stdin, check=not no_check)
    result = run_explain(request.text, python=request.python, check=request.check)
    _finish(Command.EXPLAIN, result, as_json, explain_json, render_explain)


@main.group(help=N_(
    "Show or validate the compatibility matrix (ORT ↔ CUDA ↔ cuDNN ↔ driver)."
))
def matrix() -> None:
    pass  # the subcommands do the work


@matrix.command("show", help=N_(
    "Print the builds, CUDA majors and NVIDIA wheels ortfix knows."
))
@click.option("--json", "as_json", is_flag=True, help=N_("Print the matrix as JSON."))
def matrix_show(as_json: bool) -> None:
    from ortfix.cli.render import matrix_json, render_matrix
    from ortfix.commands.matrix import show_matrix

    _finish(Command.MATRIX_SHOW, show_matrix(), as_json, matrix_json, lambda r: render_matrix(r.matrix))


@matrix.command("validate", help=N_(
    "Validate matrix FILES (default: the matrix ortfix uses); prints file:line of the first problem."
))
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
def matrix_validate(files: tuple[Path, ...]) -> None:
    from ortfix.commands.matrix import validate_matrix_files

    for line in validate_matrix_files(files):
        _echo(line)


def _plan_options(func: F) -> F:
    """The options a plan is made with (export and wheelhouse take them as `plan` does)."""
    for option in reversed((
            options.ort_version(N_("Plan for this onnxruntime-gpu version.")),
            options.cuda(N_("Plan for this CUDA major.")),
            options.driver(N_("Plan for a machine with this NVIDIA driver (the image's or the host's).")),
            options.compute_capability(N_("Plan for a GPU of this compute capability.")),
            options.hook(N_("How to make libraries findable.")),
            options.with_(N_("Also provide an optional part (tensorrt: the TensorRT libraries, as `plan --with`).")))):
        func = option(func)
    return func


def _export_inputs(ort_version: str | None, cuda: str | None, driver_version: str | None,
                   compute_capability: str | None, hook: str, with_: tuple[str, ...]) -> PlanInputs:
    """What export and wheelhouse plan with (_plan_options)."""
    from ortfix.commands.requests import PlanInputs

    return PlanInputs(ort_version=ort_version, cuda=cuda, hook=hook, driver_version=driver_version,
                      compute_capability=compute_capability, with_=with_)


@main.command(help=N_(
    "Write the plan for places where ortfix does not run at fix time. Nothing in the target changes.\n"
    "\n"
    "FORMAT: requirements (exact pins, hashes where pip knows every one, a comment per reason), dockerfile (a "
    "fragment: one RUN layer `pip uninstall -y … && pip install …` and the ENV that makes the libraries findable, "
    "its paths mapped to --prefix-in-image), sh or ps1 (a script with the plan's exact commands, and its undo "
    "script). The plan is made now, or PLAN.json is accepted only while it is what ortfix plans now (as `apply "
    "PLAN.json`). For an image or another host, plan with --driver and --compute-capability of that machine.\n"
    "\n"
    "Exit status: 0 written, 2 could not run.\n"
    "\n"
    "\b\n"
    "Examples:\n"
    "  ortfix export requirements --python ~/venvs/infer -o requirements.txt\n"
    "  ortfix export dockerfile --driver 535.104.12 --compute-capability 8.0 --prefix-in-image /opt/venv\n"
    "  ortfix export sh plan.json --python /opt/venv -o fix.sh"
))
@_target_options
@click.argument("fmt", metavar="FORMAT", type=click.Choice(["requirements", "dockerfile", "sh", "ps1"]))
@click.argument("plan_file", required=False, type=click.Path(path_type=Path), metavar="[PLAN.json]")
@click.option("-o", "--output", type=click.Path(path_type=Path), metavar="FILE",
              help=N_("Write FILE (sh/ps1: also its undo script, FILE.undo.sh / FILE.undo.ps1)."))
@click.option("--prefix-in-image", metavar="PATH",
              help=N_("dockerfile: the environment's path in the image (absolute, no ':'); its library folders are "
                   "mapped there. Default: the exporting environment's path (with a warning)."))
@_plan_options
def export(python: str | None, as_json: bool, fmt: str, plan_file: Path | None, output: Path | None,
           prefix_in_image: str | None, ort_version: str | None, cuda: str | None,
           driver_version: str | None, compute_capability: str | None, hook: str,
           with_: tuple[str, ...]) -> None:
    from ortfix.cli.output import Command
    from ortfix.cli.render_export import export_json, render_export
    from ortfix.commands.export import run_export, undo_path
    from ortfix.commands.inputs import export_request
    from ortfix.export.model import ExportFormat

    request = export_request(python, fmt, plan_file,
                             _export_inputs(ort_version, cuda, driver_version, compute_capability, hook, with_),
                             prefix_in_image=prefix_in_image, output=output)
    if request.format is ExportFormat.DOCKERFILE and request.image_prefix is None:
        _echo("ortfix: " + _("warning: the paths are the exporting environment's; if the image's environment is "
                             "elsewhere, name it with --prefix-in-image PATH"), err=True)
    from ortfix.i18n import named_language

    lang = named_language(click.get_current_context().find_root().obj["lang"])  # --lang, ORTFIX_LANG: else English
    result = run_export(request.format, request.python, request.plan_file, request.options, request.output,
                        request.image_prefix, language=lang)
    if result.undo is not None and output is None and not as_json:
        name = undo_path(Path(f"fix.{fmt}"), request.format)
        _echo("ortfix: " + tr("the undo script is written with -o: `{command}` writes {file} and {undo}",
                              command=f"ortfix export {fmt} -o fix.{fmt}", file=f"fix.{fmt}", undo=str(name)),
              err=True)
    _finish(Command.EXPORT, result, as_json, export_json, render_export)


@main.command(help=N_(
    "Download everything the plan needs for an offline machine, and ortfix itself, into DIR.\n"
    "\n"
    "The plan's packages with their dependencies and ortfix with its own (built from the running checkout or "
    "editable install, with its version; else from the index), as wheels, with your pip configuration; a manifest "
    "(ortfix-wheelhouse.json) says what each file is, why, and its sha256, and `apply` and the installer take from "
    "DIR only the files it lists. Prints the commands that use it. While it downloads, pip's progress bars show on "
    "standard error when it is a terminal; elsewhere one line per file says the files and bytes so far.\n"
    "\n"
    "Exit status: 0 downloaded, 2 could not run (index unreachable, no wheel for the platform, DIR not empty or not "
    "writable).\n"
    "\n"
    "\b\n"
    "Examples:\n"
    "  ortfix wheelhouse --python ~/venvs/infer -d wheels/\n"
    "  ortfix wheelhouse plan.json -d wheels/ --platform manylinux_2_28_x86_64 --python-version 3.11"
))
@_target_options
@click.argument("plan_file", required=False, type=click.Path(path_type=Path), metavar="[PLAN.json]")
@click.option("-d", "--dest", "folder", required=True, type=click.Path(path_type=Path), metavar="DIRECTORY",
              help=N_("The folder to download into: new or empty (made if missing)."))
@click.option("--platform", "platform_tag", metavar="TAG",
              help=N_("Wheels for this platform (e.g. manylinux_2_28_x86_64, win_amd64); default: the target's."))
@click.option("--python-version", metavar="X.Y", help=N_("Wheels for this CPython version; default: the target's."))
@_plan_options
def wheelhouse(python: str | None, as_json: bool, plan_file: Path | None, folder: Path, platform_tag: str | None,
               python_version: str | None, ort_version: str | None, cuda: str | None,
               driver_version: str | None, compute_capability: str | None, hook: str,
               with_: tuple[str, ...]) -> None:
    from ortfix.cli.output import Command
    from ortfix.cli.render_export import render_wheelhouse, wheelhouse_json
    from ortfix.commands.inputs import wheelhouse_request
    from ortfix.commands.wheelhouse import run_wheelhouse
    from ortfix.export.pipprogress import DownloadProgress

    request = wheelhouse_request(python, plan_file,
                                 _export_inputs(ort_version, cuda, driver_version, compute_capability, hook, with_),
                                 folder=folder, platform_tag=platform_tag, python_version=python_version)

    def terminal(text: str) -> None:  # pip's own output with its progress bars, escaped (pipprogress.terminal_text)
        sys.stderr.write(text)
        sys.stderr.flush()

    progress = DownloadProgress(line=lambda line: _echo(visible(f"ortfix: wheelhouse: {line}"), err=True),
                                terminal=terminal if sys.stderr.isatty() else None)
    result = run_wheelhouse(request.python, request.plan_file, request.options, request.folder, request.target,
                            progress)
    _finish(Command.WHEELHOUSE, result, as_json, wheelhouse_json, render_wheelhouse)


# ---------------------------------------------------------------------------------------------------------------------
# Transactions: apply, rollback, history (commands/apply, rollback, history do the work; render_tx.py renders)
# ---------------------------------------------------------------------------------------------------------------------


def _confirm(question: str) -> bool:
    """Ask `question` (in the user's language); the answers stay click's y/yes and n/no in every language."""
    return click.confirm(question, default=False, err=True)


def _require_confirmation_possible(yes: bool) -> None:
    if not yes and not sys.stdin.isatty():
        raise OrtfixError(Msg(N_("refusing to change the environment without confirmation: standard input is not a "
                                 "terminal")), hint=Msg(N_("pass --yes for unattended use")))


def _named(target: TargetDescription, as_json: bool) -> TargetDescription:
    """`target`, named on the first line of the command's output (before any work starts)."""
    if not as_json:
        _echo(visible(target.line_msg().text()))
    return target


def _located(python: str | None, as_json: bool) -> TargetDescription:
    """The environment a transaction command works on (no full probe: see target/locate.py)."""
    from ortfix.target.locate import locate_environment

    return _named(locate_environment(python), as_json)


def _described(python: str | None, as_json: bool) -> tuple[TargetDescription, ProbeRun]:
    """The target of verify and tune, and the probe's run they pass on (it runs once)."""
    from ortfix.commands.check import describe_target

    target, probe_run = describe_target(python)
    return _named(target, as_json), probe_run


def _tx_ui(as_json: bool) -> Any:
    from ortfix.transaction.runner import Ui

    return Ui(echo=lambda line: _echo(visible(f"ortfix: {line}"), err=as_json),
              output=lambda line, is_err: _echo(visible(line), err=is_err or as_json))


@main.command(help=N_(
    "Fix the GPU path: plan, show the plan, ask, then apply it as one transaction.\n"
    "\n"
    "Every step is journaled before it runs and has an exact undo. After the last step a fresh process of the target "
    "interpreter must import onnxruntime and load every library the CUDA provider needs, and `ortfix check` must be "
    "clean of library/package errors; otherwise everything is rolled back. With PLAN.json (from `ortfix plan -o`), "
    "that plan is applied only if ortfix plans exactly the same for the environment now (same facts, options and "
    "actions): a plan file carries intent, and every command is built by ortfix itself. The environment is the one "
    "--python names (else the active one, else the python3 on PATH), never one named in the file. A system Python is "
    "changed only with --system; ortfix's own environment, when it is only the python3 on PATH, only with --python.\n"
    "\n"
    "On a machine without an NVIDIA driver (a CPU build host, a Docker build), --driver (or a plan made with it) "
    "applies for the GPU machine: everything that can be verified without a driver is (the libraries load in a fresh "
    "process, check is clean), and a line says the GPU part was not verified here: `ortfix verify` on the GPU "
    "machine does that.\n"
    "\n"
    "Exit status: 0 applied and verified (or nothing to do; with --driver on a machine without one: verified as far "
    "as it can be without a driver), 1 not applied (verification failed, cancelled) or, with --dry-run, changes "
    "pending; 2 could not run (nothing changed); 130 interrupted (rolled back).\n"
    "\n"
    "\b\n"
    "Examples:\n"
    "  ortfix apply\n"
    "  ortfix apply --dry-run\n"
    "  ortfix apply plan.json --python ~/venvs/infer --yes\n"
    "  ortfix apply --python ~/venvs/infer --yes --json\n"
    "  ortfix apply --driver 550.54.14 --compute-capability 8.6 --python /opt/venv --yes"
))
@_target_options
@click.argument("plan_file", required=False, type=click.Path(path_type=Path), metavar="[PLAN.json]")
@click.option("-y", "--yes", is_flag=True, help=N_("Do not ask (needed when standard input is not a terminal)."))
@click.option("--dry-run", is_flag=True, help=N_("Print every command and file change it would make; change nothing."))
@click.option("--keep-on-failure", is_flag=True,
              help=N_("If the final verification fails, keep the changes for inspection instead of rolling back."))
@options.ort_version(N_("Plan for this onnxruntime-gpu version (when planning now)."))
@options.cuda(N_("Plan for this CUDA major (when planning now)."))
@options.hook(N_("How to make libraries findable (when planning now)."))
@options.installer(N_("Who installs packages (when planning now): uv if found and your pip configuration translates, "
                   "else the environment's pip (auto); pip; or uv."))
@options.driver(N_("Apply for a machine with this NVIDIA driver (a CPU build host preparing a GPU deployment); with "
                "PLAN.json, only the driver it was planned for."))
@options.compute_capability(N_("Apply for a GPU of this compute capability; with PLAN.json, only the one it was "
                            "planned for."))
@click.option("--system", is_flag=True,
              help=N_("Allow changing a system Python (e.g. /usr/bin/python3), whose packages and hooks every program "
                   "using it sees; refused without it."))
@_change_options
def apply(python: str | None, as_json: bool, plan_file: Path | None, yes: bool, dry_run: bool,
          keep_on_failure: bool, ort_version: str | None, cuda: str | None, hook: str,
          installer: str, driver_version: str | None, compute_capability: str | None, system: bool,
          project: bool, with_: tuple[str, ...]) -> None:
    from ortfix.cli.render import render_plan
    from ortfix.cli.render_tx import apply_json, render_apply
    from ortfix.commands.apply import prepare_apply, run_apply
    from ortfix.commands.inputs import apply_request
    from ortfix.commands.requests import PlanInputs

    _require_confirmation_possible(yes or dry_run)
    request = apply_request(python, plan_file, PlanInputs(ort_version, cuda, hook, installer, driver_version,
                                                          compute_capability, project, with_))
    prepared = prepare_apply(*request)
    ask = not (yes or dry_run) and not prepared.plan.empty
    if not as_json or ask:
        _echo(render_plan(prepared.plan, prepared.check.target, applying=True), err=as_json)
        _echo("", err=as_json)
    if ask and not _confirm(tr("Apply these changes to {prefix}?", prefix=visible(prepared.plan.prefix))):
        raise OrtfixError(Msg(N_("cancelled; nothing was changed")), exit_code=ExitCode.PROBLEMS)
    result = run_apply(prepared, dry_run=dry_run, keep_on_failure=keep_on_failure, ui=_tx_ui(as_json), system=system)
    _finish(Command.APPLY, result, as_json, apply_json, render_apply)


@main.command(help=N_(
    "Undo the last ortfix transaction (or transaction ID), byte for byte, offline.\n"
    "\n"
    "Also finishes an apply or a rollback that was cut off (Ctrl-C, kill -9, power loss). A journal that was edited "
    "by hand is refused.\n"
    "\n"
    "Files another installer (or an edit) wrote after the apply stay where they are: one line per cause says how "
    "many (--verbose lists them), and a last line says whether the files the transaction touched are as they were "
    "before the apply.\n"
    "\n"
    "Exit status: 0 everything the transaction did is undone (also when later writes by others were left in place), "
    "1 something it did could not be undone (or cancelled), 2 could not run.\n"
    "\n"
    "\b\n"
    "Examples:\n"
    "  ortfix rollback\n"
    "  ortfix rollback 20251122T193012345Z-a1b2 --yes"
))
@_target_options
@click.argument("tx_id", required=False, metavar="[ID]")
@click.option("-y", "--yes", is_flag=True, help=N_("Do not ask (needed when standard input is not a terminal)."))
@click.option("-v", "--verbose", is_flag=True,
              help=N_("List every path not put back exactly, not only one line per cause (--json always lists them)."))
def rollback(python: str | None, as_json: bool, tx_id: str | None, yes: bool, verbose: bool) -> None:
    from ortfix.cli.render_tx import render_rollback, render_rollback_preview, rollback_json
    from ortfix.commands.inputs import python_option
    from ortfix.commands.rollback import run_rollback
    from ortfix.transaction.journal import Transaction

    _require_confirmation_possible(yes)
    target = _located(python_option(python), as_json)

    def confirm(tx: Transaction) -> bool:
        if yes:
            return True
        _echo(render_rollback_preview(tx.prefix, tx), err=True)
        return _confirm(_("Roll back?"))

    result = run_rollback(target, tx_id, ui=_tx_ui(as_json), confirm=confirm)
    _finish(Command.ROLLBACK, result, as_json, rollback_json, functools.partial(render_rollback, verbose=verbose))


@main.group(invoke_without_command=True, help=N_(
    "List ortfix transactions: time, what changed, status, stash size.\n"
    "\n"
    "\b\n"
    "Examples:\n"
    "  ortfix history\n"
    "  ortfix history show 20251122T193012345Z-a1b2\n"
    "  ortfix history prune --keep 3"
))
@_target_options
@click.pass_context
def history(ctx: click.Context, python: str | None, as_json: bool) -> None:
    from ortfix.commands.inputs import python_option

    ctx.ensure_object(dict)
    ctx.obj.update(python=python_option(python), as_json=as_json)
    if ctx.invoked_subcommand is not None:
        return
    from ortfix.cli.render_tx import history_json, render_history
    from ortfix.commands.history import run_history

    result = run_history(_located(python, as_json))
    _finish(Command.HISTORY, result, as_json, history_json, render_history)


@history.command("show", help=N_(
    "Show one transaction: every step, its state, what it changed, the verification and any rollback."
))
@_target_options
@click.argument("tx_id", metavar="ID")
@click.pass_context
def history_show(ctx: click.Context, python: str | None, as_json: bool, tx_id: str) -> None:
    from ortfix.cli.render_tx import render_show, show_json
    from ortfix.commands.history import run_history_show
    from ortfix.commands.inputs import python_option

    python = python_option(python) or ctx.obj.get("python")
    as_json = as_json or bool(ctx.obj.get("as_json"))
    result = run_history_show(_located(python, as_json), tx_id)
    _finish(Command.HISTORY_SHOW, result, as_json, show_json, render_show)


@history.command("prune", help=N_(
    "Free the disk: delete the stashes of all but the newest N finished transactions (they can no longer be rolled "
    "back; their journals stay listed)."
))
@_target_options
@click.option("--keep", required=True, metavar="N",
              help=N_("Keep the stashes of the newest N transactions (0 or more)."))
@click.pass_context
def history_prune(ctx: click.Context, python: str | None, as_json: bool, keep: str) -> None:
    from ortfix.cli.render_tx import prune_json, render_prune
    from ortfix.commands.history import run_prune
    from ortfix.commands.inputs import prune_keep

    given, kept = prune_keep(python, keep)
    python = given or ctx.obj.get("python")
    as_json = as_json or bool(ctx.obj.get("as_json"))
    result = run_prune(_located(python, as_json), kept)
    _finish(Command.HISTORY_PRUNE, result, as_json, prune_json, render_prune)


# ---------------------------------------------------------------------------------------------------------------------
# Does it really run on the GPU: verify (commands/verify.py) and tune (commands/tune.py)
# ---------------------------------------------------------------------------------------------------------------------


@main.command(help=N_(
    "Prove the GPU path works, level by level, each in a fresh process of the target interpreter.\n"
    "\n"
    "\b\n"
    "1 loader    every library the CUDA (and TensorRT, if installed) provider needs loads\n"
    "2 provider  a session created with CUDAExecutionProvider really gets it (session.get_providers())\n"
    "3 numbers   a small model runs on CUDA and matches the CPU within tolerance\n"
    "\n"
    "A provider that crashes (it does, without an NVIDIA driver) is a verdict, not a crash of ortfix. Each installed "
    "onnxruntime-genai package is reported too: its build (CPU, CUDA N, DirectML) against ORT's, and whether it "
    "loads.\n"
    "\n"
    "Exit status: 0 every level passed, 1 a level failed (or a genai package does not fit or load), 2 could not run, "
    "3 nothing failed but some level could not run on this machine (e.g. no NVIDIA driver; the output says which and "
    "why).\n"
    "\n"
    "\b\n"
    "Examples:\n"
    "  ortfix verify\n"
    "  ortfix verify --python ~/venvs/infer --json\n"
    "  ortfix verify --model model.onnx --shapes 1x3x224x224"
))
@_target_options
@click.option("--model", type=click.Path(path_type=Path), metavar="FILE",
              help=N_("Check with this ONNX model instead of ortfix's built-in one."))
@click.option("--shapes", "shapes", metavar="SPEC",
              help=N_("Input shapes for --model, e.g. 1x3x224x224 or input_ids=1x128,mask=1x128 (dynamic dimensions "
                   "default to 1)."))
@click.option("--timeout", default="300", show_default=True, metavar="SECONDS",
              help=N_("Give up on the session check after this long (at least 1)."))
def verify(python: str | None, as_json: bool, model: Path | None, shapes: str | None, timeout: str) -> None:
    from ortfix.cli.render_verify import render_verify, verify_json
    from ortfix.commands.inputs import verify_request
    from ortfix.commands.verify import run_verify

    request = verify_request(python, model=model, shapes=shapes, timeout=timeout)  # before the target is looked at
    target, probe_run = _described(request.python, as_json)
    result = run_verify(request.python, model=request.model, shapes=request.shapes, timeout=request.timeout,
                        probe_run=probe_run)
    _finish(Command.VERIFY, result, as_json, lambda r: {**verify_json(r), "interpreter": target.to_json()},
            render_verify)


@main.command(help=N_(
    "Time MODEL on the CPU and on CUDA under the provider options that matter for dynamic shapes.\n"
    "\n"
    "CUDA options tried: cudnn_conv_algo_search EXHAUSTIVE/HEURISTIC/DEFAULT x cudnn_conv_use_max_workspace 1/0 x "
    "arena_extend_strategy kNextPowerOfTwo/kSameAsRequested; each with a fixed shape and with changing shapes, first "
    "run and steady state apart. Prints a table and the recommended options as Python and YAML. Each part runs in a "
    "fresh process of the target interpreter; progress goes to standard error (--progress).\n"
    "\n"
    "Exit status: 0 every part ran, 2 could not run (bad model or shapes, no onnxruntime), 3 incomplete: the CUDA "
    "part could not run here (the output says why).\n"
    "\n"
    "\b\n"
    "Examples:\n"
    "  ortfix tune model.onnx --shapes 1x3x224x224 --shapes 4x3x320x320\n"
    "  ortfix tune bert.onnx --shapes \"input_ids=1x128,attention_mask=1x128;input_ids=8x64,attention_mask=8x64\""
))
@_target_options
@click.argument("model", type=click.Path(path_type=Path))
@click.option("--shapes", "shapes", multiple=True, metavar="SPEC",
              help=N_("Input shapes: 1x3x224x224 (one input) or NAME=DIMS,NAME=DIMS; repeat the option (or separate "
                   "sets with ';') for changing shapes. The first set is the fixed shape."))
@click.option("--runs", default="5", show_default=True, metavar="N",
              help=N_("Timed runs per phase (after the first run), 1 to 10000."))
@click.option("--timeout", default="600", show_default=True, metavar="SECONDS",
              help=N_("Give up on each part (CPU, CUDA) after this long (at least 1)."))
@click.option("--progress/--no-progress", default=None,
              help=N_("Report progress on standard error (default: when it is a terminal)."))
def tune(python: str | None, as_json: bool, model: Path, shapes: tuple[str, ...], runs: str,
         timeout: str, progress: bool | None) -> None:
    from ortfix.cli.render_tune import render_tune, tune_json
    from ortfix.commands.inputs import tune_request
    from ortfix.commands.tune import run_tune

    if progress is None:
        progress = sys.stderr.isatty()
    request = tune_request(python, model, shapes=shapes, runs=runs, timeout=timeout)  # before the target is looked at
    target, probe_run = _described(request.python, as_json)
    result = run_tune(request.python, request.model, request.shapes, runs=request.runs, timeout=request.timeout,
                      probe_run=probe_run,
                      progress=(lambda line: _echo(visible(f"ortfix: tune: {line}"), err=True)) if progress else None)
    _finish(Command.TUNE, result, as_json, lambda r: {**tune_json(r), "interpreter": target.to_json()}, render_tune)
