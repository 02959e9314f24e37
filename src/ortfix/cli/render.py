"""Render the results of check, plan, explain and `matrix show` for people (plain text) and for programs (the data
of their JSON envelope, cli/output.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ortfix.check.addons import genai_installs, tensorrt_wanted
from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts, facts_summary
from ortfix.check.findings import Finding, finding_json, other_cuda, shadowing
from ortfix.cli.cmdline import join, quote, windows_target
from ortfix.compat.matrix import Matrix
from ortfix.i18n import N_, Joined, Msg, _, pad, text, tr
from ortfix.record import asdict
from ortfix.safetext import join_lines
from ortfix.system.driver import GIVEN_GPU, DriverFacts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ortfix.commands.check import CheckResult
    from ortfix.commands.explain import ExplainResult
    from ortfix.commands.matrix import MatrixShowResult
    from ortfix.commands.plan import PlanResult
    from ortfix.plan.model import Plan
    from ortfix.system.windows.facts import WindowsFacts
    from ortfix.target.choose import TargetDescription

_MARK = {Severity.ERROR: "✗", Severity.WARNING: "!", Severity.INFO: "i"}
_SEVERITY = {Severity.ERROR: N_("error"), Severity.WARNING: N_("warning"), Severity.INFO: N_("info")}
_LABEL = 12  # the width of the check screen's labels (system, driver, ...), in terminal columns


def _row(label: str, value: str) -> str:
    """One row of the check screen's stack: the label (translated) padded to its column, then the value."""
    return pad(label, _LABEL) + value


def check_json(result: CheckResult) -> dict[str, Any]:
    return {"healthy": result.exit_code == 0, "interpreter": result.target.to_json(),
            "findings": [finding_json(f) for f in result.findings], "facts": facts_summary(result.facts)}


def plan_document(result: PlanResult) -> dict[str, Any]:
    """The plan as `plan -o FILE` saves it and `plan --json` prints it (inside the envelope)."""
    return {**result.plan.to_json(), "interpreter": result.check.target.to_json()}


def matrix_json(result: MatrixShowResult) -> dict[str, Any]:
    return asdict(result.matrix)


def _via(plan: Plan, requirements: Sequence[object], installer: str) -> str:
    """The installer's command line of a pip-install action, quoted for the target's shell (cli/cmdline.py)."""
    windows = windows_target(plan.python)
    reqs = join([str(r) for r in requirements], windows)
    # an index URL with credentials is passed in uv's environment (shown redacted, as NAME=value)
    assigned = [o.split("=", 1) for o in plan.installer_options if re.match(r"UV_[A-Z_]+=", o)]
    uv_options = join([o for o in plan.installer_options if not re.match(r"UV_[A-Z_]+=", o)], windows)
    if installer != "uv":
        return f"{quote(plan.python, windows)} -m pip install {reqs}"
    if windows:  # cmd's own way to set a variable for one command
        uv_env = "".join(f"set {quote(f'{name}={value}', True)} && " for name, value in assigned)
    else:
        import shlex  # here: a check's screen has no uv command line, and shlex compiles a pattern at import

        uv_env = "".join(f"{name}={shlex.quote(value)} " for name, value in assigned)
    return f"{uv_env}uv pip install --python {quote(plan.python, windows)} {uv_options} {reqs}"


def _driver_line(d: DriverFacts) -> str:
    """The driver and the GPUs; what --driver / --compute-capability gave is said once, as planning for another
    machine."""
    given_driver, given_cc = d.source == "--driver", d.overridden and any(g.name == GIVEN_GPU for g in d.gpus)
    gpus = ", ".join(f"{g.name} (sm {g.compute_capability or '?'})" for g in d.gpus if g.name != GIVEN_GPU)
    cuda = f", CUDA {d.cuda_version}" if d.cuda_version else ""
    cc = (tr(", compute capability {cc}", cc=str(d.gpus[0].compute_capability)) if given_cc
          else f"; {gpus or _('GPUs not queried')}")
    given = (_("both given") if given_driver and given_cc else _("given with --driver") if given_driver
             else _("compute capability given") if given_cc else "")
    return f"{d.version}{cuda}{cc}" + (tr(" ({given}: planning for another machine)", given=given) if given else "")


