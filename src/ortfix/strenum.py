"""`enum.StrEnum` where Python has it (3.11+), the same behaviour before: members are their values as strings."""

import sys

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - exercised on the Pythons ortfix supports below 3.11
    from enum import Enum

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str(self.value)

__all__ = ["StrEnum"]
