"""Installs left half-done (ORT007, LIB007, ORT008, TX001): distributions whose files do not match their RECORD
(or that have none), an `onnxruntime` folder no distribution owns, and ortfix transactions that were interrupted."""

from __future__ import annotations

from ortfix.check.codes import FindingCode, Severity
from ortfix.check.facts import Facts
from ortfix.check.findings import Finding
from ortfix.check.packages import GPU_PACKAGE, builds_onnxruntime
from ortfix.fields import BadField, distribution_name
from ortfix.i18n import N_, Msg
from ortfix.system.resolved import realpath

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ortfix.check.findings import DamagedData

# How many paths of a damaged distribution the evidence names.
_EVIDENCE_PATHS = 5
# Installers that always write RECORD: "" (no INSTALLER file: pip writes it just before RECORD), pip and uv. A
# .dist-info of theirs without a RECORD was cut short; any other installer may leave none on purpose, and so may
# the system's own folder (apt strips RECORD): those are left alone.
_RECORD_WRITERS = ("", "pip", "uv")
_SYSTEM_PACKAGES = "/usr/lib/"


def damaged_findings(facts: Facts) -> list[Finding]:
    """ORT and NVIDIA distributions whose files do not match their RECORD: missing, cut short, or no RECORD at all."""
    out: list[Finding] = []
    for dist in facts.probe.distributions:
        if dist.has_record is None:
            continue
        ort = builds_onnxruntime(dist)
        if not ort and not dist.normalized.startswith("nvidia-"):
            continue
        code = FindingCode.ORT_DAMAGED if ort else FindingCode.LIB_DAMAGED
        version = dist.installed_version
        label = Msg(N_("{name} {version}"), name=dist.name,
                    version=version or dist.version or Msg(N_("(version unknown)")))
        pin = f"{dist.name}=={version}" if version else dist.name
        if dist.has_record is False:
            if dist.installer not in _RECORD_WRITERS or dist.location.startswith(_SYSTEM_PACKAGES):
                continue
            out.append(Finding(
                code, Severity.ERROR,
                Msg(N_("{label} has no RECORD: its install was stopped before it finished (pip writes RECORD "
                       "last)"), label=label),
                (Msg(N_("{dist_info}: no RECORD (INSTALLER: {installer})"), dist_info=dist.dist_info,
                     installer=dist.installer) if dist.installer else
                 Msg(N_("{dist_info}: no RECORD, no INSTALLER"), dist_info=dist.dist_info),),
                Msg(N_("move {dist_info} out of {location} (without a RECORD neither pip nor ortfix can uninstall it "
                       "exactly), then run `ortfix plan` again to reinstall {pin}"), dist_info=dist.dist_info,
                    location=dist.location, pin=pin),
                {"distribution": dist.name, "version": version, "record": False, "remove": []}))
            continue
        missing = [p for p in dist.damaged if p.actual is None]
        wrong = [p for p in dist.damaged if p.actual is not None and p.overwritten_by is None]
        if not missing and not wrong:
            continue
        parts = [Msg(N_("{n} of its {checked} files is missing") if len(missing) == 1 else
                     N_("{n} of its {checked} files are missing"), n=len(missing), checked=dist.checked)
                 ] if missing else []
        if wrong:
            parts.append(Msg(N_("{n} has another size than its RECORD says") if len(wrong) == 1 else
                             N_("{n} have another size than its RECORD says"), n=len(wrong)))
        shown = (missing + wrong)[:_EVIDENCE_PATHS]
        evidence: list[str | Msg] = [Msg(N_("{dist_info}/RECORD: {checked} files checked by size, {missing} missing, "
                                            "{wrong} with another size"), dist_info=dist.dist_info,
                                         checked=dist.checked, missing=len(missing), wrong=len(wrong))]
        evidence += [Msg(N_("missing: {path}"), path=p.path) if p.actual is None else
                     Msg(N_("cut short or changed: {path} ({actual} bytes on disk, RECORD says {size})"), path=p.path,
                         actual=p.actual, size=str(p.size)) for p in shown]
        if len(missing) + len(wrong) > len(shown):
            evidence.append(Msg(N_("... and {n} more"), n=len(missing) + len(wrong) - len(shown)))
        data: DamagedData = {"distribution": dist.name, "version": version, "record": True,
                                "missing": len(missing), "wrong_size": len(wrong), "paths": [p.path for p in shown],
                                "remove": [dist.name], "reinstall": True}
        if not ort and version and _plain_name(dist.name):
            data["requirement"] = pin  # else left unresolved: no exact wheel to reinstall is known
        out.append(Finding(
            code, Severity.ERROR,
            Msg(N_("{label} is damaged: {parts} (an install or uninstall stopped half-way, or files were deleted)"),
                label=label, parts=parts[0] if len(parts) == 1 else
                Msg(N_("{first} and {second}"), first=parts[0], second=parts[1])),
            tuple(evidence),
            Msg(N_("reinstall {pin}: move what is left of it aside, then install it again"), pin=pin),
            data))
    return out