def _stack_lines(facts: Facts) -> list[str]:
    p = facts.probe
    d = facts.driver
    libc = "" if p.windows else f", glibc {p.glibc or _('unknown')}"
    lines = [_row(_("system"), f"{p.system} {p.machine}{libc}{', WSL' if p.wsl else ''}")]
    lines.append(_row(_("driver"), _driver_line(d) if d.present else _("none found")))
    ort = [f"{x.name} {x.version}" for x in facts.ort_distributions] or [_("not installed")]
    lines.append(_row("onnxruntime", ", ".join(ort)))
    for o in facts.ort:
        if o.providers:
            cuda = f"CUDA {o.cuda_major}" if o.cuda_major else "CUDA ?"
            if o.cuda_major and o.cuda_source and o.cuda_source != "binary":
                cuda = tr("{cuda} (per the {source})", cuda=cuda, source=text(o.cuda_source))
            cudnn = f", cuDNN {o.cudnn_major}" if o.cudnn_major else ""
            build = " ".join(x for x in (o.package, o.version) if x) or _("an unidentified build")
            lines.append(_row("", tr("{folder}: {build} built for {cuda}{cudnn}", folder=o.dir.package_dir,
                                     build=build, cuda=cuda, cudnn=cudnn)))
    if p.torch:
        lines.append(_row("torch", f"{p.torch.version} (CUDA {p.torch.cuda or _('none')})"))
    genai = genai_installs(facts)
    if genai:
        lines.append(_row("genai", ", ".join(g.line for g in genai)))
    ld = facts.loader.ld_library_path
    search = f"{facts.loader.search_variable}={ld if ld else _('(unset)')}"
    lines.append(_row(_("loader"), tr("{search}; preload hook loads {n}", search=search,
                                      n=len(facts.loader.preloaded)) if facts.loader.preloaded else search))
    if facts.windows is not None:
        lines += _windows_lines(facts.windows)
    return lines


def _windows_lines(win: WindowsFacts) -> list[str]:
    """The check screen's Windows rows: PATH at a new login, the MSVC runtime, how DLLs are searched."""
    lines = [_row("", tr("PATH at a new login: {path}", path=";".join(win.login_path) or _("(empty)")))]
    msvc = win.msvc_runtime
    version = ".".join(map(str, msvc.version)) if msvc.version else _("version unknown")
    lines.append(_row("", f"{msvc.name}: {f'{msvc.path} ({version})' if msvc.path else _('not found')}"))
    modes = [_(m) for m, on in ((N_("conda's default-dirs DLL search"), win.default_dirs_mode),
                                (N_("Store Python: PATH is not searched"), win.packaged)) if on]
    if modes:
        lines.append(_row("", "; ".join(modes)))
    return lines


def _library_lines(facts: Facts, problems: set[str], verbose: bool, with_tensorrt: bool) -> list[str]:
    """Each provider library's table of what it needs and where the loader finds it. Unless `verbose`, only the rows
    that are a problem (not found, or in `problems`), and one line counting the rest: the summary fits one screen.
    The TensorRT provider's table only where TensorRT matters (check/addons.tensorrt_wanted)."""
    out = []
    trt = tensorrt_wanted(facts, with_tensorrt)
    for o in facts.ort:
        for prov in o.providers:
            if prov.provider == "tensorrt" and not trt:
                continue
            library = os.path.basename(prov.library)
            out.append(tr("{library} needs (TensorRT provider only; optional):", library=library)
                       if prov.provider == "tensorrt" else tr("{library} needs:", library=library))
            if prov.error:
                out.append(tr("  cannot read: {error}", error=prov.error))
                continue
            seen: set[str] = set()
            hidden = 0
            for r in prov.resolutions:
                if r.name in seen or (r.path and not _interesting(r.name)):
                    continue
                seen.add(r.name)
                if not verbose and r.path and r.name not in problems:
                    hidden += 1
                    continue
                where = r.path or _("NOT FOUND")
                lazy = _(" (loaded lazily)") if r.lazy else ""
                via = f"  [{r.via}]" if r.via else ""
                driver = _(" (needs the NVIDIA driver's libcuda.so.1)") if r.name in prov.needs_driver else ""
                out.append(f"  {r.name:<36} {where}{via}{lazy}{driver}")
            if hidden:
                out.append(tr("  all {n} found by the loader; --verbose lists every library", n=hidden)
                           if hidden == len(seen) else
                           tr("  {n} more found by the loader; --verbose lists every library", n=hidden))
    return out


def _problem_libraries(findings: Sequence[Finding]) -> set[str]:
    """The libraries the loader finds that are a problem all the same: shadowed by a copy outside the environment
    (LIB004), or built for another CUDA major (LIB008)."""
    out: set[str] = set()
    for f in findings:
        if f.code == FindingCode.LIB_SHADOWED:
            out.add(shadowing(f)["soname"])
        elif f.code == FindingCode.LIB_OTHER_CUDA:
            out.update(other_cuda(f)["sonames"])
    return out


def _interesting(name: str) -> bool:
    return (name.startswith(("libcu", "libnv", "libcudnn", "libonnxruntime"))
            or name.lower().startswith(("cu", "nv", "onnxruntime", "msvcp", "zlibwapi")))  # Windows DLLs


