"""What an analysis (explain.analyses) reads: the text and the match (AnalysisContext), the compatibility matrix,
loaded only when an analysis asks (MatrixOnDemand), and this machine's facts when `check` ran."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from ortfix.compat.load import load_matrix
from ortfix.errors import OrtfixError
from ortfix.explain.message_os import MessageOs
from ortfix.i18n import N_, Msg

if TYPE_CHECKING:
    from ortfix.check.facts import Facts
    from ortfix.compat.matrix import Matrix


class MatrixOnDemand:
    """The matrix an analysis reads: the one given, else the default compat folder's, read on first use; None when
    it cannot be read (the analysis then says less, it does not fail)."""

    def __init__(self, matrix: Matrix | None) -> None:
        self._matrix = matrix
        self._tried = matrix is not None

    def get(self) -> Matrix | None:
        if not self._tried:
            self._tried = True
            try:
                self._matrix = load_matrix()
            except OrtfixError:
                self._matrix = None
        return self._matrix


@dataclass(frozen=True)
class AnalysisContext:
    text: str  # the whole input
    groups: Mapping[str, str]  # the named groups of this pattern's match
    matrix: MatrixOnDemand
    facts: Facts | None  # the target environment's, when `check` ran
    os: MessageOs | None = None  # the OS the message came from, when the text shows it


def version_or_none(text: str | None) -> Version | None:
    """`text` as a version; None when it is empty or not one."""
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def version_or_zero(text: str) -> Version:
    """A version the matrix, an installed distribution or a constant holds; 0 when it is none."""
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def installed_build(facts: Facts | None) -> list[Msg]:
    """With facts: the onnxruntime build this environment imports, its CUDA and cuDNN majors."""
    if facts is None or facts.active_ort is None:
        return []
    install = facts.active_ort
    if not install.version or install.cuda_major is None:
        return []
    package = install.package or "onnxruntime"
    if install.cudnn_major:
        return [Msg(N_("Here: {package} {version}, a CUDA {cuda} build for cuDNN {cudnn}."), package=package,
                    version=install.version, cuda=install.cuda_major, cudnn=install.cudnn_major)]
    return [Msg(N_("Here: {package} {version}, a CUDA {cuda} build."), package=package, version=install.version,
                cuda=install.cuda_major)]
