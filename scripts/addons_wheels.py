"""`scripts/ort_wheels.py --addons`: the facts of compat/addons.yaml that the wheels themselves say, read from the
wheels in the --find-links folders (never unpacked to disk):

  * tensorrt rows: `major` of an ORT minor, the N of the libnvinfer.so.N that
    onnxruntime/capi/libonnxruntime_providers_tensorrt.so of an onnxruntime-gpu wheel NEEDs;
  * genai rows: `cuda_major` of an onnxruntime-genai-cuda release, the N of the libcudart.so.N that
    onnxruntime_genai/libonnxruntime-genai-cuda.so NEEDs, and `ort_min`, the X of METADATA's
    `Requires-Dist: onnxruntime-gpu>=X` (`onnxruntime>=X` for the CPU onnxruntime-genai).

What no wheel says (a TensorRT minimum version, the CUDA major of a release no wheel here has) is left as it is.
--check prints each disagreement as `WHAT: FIELD: file says X, wheel says Y` (and each fact no row holds) and exits 1
if there is any; --write sets them in place (a row that lists other releases too is split; a release or minor no row
names gets a row of its own), bumps data_version, validates the result with ortfix, and leaves the file byte for byte
alone when nothing changed."""

from __future__ import annotations

import email.parser
import io
import json
import re
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion

ORT_GPU = "onnxruntime-gpu"
TRT_PROVIDER = "onnxruntime/capi/libonnxruntime_providers_tensorrt.so"
GENAI_PACKAGES = {"onnxruntime-genai": "onnxruntime", "onnxruntime-genai-cuda": ORT_GPU}  # package -> its ORT
GENAI_LIBRARY = "onnxruntime_genai/libonnxruntime-genai-cuda.so"
WIDTH = 120


class AddonsFailure(Exception):
    """A wheel or the file is not what it should be."""


@dataclass(frozen=True)
class Fact:
    section: str  # tensorrt | genai
    key: tuple[str, str]  # tensorrt: ("", "1.22"); genai: (package, version)
    values: dict[str, Any]  # the fields the wheel says
    wheel: str
    source: str  # what a new row's `source` says


def _needed(data: bytes, what: str) -> list[str]:
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(io.BytesIO(data))
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                return [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]  # type: ignore[attr-defined]
    except (ELFError, ValueError, KeyError, AssertionError) as exc:
        raise AddonsFailure(f"{what}: not a readable ELF file: {exc}") from exc
    return []


def _member(wheel: zipfile.ZipFile, path: str) -> bytes | None:
    """The archive member installed at `path` (also under NAME.data/purelib|platlib/)."""
    for name in wheel.namelist():
        m = re.match(r"^[^/]+\.data/(?:purelib|platlib)/(.+)$", name)
        if (m.group(1) if m else name) == path:
            return wheel.read(name)
    return None


def _major_of(needed: Iterable[str], family: str) -> int | None:
    for name in needed:
        m = re.fullmatch(rf"lib{family}\.so\.(\d+)", name)
        if m:
            return int(m.group(1))
    return None


def read_wheel(path: Path) -> Fact | None:
    """What one wheel says for addons.yaml; None for a wheel of another package, or one that says nothing."""
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    if name != ORT_GPU and name not in GENAI_PACKAGES:
        return None
    try:
        with zipfile.ZipFile(path) as wheel:
            if name == ORT_GPU:
                data = _member(wheel, TRT_PROVIDER)
                if data is None:
                    return None
                major = _major_of(_needed(data, f"{path.name}: {TRT_PROVIDER}"), "nvinfer")
                if major is None:
                    return None
                minor = f"{version.major}.{version.minor}"
                return Fact("tensorrt", ("", minor), {"major": major}, path.name,
                            f"wheels NEED libnvinfer.so.{major}; no published minimum")
            values: dict[str, Any] = {}
            how = ["METADATA"]
            if name == "onnxruntime-genai-cuda":
                data = _member(wheel, GENAI_LIBRARY)
                cuda = _major_of(_needed(data, f"{path.name}: {GENAI_LIBRARY}"), "cudart") if data else None
                if cuda is not None:
                    values["cuda_major"] = cuda
                    how.append(f"read: libcudart.so.{cuda}")
            else:
                values["cuda_major"] = None
            ort_min = _ort_min(wheel, GENAI_PACKAGES[name])
            if ort_min is not None:
                values["ort_min"] = ort_min
    except (OSError, zipfile.BadZipFile) as exc:
        raise AddonsFailure(f"{path.name}: {exc}") from exc
    return Fact("genai", (name, str(version)), values, path.name, "; ".join(how)) if values else None


