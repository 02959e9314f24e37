"""The command line's values, validated once: each command's options become its request value here (`check_request`,
`plan_request`, ...), for the click CLI (cli/app.py maps its options onto these functions and nothing more) and the
click-free `check` (cli/fastcheck.py) alike. A value that is not what it stands for is an OrtfixError (exit 2),
before anything runs and before the target is looked at. The shapes of versions are versions.py's, shared with a
saved plan's fields.

Which error wins when several inputs are bad does not depend on their order on the command line; it is the first of:
  1. the environment: --python (an empty path);
  2. the machine: --driver, then --compute-capability;
  3. what to plan: --ort-version, --cuda, --hook, --installer, --with;
  4. the saved plan (apply, export, wheelhouse): a folder given as PLAN.json, then planning options given with it
     (the plan file decides those);
  5. what the command reads and how: verify's and tune's --shapes, --model (a missing file), then --runs and
     --timeout; explain's message (TEXT, --file LOG or standard input); history prune's --keep;
  6. where the result goes: export's --prefix-in-image, wheelhouse's --platform and --python-version, then the
     output itself (-o FILE, -d DIR).
What a user states about the target comes before how to fix it, the fix before where it is written: the first line
names the most basic mistake. click still reports first what only it knows (an unknown option, a missing value or
argument, a FORMAT that is not one); tests/test_cli_errors.py pins the order on both paths.

Imported by the click-free `check`: only its part is light (no dataclasses, no plan model, no `typing` at import);
the other commands' request values are NamedTuples of commands/requests.py, imported where one is made."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Joined, Msg
from ortfix.target.choose import refuse_empty_python
from ortfix.versions import validate_machine_options, validate_ort_version

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the path of a replayed `check`
if TYPE_CHECKING:
    from pathlib import Path
    from typing import TextIO

    from ortfix.commands.requests import (
        ApplyRequest,
        ExplainRequest,
        ExportRequest,
        PlanInputs,
        PlanRequest,
        TuneRequest,
        VerifyRequest,
        WheelhouseRequest,
    )
    from ortfix.plan.model import HookOption, InstallerOption, PlanOptions

# The optional parts `--with` names (check: judged; plan, apply: provided).
WITH_PARTS = ("tensorrt",)
CUDA_MAJORS = (10, 20)  # the --cuda values that can name a CUDA major at all (the matrix says which have builds)


def _one_of(flag: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise OrtfixError(Msg(N_("{option} {value}: not one of {choices}"), option=flag, value=repr(value),
                              choices=Joined(N_(", "), choices)),
                          hint=Msg(N_("e.g. {example}"), example=f"{flag} {choices[0]}"))
    return value


def hook(value: str) -> HookOption:
    """`--hook`: how to make libraries findable."""
    from ortfix.plan.model import HOOK_CHOICES, hook_option

    return hook_option(_one_of("--hook", value, HOOK_CHOICES)) or "auto"


def installer(value: str) -> InstallerOption:
    """`--installer`: who installs packages."""
    from ortfix.plan.model import INSTALLER_CHOICES, installer_option

    return installer_option(_one_of("--installer", value, INSTALLER_CHOICES)) or "auto"


def with_tensorrt(values: Sequence[str]) -> bool:
    """`--with PART` (repeatable): whether TensorRT was named."""
    for value in values:
        _one_of("--with", value, WITH_PARTS)
    return "tensorrt" in values


def _whole(value: str) -> int | None:
    """`value` as a whole number when it is one of at most 18 ASCII digits (int() refuses more than 4,300 with a
    ValueError of its own), else None."""
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 18 else None


def cuda_major(value: str | None) -> int | None:
    """`--cuda MAJOR`: a number from 10 to 20."""
    if value is None:
        return None
    low, high = CUDA_MAJORS
    number = _whole(value)
    if number is None or not low <= number <= high:
        raise OrtfixError(Msg(N_("--cuda {value}: not a CUDA major"), value=repr(value)),
                          hint=Msg(N_("a number from {low} to {high}, e.g. 12"), low=low, high=high))
    return number


def seconds(value: str, flag: str = "--timeout") -> float:
    """A number of seconds, at least 1 (nan and inf refused)."""
    import math  # here: a replayed `check` imports this module, and math is a shared library to load (0.6M)

    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number >= 1):
        raise OrtfixError(Msg(N_("{option} {value}: expected a number of seconds, at least 1"), option=flag,
                              value=value))
    return number


def count(value: str, flag: str, low: int, high: int | None = None) -> int:
    """A whole number from `low` to `high` (no upper bound: None)."""
    number = _whole(value)
    if number is None or number < low or (high is not None and number > high):
        bounds = (Msg(N_("from {low} to {high}"), low=low, high=high) if high is not None
                  else Msg(N_("{low} or more"), low=low))
        raise OrtfixError(Msg(N_("{option} {value}: expected a whole number {bounds}"), option=flag,
                              value=repr(value), bounds=bounds))
    return number


def output_file(path: Path | None, flag: str = "-o") -> Path | None:
    """A file to write: not a folder, in a folder that exists (said before the work, not after it). Whether it can
    really be written is known only when it is (outfile.write_output says so then)."""
    if path is None:
        return None
    if path.is_dir():
        raise OrtfixError(Msg(N_("{option} {path}: a folder, not a file"), option=flag, path=str(path)),
                          hint=Msg(N_("give the name of the file to write")))
    folder = path.parent
    if not folder.is_dir():
        raise OrtfixError(Msg(N_("cannot write {path}: no folder {folder}"), path=str(path), folder=str(folder)),
                          hint=Msg(N_("choose another file or folder")))
    return path


def dest_folder(path: Path, flag: str = "-d") -> Path:
    """A folder to fill: new or a folder (whether it is empty and writable is checked when it is made)."""
    if os.path.lexists(path) and not path.is_dir():
        raise OrtfixError(Msg(N_("{option} {path}: not a folder"), option=flag, path=str(path)),
                          hint=Msg(N_("choose a new or empty folder")))
    return path


# ---------------------------------------------------------------------------------------------------------------------
# each command's request: its options, validated in the module's order
# ---------------------------------------------------------------------------------------------------------------------


class CheckRequest:
    """check's options, validated. A plain class, not a NamedTuple as the other requests (commands/requests.py):
    a replayed `check` imports this module, and `typing` with the other requests' NamedTuples cost it 32M
    instructions, a fifth of the whole replay's."""

    __slots__ = ("compute_capability", "driver_version", "python", "with_tensorrt")

    def __init__(self, python: str | None, driver_version: str | None, compute_capability: str | None,
                 with_tensorrt: bool) -> None:
        self.python = python
        self.driver_version = driver_version
        self.compute_capability = compute_capability
        self.with_tensorrt = with_tensorrt


