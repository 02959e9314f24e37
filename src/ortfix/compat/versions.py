"""How the compatibility matrix compares versions it holds as text: NVIDIA driver versions (`535.104.12`) as tuples
of integers, and PEP 440 versions that may not parse."""

from __future__ import annotations

from functools import lru_cache

from packaging.version import InvalidVersion, Version


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
