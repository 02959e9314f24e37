"""`ortfix matrix show` and `ortfix matrix validate`: the compatibility matrix ortfix uses, and checking matrix
files (file:line of the first problem)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ortfix.compat.load import compat_files, default_compat_dir, load_matrix
from ortfix.compat.matrix import Matrix
from ortfix.compat.validate import validate_document
from ortfix.errors import ExitCode, OrtfixError
from ortfix.i18n import N_, Msg, tr


@dataclass(frozen=True)
class MatrixShowResult:
    matrix: Matrix

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK


def show_matrix() -> MatrixShowResult:
    return MatrixShowResult(load_matrix())


def validate_matrix_files(files: Sequence[Path]) -> list[str]:
    """One line per file: `PATH: ok (kind, schema N, data V)`; the first bad file raises its `file:line` error."""
    lines = []
    for path in list(files) or compat_files(default_compat_dir()):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise OrtfixError(Msg(N_("cannot read {file}: {error}"), file=str(path),
                                  error=str(exc.strerror or exc))) from exc
        doc = validate_document(data, str(path))
        lines.append(tr("{file}: ok ({kind}, schema {schema}, data {data})", file=str(path), kind=doc["kind"],
                        schema=doc["schema_version"], data=doc["data_version"]))
    return lines