def check_request(python: str | None, driver_version: str | None = None, compute_capability: str | None = None,
                  with_: Sequence[str] = ()) -> CheckRequest:
    python = refuse_empty_python(python)
    validate_machine_options(driver_version, compute_capability)
    return CheckRequest(python, driver_version, compute_capability, with_tensorrt(with_))


def plan_options(given: PlanInputs) -> PlanOptions:
    """`given`, validated (steps 2 and 3)."""
    from ortfix.plan.model import PlanOptions

    validate_machine_options(given.driver_version, given.compute_capability)
    validate_ort_version(given.ort_version)
    return PlanOptions(ort_version=given.ort_version, cuda_major=cuda_major(given.cuda), hook=hook(given.hook),
                       installer=installer(given.installer), driver_version=given.driver_version,
                       compute_capability=given.compute_capability, project=given.project,
                       with_tensorrt=with_tensorrt(given.with_))


def _saved_plan_alone(plan_file: Path | None, options: PlanOptions, refusal: Msg, flags: Msg,
                      also_given: bool = False) -> None:
    """Step 4: a saved plan is a file (what it holds is read when it is used: transaction/plan_file.py), applied
    (exported) exactly as it is; the options that only shape a new plan are refused beside it (the machine may be
    repeated: commands/apply._same_machine)."""
    if plan_file is not None and plan_file.is_dir():
        raise OrtfixError(Msg(N_("{file}: a folder, not a plan file"), file=str(plan_file)),
                          hint=Msg(N_("give the file `ortfix plan -o` wrote")))
    if plan_file is not None and (options.ort_version or options.cuda_major or options.hook != "auto" or also_given):
        raise OrtfixError(refusal, hint=Msg(N_("{options} only apply when planning now"), options=flags))


def _export_options(plan_file: Path | None, given: PlanInputs) -> PlanOptions:
    """export's and wheelhouse's options: a new plan's, refused beside a saved plan (step 4)."""
    plan = plan_options(given)
    _saved_plan_alone(plan_file, plan, Msg(N_("a saved plan is exported exactly as it is")),
                      Msg(N_("--ort-version, --cuda, --hook and --with")), also_given=plan.with_tensorrt)
    return plan


def plan_request(python: str | None, given: PlanInputs, output: Path | None = None) -> PlanRequest:
    from ortfix.commands.requests import PlanRequest

    python = refuse_empty_python(python)
    plan = plan_options(given)
    return PlanRequest(python, plan, output_file(output))


