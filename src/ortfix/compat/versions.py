"""How the compatibility matrix compares versions it holds as text: NVIDIA driver versions (`535.104.12`) as tuples
of integers, and PEP 440 versions that may not parse.

`Version` is `packaging.version.Version` for what check's path does with versions (compare, sort, hash, print,
`.release`, `.major`...), without importing `packaging.version` for the plain releases (`1.22.0`, `12.4`, `8.6`) the
matrix, the probe's distributions and the GPU deal in: importing it (compiling its version regex, and `typing`) cost
a fresh `check` 46M instructions, a seventh of it (speed/__init__.py). Anything else (`1.23.0rc1`, `v1.0`,
`1.0+local`, an epoch, whitespace) is parsed, compared and printed by packaging itself, as is a comparison with one
of packaging's own Versions; tests/test_versions_plain.py compares both over a large generated set."""

from __future__ import annotations

import sys
from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from packaging.version import Version as PackagingVersion

_PLAIN = frozenset(".0123456789")  # what a plain release is written with (packaging's release digits are [0-9])


class InvalidVersion(ValueError):
    """Text that is no PEP 440 version (raised where packaging raises its own InvalidVersion)."""


def _packaging(text: str) -> PackagingVersion:
    from packaging.version import InvalidVersion as PackagingInvalid
    from packaging.version import Version as Parsed

    try:
        return Parsed(text)
    except PackagingInvalid as exc:
        raise InvalidVersion(str(exc)) from None


def _trimmed(release: tuple[int, ...]) -> tuple[int, ...]:
    """The release without its trailing zeros: what PEP 440 compares (`1.0.0 == 1`)."""
    end = len(release)
    while end and release[end - 1] == 0:
        end -= 1
    return release[:end]


class Version:
    """A PEP 440 version: a plain release (digits and dots) held as its numbers, anything else as packaging's
    Version. Ordered, equal and printed exactly as packaging's; hashes agree among these (not with packaging's)."""

    __slots__ = ("_key", "_parsed", "_release")

    def __init__(self, version: str) -> None:
        if isinstance(version, str) and _PLAIN.issuperset(version):
            parts = version.split(".")
            if "" not in parts:
                self._release = tuple(map(int, parts))
                self._key: tuple[int, ...] | None = _trimmed(self._release)  # None: not a plain release
                self._parsed: PackagingVersion | None = None
                return
        parsed = _packaging(version)
        self._parsed = parsed
        self._release = parsed.release
        plain = not parsed.epoch and parsed.pre is None and parsed.post is None and parsed.dev is None \
            and parsed.local is None
        self._key = _trimmed(parsed.release) if plain else None

    def packaging(self) -> PackagingVersion:
        """The same version as packaging's Version (imports packaging.version)."""
        if self._parsed is None:
            self._parsed = _packaging(str(self))
        return self._parsed

    def _pair(self, other: object) -> tuple[object, object] | None:
        """What to compare self and other by: their trimmed releases when both are plain, else packaging's
        Versions; None when other is no version."""
        if isinstance(other, Version):
            if self._key is not None and other._key is not None:
                return self._key, other._key
            return self.packaging(), other.packaging()
        loaded = sys.modules.get("packaging.version")  # other can be packaging's Version only once it is imported
        if loaded is not None and isinstance(other, loaded.Version):
            return self.packaging(), other
        return None

    def __eq__(self, other: object) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] == pair[1]

    def __ne__(self, other: object) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] != pair[1]

    def __lt__(self, other: object) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] < pair[1]  # type: ignore[operator]

    def __le__(self, other: object) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] <= pair[1]  # type: ignore[operator]

    def __gt__(self, other: object) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] > pair[1]  # type: ignore[operator]

    def __ge__(self, other: object) -> bool:
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] >= pair[1]  # type: ignore[operator]

    def __hash__(self) -> int:
        return hash(self._key) if self._key is not None else hash(self.packaging())

    def __str__(self) -> str:
        return ".".join(map(str, self._release)) if self._parsed is None else str(self._parsed)

    def __repr__(self) -> str:
        return f"<Version({str(self)!r})>"

    @property
    def release(self) -> tuple[int, ...]:
        return self._release

    @property
    def major(self) -> int:
        return self._release[0] if self._release else 0

    @property
    def minor(self) -> int:
        return self._release[1] if len(self._release) >= 2 else 0

    @property
    def micro(self) -> int:
        return self._release[2] if len(self._release) >= 3 else 0

    @property
    def is_prerelease(self) -> bool:
        return self._parsed is not None and self._parsed.is_prerelease

    @property
    def is_devrelease(self) -> bool:
        return self._parsed is not None and self._parsed.is_devrelease

    @property
    def is_postrelease(self) -> bool:
        return self._parsed is not None and self._parsed.is_postrelease

    @property
    def public(self) -> str:
        return str(self) if self._parsed is None else self._parsed.public

    @property
    def base_version(self) -> str:
        return str(self) if self._parsed is None else self._parsed.base_version


@lru_cache(maxsize=512)  # planning compares the same few driver versions thousands of times
def driver_version(text: str) -> tuple[int, ...]:
    """A driver version as at least three integers (`535` → (535, 0, 0)); a part without digits counts as 0."""
    out = []
    for part in text.strip().split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    while len(out) < 3:
        out.append(0)
    return tuple(out)


def same_version(text: str, wanted: Version) -> bool:
    """`text` is a version equal to `wanted` (`1.22` == `1.22.0`); text that is no version is not."""
    try:
        return Version(text) == wanted
    except InvalidVersion:
        return False