def _ort_min(wheel: zipfile.ZipFile, ort: str) -> str | None:
    """X of the METADATA's `Requires-Dist: ORT>=X`."""
    meta = next((n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)), None)
    if meta is None:
        return None
    msg = email.parser.HeaderParser().parsestr(wheel.read(meta).decode("utf-8", "replace"))
    for text in msg.get_all("Requires-Dist") or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) == ort and not req.marker:
            low = [s.version for s in req.specifier if s.operator == ">="]
            if low:
                return low[0]
    return None


def read_folders(folders: Sequence[Path]) -> list[Fact]:
    facts: dict[tuple[str, tuple[str, str]], Fact] = {}
    for folder in folders:
        for path in sorted(folder.glob("*.whl")) if folder.is_dir() else ():
            fact = read_wheel(path)
            if fact is not None:
                facts.setdefault((fact.section, fact.key), fact)
    return sorted(facts.values(), key=lambda f: (f.section, f.key))


# ------------------------------------------------------------------------------------------------------------------
# Comparing with the rows and writing them
# ------------------------------------------------------------------------------------------------------------------

ORDER = {"tensorrt": ("ort", "major", "min_version", "source"),
         "genai": ("package", "versions", "cuda_major", "ort_min", "source")}


def _scalar(value: Any) -> str:
    return "null" if value is None else json.dumps(value) if isinstance(value, str) else str(value)


def emit(section: str, row: dict[str, Any]) -> list[str]:
    """One flow-style row as the file writes them; the source on a line of its own when it does not fit."""
    parts = []
    for key in ORDER[section]:
        value = row[key]
        shown = "[" + ", ".join(_scalar(v) for v in value) + "]" if isinstance(value, list) else _scalar(value)
        parts.append(f"{key}: {shown}")
    line = "  - {" + ", ".join(parts) + "}"
    if len(line) <= WIDTH:
        return [line]
    return ["  - {" + ", ".join(parts[:-1]) + ",", "     " + parts[-1] + "}"]


@dataclass
class Outcome:
    problems: list[str]
    lines: list[str]  # the file's lines after the edits
    changed: bool


def _row_of(section: str, rows: list[dict[str, Any]], key: tuple[str, str]) -> int | None:
    for i, row in enumerate(rows):
        if section == "tensorrt" and key[1] in row["ort"]:
            return i
        if section == "genai" and row["package"] == key[0] and key[1] in row["versions"]:
            return i
    return None