def render_findings(findings: Sequence[Finding]) -> list[str]:
    out = []
    for f in findings:
        out.append(tr("{mark} {code} {severity}: {summary}", mark=_MARK[f.severity], code=str(f.code),
                      severity=_(_SEVERITY[f.severity]), summary=text(f.summary)))
        for e in f.evidence:
            out.append(f"    {text(e)}")
        out.append(tr("    fix: {fix}", fix=text(f.fix)))
    return out


def render_check(facts: Facts, findings: Sequence[Finding], target: TargetDescription,
                 own_note: str | Msg | None = None, *, verbose: bool = False, with_tensorrt: bool = False) -> str:
    """The check's report; its first line names the target and how it was chosen. `verbose`: every library row, not
    only those that are a problem; `with_tensorrt`: the TensorRT provider's table even where none is installed."""
    lines = [target.line_msg().text(), *_stack_lines(facts)]
    libs = _library_lines(facts, _problem_libraries(findings), verbose, with_tensorrt)
    if libs:
        lines += ["", *libs]
    for note in (*facts.notes, *([own_note] if own_note else [])):
        lines.append(tr("note: {note}", note=text(note)))  # a marked constant note (N_) translated too
    lines.append("")
    errors = sum(f.severity is Severity.ERROR for f in findings)
    warnings = sum(f.severity is Severity.WARNING for f in findings)
    if findings:
        lines += render_findings(findings)
        lines.append("")
    if errors or warnings:
        lines.append(tr("{errors} error(s), {warnings} warning(s). `ortfix plan` shows the changes that fix them.",
                        errors=errors, warnings=warnings))
    else:
        lines.append(_("The GPU path looks healthy."))
    return join_lines(lines)


def render_plan(plan: Plan, target: TargetDescription, *, applying: bool = False) -> str:
    """The plan; its first line names the target environment and how it was chosen. `applying`: shown by `apply`
    before it changes things, so without the footer that says nothing has changed."""
    lines = [target.line_msg().text()]
    machine = [tr("NVIDIA driver {version}", version=plan.options.driver_version)
               if plan.options.driver_version else "",
               tr("compute capability {cc}", cc=plan.options.compute_capability)
               if plan.options.compute_capability else ""]
    if any(machine):
        lines.append(tr("for a machine with {machine} (assumed, as given)",
                        machine=Joined(N_(", "), [m for m in machine if m])))
    if plan.target:
        t = plan.target
        lines.append(tr("ORT build: {package} {version} (CUDA {cuda}{cudnn}{feed})", package=t.package,
                        version=t.version, cuda=t.cuda_major, cudnn=f", cuDNN {t.cudnn_major}" if t.cudnn_major else "",
                        feed=_(", from a separate feed") if t.index == "alternate" else ""))
    lines.append("")
    adds = removes = changes = 0
    for i, a in enumerate(plan.actions, 1):
        lines.append(f"{i}. {text(a.summary)}" + (tr("   (fixes {codes})", codes=", ".join(a.fixes)) if a.fixes
                                                    else ""))
        for c in a.changes:
            lines.append(f"     {c.text() if isinstance(c, Msg) else c}")
            adds += str(c).startswith("+")
            removes += str(c).startswith("-")
            changes += str(c).startswith("~")
        if a.kind == "pip-install":
            installer = str(a.details["installer"])
            lines.append(tr("     via: {command}   (installer {installer}, with your pip configuration)",
                            command=_via(plan, a.detail_items("requirements"), installer), installer=installer))
        if a.kind == "write-file":
            lines.append(tr("     content of {path} (mode {mode}):", path=str(a.details["path"]),
                            mode=f"{a.details['mode']:04o}"))
            lines += [f"       | {line}" for line in str(a.details["content"]).splitlines()]
        lines.append(tr("     undo: {undo}", undo=a.undo))  # a Msg: translated with the line
    if not plan.actions:
        lines.append(_("No changes needed.") if not plan.unresolved else _("No change ortfix can make fixes this."))
    lines.append("")
    lines.append(tr("Plan: {adds} to add, {changes} to change, {removes} to remove. Fingerprint {fingerprint}.",
                    adds=adds, changes=changes, removes=removes, fingerprint=plan.fingerprint))
    for note in plan.notes:
        lines.append(tr("note: {note}", note=note if isinstance(note, Msg) else text(note)))
    if plan.unresolved:
        lines.append("")
        lines.append(_("Not fixed by this plan (needs you):"))
        for f in plan.unresolved:
            lines.append(f"  {f.code} {text(f.summary)}")
            lines.append(tr("      fix: {fix}", fix=text(f.fix)))
    if plan.actions and not applying:
        lines.append("")
        lines.append(_("Nothing has been changed. `ortfix apply` makes these changes as one transaction."))
    return join_lines(lines)