def orphaned_findings(facts: Facts) -> list[Finding]:
    """An `onnxruntime` folder that no installed distribution owns: pip writes the .dist-info last, so a pip stopped
    half-way leaves the package's files (the CUDA provider, perhaps) and nothing that says they are installed."""
    out: list[Finding] = []
    probe = facts.probe
    # Only where pip installs: an ONNX Runtime built from source and put on sys.path (PYTHONPATH, an editable
    # install's .pth) has no .dist-info next to it either, and nothing is wrong with it.
    installs_into = {realpath(d) for d in (*probe.site_packages, probe.purelib, probe.platlib,
                                                   probe.user_site) if d}
    for install in facts.ort:
        location = install.dir.location
        if realpath(location) not in installs_into:
            continue
        if any(d.location == location and builds_onnxruntime(d) for d in facts.ort_distributions):
            continue
        build = " ".join(x for x in (install.package, install.version) if x)
        out.append(Finding(
            FindingCode.ORT_ORPHANED, Severity.ERROR,
            Msg(N_("{folder} belongs to no installed distribution: an install of {build} was stopped before pip "
                   "wrote its .dist-info"), folder=install.dir.package_dir, build=build or "ONNX Runtime"),
            (Msg(N_("{folder}: {files}"), folder=install.dir.capi,
                 files=", ".join(install.dir.files) or Msg(N_("no libraries"))),
             f"build_and_package_info.py: {build}" if build else
             Msg(N_("build_and_package_info.py: missing or unreadable")),
             Msg(N_("no .dist-info in {location} lists files in onnxruntime/"), location=location)),
            Msg(N_("install {package} over it (pip overwrites what was left)"), package=GPU_PACKAGE),
            {"package_dir": install.dir.package_dir, "location": location, "package": install.package,
             "version": install.version}))
    return out



def interrupted_findings(facts: Facts) -> list[Finding]:
    out = []
    for t in facts.interrupted:
        if t.status is None:  # its journal cannot be read or trusted
            out.append(Finding(
                FindingCode.INTERRUPTED, Severity.ERROR,
                Msg(N_("ortfix transaction {id} cannot be read: the environment may be half-changed"), id=t.id),
                (Msg(N_("journal and stash: {folder}"), folder=t.folder), Msg(N_("why: {error}"), error=str(t.error))),
                Msg(N_("inspect it: `ortfix history show {id}`; ortfix will not apply anything while it is there"),
                    id=t.id),
                {"transaction": t.id, "unreadable": True}))
            continue
        out.append(Finding(
            FindingCode.INTERRUPTED, Severity.ERROR,
            Msg(N_("ortfix transaction {id} was interrupted ({status}, {started} of {total} steps begun): the "
                   "environment may be half-changed"), id=t.id, status=t.status.value, started=t.steps_started,
                total=t.steps_total),
            (Msg(N_("journal and stash: {folder}"), folder=t.folder), Msg(N_("started {time}"), time=t.created)),
            N_("run `ortfix rollback` to restore the state before it"),
            {"transaction": t.id}))
    return out



def _plain_name(name: str) -> bool:
    """A distribution name as read from METADATA is used in a requirement only when it is a plain name."""
    try:
        distribution_name(name)
    except BadField:
        return False
    return True