def compare(text: str, facts: Sequence[Fact]) -> Outcome:
    doc = yaml.safe_load(text)
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(doc, dict) or doc.get("kind") != "addons" or not isinstance(node, yaml.MappingNode):
        raise AddonsFailure("not an addons file")
    items = {k.value: v for k, v in node.value}
    lines = text.split("\n")
    problems: list[str] = []
    edits: list[tuple[int, int, list[str]]] = []  # (first line, last line + 1, new lines), on the original text
    for section in ("tensorrt", "genai"):
        rows: list[dict[str, Any]] = [dict(r) for r in doc[section]]
        nodes = items[section].value
        added: dict[int, list[dict[str, Any]]] = {}  # line to insert before -> the new rows, in order
        touched: set[int] = set()
        for fact in (f for f in facts if f.section == section):
            what = f"{section} {fact.key[1]}" if section == "tensorrt" else f"{fact.key[0]} {fact.key[1]}"
            i = _row_of(section, rows, fact.key)
            if i is None:
                problems.append(f"{what}: no row; wheel {fact.wheel} says "
                                + ", ".join(f"{k} {_scalar(v)}" for k, v in fact.values.items()))
                same = [j for j, r in enumerate(rows) if section == "genai" and r["package"] == fact.key[0]]
                at = nodes[same[-1] if same else -1].end_mark.line + 1  # after its package's rows, else at the end
                added.setdefault(at, []).append(_new_row(section, fact, None))
                continue
            differs = {k: v for k, v in fact.values.items() if rows[i].get(k) != v}
            for k, v in differs.items():
                problems.append(f"{what}: {k}: file says {_scalar(rows[i].get(k))}, wheel says {_scalar(v)}")
            if differs:
                listed = "ort" if section == "tensorrt" else "versions"
                split = _new_row(section, fact, rows[i])
                rows[i][listed] = [x for x in rows[i][listed] if x != fact.key[1]]
                touched.add(i)
                if rows[i][listed]:  # split off, right after it: the rest of the row keeps what it says
                    added.setdefault(nodes[i].end_mark.line + 1, []).append(split)
                else:  # the row of this release alone: changed in place
                    rows[i] = split
        for i in sorted(touched):
            first, last = nodes[i].start_mark.line, nodes[i].end_mark.line + 1
            edits.append((first, last, emit(section, rows[i])))
        edits += [(at, at, [ln for row in new_rows for ln in emit(section, row)]) for at, new_rows in added.items()]
    for first, last, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[first:last] = new
    return Outcome(problems, lines, bool(edits))


def _new_row(section: str, fact: Fact, old: dict[str, Any] | None) -> dict[str, Any]:
    """The row of one release (minor) the wheel tells about: what it says, the rest kept from the row it leaves."""
    if section == "tensorrt":
        low = old.get("min_version") if old else None
        kept = low if low and low.split(".")[0] == str(fact.values["major"]) else None
        return {"ort": [fact.key[1]], "major": fact.values["major"], "min_version": kept,
                "source": f"{old['source']}; major: the wheel's NEEDED" if old and kept else fact.source}
    row = {"package": fact.key[0], "versions": [fact.key[1]],
           "cuda_major": fact.values.get("cuda_major", old.get("cuda_major") if old else None),
           "ort_min": fact.values.get("ort_min", old.get("ort_min") if old else None)}
    from_wheel = {"cuda_major", "ort_min"} <= set(fact.values)
    return {**row, "source": fact.source if old is None or from_wheel else f"{old['source']}; {fact.source}"}


def run_addons(file: Path, folders: Sequence[Path], *, write: bool, bump: Callable[[str, str], str],
               validate: Callable[[str, str], None], today: str) -> int:
    """The --addons mode (see the module docstring); returns the exit status."""
    text = file.read_text(encoding="utf-8")
    facts = read_folders(folders)
    outcome = compare(text, facts)
    for fact in facts:
        print(f"{fact.wheel}: " + ", ".join(f"{k} {_scalar(v)}" for k, v in fact.values.items()))
    for problem in outcome.problems:
        print(problem)
    print(f"{len(facts)} wheel(s) read: {len(outcome.problems)} disagreement(s) with {file}")
    if not write:
        return 1 if outcome.problems else 0
    if not outcome.changed:
        print(f"{file}: nothing to change")
        return 0
    lines = outcome.lines
    version = next(i for i, ln in enumerate(lines) if ln.startswith("data_version:"))
    old = str(yaml.safe_load(lines[version])["data_version"])
    lines[version] = f'data_version: "{bump(old, today)}"'
    new_text = "\n".join(lines)
    validate(new_text, str(file))
    file.write_text(new_text, encoding="utf-8")
    print(f"{file}: written")
    return 0