def render_matrix(matrix: Matrix) -> str:
    lines = [tr("compatibility matrix {version} ({files})", version=matrix.data_version,
                files=Joined(N_(", "), matrix.files)),
             "", f"{pad('ONNX Runtime', 28)} {pad(_('index'), 9)} {pad('CUDA', 6)} {pad('cuDNN', 6)} {_('needs')}"]
    for b in sorted(matrix.builds, key=lambda b: (b.newest, b.cuda_major)):
        versions = b.versions[0] if len(b.versions) == 1 else f"{b.versions[0]} - {b.versions[-1]}"
        lines.append(f"{b.package + ' ' + versions:<28} {b.index:<9} {b.cuda_major:<6} "
                     f"{b.cudnn_major if b.cudnn_major is not None else '-':<6} "
                     f"{', '.join(b.cuda_needed)}"
                     + (tr(" (lazy: {libraries})", libraries=", ".join(b.cuda_lazy)) if b.cuda_lazy else ""))
    lines += ["", f"{pad('CUDA', 6)} {pad(_('driver (Linux)'), 16)} {pad(_('driver (Windows)'), 18)} "
                  f"{pad(_('compute capability'), 20)} {_('wheels')}"]
    for major, c in sorted(matrix.cuda.items()):
        wheels = ", ".join(w.distribution for w in c.wheels) or _("none on the package index")
        lines.append(f"{major:<6} >= {c.driver_min.get('linux', '?'):<13} >= {c.driver_min.get('windows', '?'):<15} "
                     f"{c.cc_min} - {c.cc_max:<12} {wheels}")
    lines += ["", _("cuDNN wheels:")]
    for row in matrix.cudnn:
        lines.append(tr("  cuDNN {major} for CUDA {cuda}: {wheel}", major=row.major, cuda=row.cuda_major,
                        wheel=f"{row.wheel.distribution}{row.wheel.specifier}"))
    return join_lines(lines)


def explain_json(result: ExplainResult) -> dict[str, Any]:
    from ortfix.explain.patterns import explanation_to_dict

    here = result.check
    return {
        "recognised": bool(result.explanations),
        "explanations": [
            {**explanation_to_dict(e),
             "on_this_machine": [finding_json(f) for f in _related(here.findings, e.finding)] if here else []}
            for e in result.explanations
        ],
        "check_error": result.check_error,
        "interpreter": result.check.target.to_json() if result.check is not None else None,
    }


def _related(findings: Sequence[Finding], code: str | None) -> list[Finding]:
    """This machine's findings that explain a message: the same code, else any library finding for a library
    message (a 'cannot open' may be LIB001, LIB002 or LIB003 depending on what is installed)."""
    if code is None:
        return []
    same = [f for f in findings if f.code == code]
    if same:
        return same
    family = code[:3]
    return [f for f in findings if f.code.startswith(family) and f.severity is not Severity.INFO]


def render_explain(result: ExplainResult) -> str:
    """explain for people, in their language (ortfix/i18n.py): the explanations' words are translated here, at
    render time; what the message and machine said (matched text, paths, finding codes, evidence) stays as it is."""
    if not result.explanations:
        return _("Not recognised: ortfix knows no ONNX Runtime / CUDA / cuDNN failure in this text. "
                 "`ortfix check` looks at the machine itself.")
    # the machine's side comes from a check of the target: named first, as every command that looks at one does
    lines: list[str] = [result.check.target.line_msg().text(), ""] if result.check is not None else []
    for e in result.explanations:
        title, cause, fix = e.localized()
        lines.append(f"● {title}" + (f"  [{e.finding}]" if e.finding else ""))
        lines.append(tr("  matched (line {line}): {text}", line=e.line, text=e.matched))
        lines.append(tr("  cause: {cause}", cause=cause))
        lines.append(tr("  fix:   {fix}", fix=fix))
        if result.check is not None:
            related = _related(result.check.findings, e.finding)
            if related:
                lines.append(_("  on this machine:"))
                for f in related:
                    lines.append(f"    {f.code} {text(f.summary)}")
                    lines += [f"      {text(ev)}" for ev in f.evidence[:4]]
            elif e.finding:
                lines.append(tr("  on this machine: `ortfix check` does not see this problem in {python}",
                                python=result.check.facts.probe.executable))
        lines.append("")
    if result.check_error:
        lines.append(tr("(could not check this machine: {error})", error=result.check_error))
    return join_lines(lines).rstrip()