def apply_request(python: str | None, plan_file: Path | None, given: PlanInputs) -> ApplyRequest:
    from ortfix.commands.requests import ApplyRequest

    python = refuse_empty_python(python)
    plan = plan_options(given)
    _saved_plan_alone(plan_file, plan, Msg(N_("a saved plan is applied exactly as it is")),
                      Msg(N_("--ort-version, --cuda, --hook, --installer, --project and --with")),
                      also_given=plan.installer != "auto" or plan.project or plan.with_tensorrt)
    return ApplyRequest(python, plan_file, plan)


def export_request(python: str | None, fmt: str, plan_file: Path | None, given: PlanInputs, *,
                   prefix_in_image: str | None, output: Path | None) -> ExportRequest:
    from ortfix.commands.requests import ExportRequest
    from ortfix.export.dockerfile import validate_image_prefix
    from ortfix.export.model import ExportFormat

    python = refuse_empty_python(python)
    plan = _export_options(plan_file, given)
    export_format = ExportFormat(fmt)
    image_prefix = None
    if prefix_in_image is not None:
        if export_format is not ExportFormat.DOCKERFILE:
            raise OrtfixError(Msg(N_("--prefix-in-image is for dockerfile, not {format}"), format=str(export_format)),
                              hint=Msg(N_("the other formats run in the environment they were made for")))
        image_prefix = validate_image_prefix(prefix_in_image)
    return ExportRequest(python, export_format, plan_file, plan, image_prefix, output_file(output))


def wheelhouse_request(python: str | None, plan_file: Path | None, given: PlanInputs, *, folder: Path,
                       platform_tag: str | None, python_version: str | None) -> WheelhouseRequest:
    from ortfix.commands.requests import WheelhouseRequest
    from ortfix.export.wheelhouse import validate_target

    python = refuse_empty_python(python)
    plan = _export_options(plan_file, given)
    target = validate_target(platform_tag, python_version)
    return WheelhouseRequest(python, plan_file, plan, target, dest_folder(folder))


def verify_request(python: str | None, *, model: Path | None, shapes: str | None, timeout: str) -> VerifyRequest:
    from ortfix.commands.requests import VerifyRequest
    from ortfix.target.ortrun import model_file
    from ortfix.tune import parse_shapes

    python = refuse_empty_python(python)
    if shapes is not None and model is None:
        raise OrtfixError(Msg(N_("--shapes goes with --model")), hint=Msg(N_("the built-in model has its own shapes")))
    spec = None
    if shapes is not None:
        sets = parse_shapes([shapes])
        if len(sets) != 1:
            raise OrtfixError(Msg(N_("--shapes {value}: verify takes one set of shapes"), value=repr(shapes)))
        spec = sets[0]
    resolved = model_file(model, f"--model {model}") if model is not None else None
    return VerifyRequest(python, resolved, spec, seconds(timeout))


def tune_request(python: str | None, model: Path, *, shapes: Sequence[str], runs: str,
                 timeout: str) -> TuneRequest:
    from ortfix.commands.requests import TuneRequest
    from ortfix.target.ortrun import model_file
    from ortfix.tune import parse_shapes

    python = refuse_empty_python(python)
    specs = parse_shapes(shapes)
    return TuneRequest(python, model_file(model, str(model)), specs, count(runs, "--runs", 1, 10000),
                       seconds(timeout))


def explain_request(python: str | None, text: str | None, log_file: Path | None, stdin: TextIO,
                    check: bool) -> ExplainRequest:
    """The message to explain: TEXT, else the log --file names ('-': standard input), else piped standard input."""
    from ortfix.commands.requests import ExplainRequest

    python = refuse_empty_python(python)
    if text is None:
        if log_file is not None and str(log_file) != "-":
            try:
                text = log_file.read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise OrtfixError(Msg(N_("cannot read {file}: {error}"), file=str(log_file),
                                      error=str(exc.strerror or exc))) from exc
        elif log_file is not None or not stdin.isatty():
            text = stdin.read()
        else:
            raise OrtfixError(Msg(N_("nothing to explain")),
                              hint=Msg(N_("give the message as an argument, --file LOG, or pipe it in")))
    return ExplainRequest(python, text, check)


def prune_keep(python: str | None, keep: str) -> tuple[str | None, int]:
    """history prune: (--python, --keep N)."""
    return refuse_empty_python(python), count(keep, "--keep", 0)


def python_option(python: str | None) -> str | None:
    """`--python` of the commands that take nothing else to validate (rollback, history)."""
    return refuse_empty_python(python)


__all__ = ["CheckRequest", "apply_request", "check_request", "explain_request", "export_request", "plan_request",
           "prune_keep", "tune_request", "verify_request", "wheelhouse_request"]
