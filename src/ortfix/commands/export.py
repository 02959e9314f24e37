"""`ortfix export FORMAT`: the plan (made now, or a saved plan accepted exactly as `apply` accepts it) written as a
requirements file, a Dockerfile fragment, or a sh/ps1 script with its undo script. Nothing in the target changes:
the only thing run in it is pip's dry run that pins the plan's requirements."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ortfix.commands.apply import PreparedApply, prepare_apply
from ortfix.errors import ExitCode, OrtfixError
from ortfix.export.dockerfile import render_dockerfile
from ortfix.export.model import ExportFormat, ExportInput
from ortfix.export.pins import resolve_pins
from ortfix.export.powershell import render_ps1
from ortfix.export.requirements import render_requirements
from ortfix.export.shell import render_sh
from ortfix.i18n import N_, Msg, rendered_in
from ortfix.outfile import write_output
from ortfix.plan.kinds import ActionKind
from ortfix.plan.model import PlanOptions
from ortfix.safetext import escaped, first_control, visible


@dataclass(frozen=True)
class ExportResult:
    format: ExportFormat
    source: str  # "planned now" or the plan file
    text: str  # the requirements file, Dockerfile fragment, or do-script
    undo: str | None  # the undo script (sh, ps1)
    written: tuple[str, ...]  # the files written (-o), in order
    hashes: bool  # whether the pins carry hashes
    pins: tuple[str, ...]

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK


def undo_path(output: Path, fmt: ExportFormat) -> Path:
    """`fix.sh` → `fix.undo.sh` (`fix` → `fix.undo.sh`)."""
    suffix = ".sh" if fmt is ExportFormat.SH else ".ps1"
    stem = output.name[: -len(suffix)] if output.name.endswith(suffix) else output.name
    return output.with_name(f"{stem}.undo{suffix}")


def require_pip(prepared: PreparedApply) -> None:
    """Pins come from the target's own pip, and the scripts run it: an environment without pip is refused."""
    if not prepared.check.facts.probe.has_pip:
        python = prepared.plan.python
        raise OrtfixError(Msg(N_("{python} has no pip: the exact pins come from its own pip's dry run, and the "
                                 "exported scripts run it"), python=python),
                          hint=Msg(N_("install pip into it first: {command}"), command=f"{python} -m ensurepip"))


def require_plain_paths(prepared: PreparedApply) -> None:
    """The target's paths go into comment lines and (Dockerfile) unquotable ENV/RUN lines: a control character (a
    newline would end the comment and start a command or an instruction) is refused."""
    for what, path in ((N_("the environment {path}"), prepared.plan.prefix),
                       (N_("the interpreter {path}"), prepared.plan.python)):
        ch = first_control(path, surrogates=True)
        if ch is not None:
            raise OrtfixError(Msg(N_("{what} contains a control character ({char}); an exported file cannot name it "
                                     "safely (a line break would start a command)"),
                                  what=Msg(what, path=visible(path)), char=escaped(ch)),
                              hint=Msg(N_("move the environment to a plain path")))


def kept_build(prepared: PreparedApply) -> list[str]:
    """`onnxruntime-gpu==X` of the GPU build the plan keeps (it installs only libraries): a fresh image or
    environment gets that build too, not whichever the index has newest. [] when the plan installs or removes it."""
    plan = prepared.plan
    touched = {canonicalize_name(Requirement(str(r)).name) for a in plan.actions if a.kind == ActionKind.PIP_INSTALL
               for r in a.detail_items("requirements")}
    touched |= {canonicalize_name(str(a.details["distribution"])) for a in plan.actions
                if a.kind == ActionKind.PIP_UNINSTALL}
    return [f"{d.normalized}=={d.installed_version}" for d in prepared.check.facts.ort_distributions
            if "gpu" in d.normalized and d.installed_version and d.normalized not in touched]


def export_input(prepared: PreparedApply, fmt: ExportFormat) -> ExportInput:
    require_plain_paths(prepared)
    plan = prepared.plan
    if any(a.kind == ActionKind.PIP_INSTALL for a in plan.actions):
        require_pip(prepared)
    requirements = [str(r) for a in plan.actions if a.kind == ActionKind.PIP_INSTALL
                    for r in a.detail_items("requirements")]
    # A requirements file or an image starts fresh: every distribution; a script runs in the target as it is.
    fresh = fmt in (ExportFormat.REQUIREMENTS, ExportFormat.DOCKERFILE)
    if fresh and requirements:
        requirements += kept_build(prepared)
    pins = resolve_pins(plan.python, requirements, fresh=fresh)
    reasons = {str(f.code): f.summary for f in prepared.check.findings}  # in the file's language (rendered_in)
    return ExportInput(plan=plan, python=plan.python, prefix=plan.prefix, pins=tuple(pins), reasons=reasons)


def render(inp: ExportInput, fmt: ExportFormat, image_prefix: str | None) -> tuple[str, str | None]:
    """(the file, its undo script or None), its comments in the language in use."""
    if fmt is ExportFormat.REQUIREMENTS:
        return render_requirements(inp), None
    if fmt is ExportFormat.DOCKERFILE:
        return render_dockerfile(inp, image_prefix), None
    return render_sh(inp) if fmt is ExportFormat.SH else render_ps1(inp)


def run_export(fmt: ExportFormat, python: str | None, plan_file: Path | None, options: PlanOptions,
               output: Path | None, image_prefix: str | None = None, language: str = "en") -> ExportResult:
    """`image_prefix`: the environment's path in the image (dockerfile only; validated by the caller). `language`:
    the catalog of the files' comments (i18n.named_language: English unless --lang or ORTFIX_LANG names one); the
    commands in them are the same in every language."""
    prepared = prepare_apply(python, plan_file, options)
    inp = export_input(prepared, fmt)
    text, undo = rendered_in(language, lambda: render(inp, fmt, image_prefix))
    written: list[str] = []
    if output is not None:
        executable = 0o755 if undo is not None else 0o644
        if undo is not None:
            write_output(undo_path(output, fmt), undo, mode=executable)
        write_output(output, text, mode=executable)
        written = [str(output)] + ([str(undo_path(output, fmt))] if undo is not None else [])
    return ExportResult(fmt, prepared.source, text, undo, tuple(written), inp.hashes_complete,
                        tuple(p.spec for p in inp.pins))
