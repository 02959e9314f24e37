"""What a driver version, a compute capability and an ORT version must look like: the options several commands share
(--driver, --compute-capability, --ort-version) and the same fields of a saved plan are checked here, once, the same
way on the click path, the click-free `check` path and when a plan file is read back. A usage error (exit 2) before
anything runs when a value does not look like what it stands for."""

from __future__ import annotations

from ortfix.errors import OrtfixError
from ortfix.i18n import N_, Msg


def _dotted_numbers(text: str, parts: tuple[int, int]) -> bool:
    """text is ASCII digits separated by dots, with between parts[0] and parts[1] numbers."""
    numbers = text.split(".")
    return parts[0] <= len(numbers) <= parts[1] and all(n.isascii() and n.isdigit() and len(n) <= 9 for n in numbers)


def validate_machine_options(driver_version: str | None, compute_capability: str | None) -> None:
    """`--driver` and `--compute-capability` of check and plan (both the click command and this fast path call it,
    so both say the same): a usage error, before anything runs, when they do not look like what they stand for."""
    if driver_version is not None and not _dotted_numbers(driver_version, (2, 4)):
        raise OrtfixError(Msg(N_("--driver {value}: not an NVIDIA driver version"), value=repr(driver_version)),
                          hint=Msg(N_("digits separated by dots, e.g. 535.104.12 or 550.54")))
    if compute_capability is not None and not _dotted_numbers(compute_capability, (2, 2)):
        raise OrtfixError(Msg(N_("--compute-capability {value}: expected MAJOR.MINOR such as 8.6"),
                              value=repr(compute_capability)))


def validate_ort_version(ort_version: str | None) -> None:
    """`--ort-version` of plan and apply: a usage error when it is not a version."""
    from packaging.version import InvalidVersion, Version

    if ort_version is None:
        return
    try:
        Version(ort_version)
    except InvalidVersion as exc:
        raise OrtfixError(Msg(N_("--ort-version {value}: not a version"), value=repr(ort_version)),
                          hint=Msg(N_("e.g. {example}"), example="1.22.0")) from exc
