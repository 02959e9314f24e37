"""Recorded facts: what `ortfix check` gathered from real environments, saved as JSON under tests/data/facts/ and read
back as the same typed `Facts`, so the pure core (diagnose, plan) can be tested over the whole matrix without a venv.

Record one (after building the environment by hand, see tests/data/facts/README.md):
    .venv/bin/python tests/factsdata.py NAME --python /path/to/env/bin/python
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

from ortfix.check.facts import Facts, gather
from ortfix.compat.load import load_matrix
from ortfix.system.linux.platform import LinuxPlatform
from ortfix.system.platform_protocols import Platform
from ortfix.system.windows.platform import WindowsPlatform

FACTS_DIR = Path(__file__).with_name("data") / "facts"
FORMAT = "ortfix-test.facts/1"


def encode(value: Any) -> Any:
    if isinstance(value, Platform):
        return value.system  # read back by decode: the Platform of that system
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name != "report"}  # the probe's raw output repeats everything else
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def _lazy_types() -> dict[str, Any]:
    """Names the facts annotate with but import only for type checking (check/facts.py and target/probe.py keep the
    Windows-only modules out of a Linux check, and `typing`'s Protocols out of every check)."""
    from ortfix.system import platform_protocols
    from ortfix.system.windows import facts as winfacts
    from ortfix.target import winreport

    # For mypy only: check/facts.py's UnfinishedTransaction Protocol (the recorded facts hold none) and
    # compat/model.py's Literal of index names (a str).
    return {**vars(winfacts), **vars(winreport), **vars(platform_protocols), "UnfinishedTransaction": object,
            "IndexName": str}


_LAZY_TYPES = _lazy_types()


def decode(kind: Any, data: Any) -> Any:
    """`data` (from encode) as an instance of the annotated type `kind`."""
    origin = typing.get_origin(kind)
    args = typing.get_args(kind)
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        [real] = [a for a in args if a is not type(None)]
        return decode(real, data)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], d) for d in data)
        return tuple(decode(a, d) for a, d in zip(args, data))
    if origin is list:
        return [decode(args[0], d) for d in data]
    if origin in (dict, Mapping, typing.Mapping) or kind is dict:
        value_kind = args[1] if args else Any
        return {k: decode(value_kind, v) for k, v in data.items()}
    if kind is Platform:
        return {"Linux": LinuxPlatform, "Windows": WindowsPlatform}[data]()
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = typing.get_type_hints(kind, localns=_LAZY_TYPES)
        return kind(**{f.name: decode(hints[f.name], data[f.name]) for f in dataclasses.fields(kind)
                       if f.name in data})
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(data)
    return data


def load_facts(name: str) -> Facts:
    doc = json.loads((FACTS_DIR / f"{name}.json").read_text(encoding="utf-8"))
    assert doc["format"] == FORMAT, doc["format"]
    doc["facts"].setdefault("platform", doc["facts"]["probe"]["system"])  # recorded before Facts carried it
    facts: Facts = decode(Facts, doc["facts"])
    return facts


def recorded() -> list[str]:
    return sorted(p.stem for p in FACTS_DIR.glob("*.json"))


def record(name: str, python: str) -> Path:
    facts = gather(Path(python), load_matrix())
    assert decode(Facts, json.loads(json.dumps(encode(facts)))) == facts  # the round trip is exact
    out = FACTS_DIR / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"format": FORMAT, "python": python, "facts": encode(facts)}, indent=None,
                              separators=(",", ":"), ensure_ascii=False) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[2] != "--python":
        sys.exit(__doc__)
    print(record(sys.argv[1], sys.argv[3]))
