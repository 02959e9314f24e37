"""The compatibility matrix: the shipped files validate, and a broken file is rejected with file:line."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from clitools import REPO, assert_one_line_error, run_ortfix
from ortfix.compat.load import load_matrix
from ortfix.compat.platforms import wheel_platform
from ortfix.compat.validate import validate_document
from ortfix.errors import OrtfixError

COMPAT = REPO / "compat"


def test_shipped_matrix_loads_and_covers_the_range() -> None:
    m = load_matrix(COMPAT, use_cache=False)
    versions = {v for b in m.builds for v in b.versions}
    assert "1.0.0" in versions and "1.22.0" in versions
    assert any(v.startswith("1.31") for v in versions)
    assert set(m.cuda) >= {10, 11, 12, 13}
    b122 = [b for b in m.builds_for("1.22.0") if b.index == "default"]
    assert b122 and b122[0].cuda_major == 12 and b122[0].cudnn_major == 9
    assert "libcublasLt.so.12" in b122[0].cuda_needed
    # CUDA 13 uses unsuffixed NVIDIA wheel names, but cuDNN keeps its suffix.
    cu13 = {w.distribution for w in m.cuda[13].wheels}
    assert "nvidia-cuda-runtime" in cu13
    assert m.cudnn_wheel(9, 13) is not None and m.cudnn_wheel(9, 13).wheel.distribution == "nvidia-cudnn-cu13"
    for b in m.builds:
        assert b.source.strip(), b.versions


def test_driver_queries() -> None:
    m = load_matrix(COMPAT, use_cache=False)
    assert m.driver_supports_major("535.104.12", 12) is True
    assert m.driver_supports_major("470.82.01", 12) is False
    assert m.driver_supports_major("535.104.12", 13) is False
    highest = m.highest_cuda_for_driver("535.104.12")
    assert highest is not None and highest.major == 12 and highest.minor >= 2


def test_cli_validate_ok() -> None:
    proc = run_ortfix("matrix", "validate")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(": ok") == 4  # addons.yaml, ort.yaml, cuda.yaml, errors.yaml


def test_cli_show() -> None:
    proc = run_ortfix("matrix", "show")
    assert proc.returncode == 0, proc.stderr
    assert "libcublasLt.so.12" in proc.stdout and "nvidia-cudnn-cu13" in proc.stdout
    proc = run_ortfix("matrix", "show", "--json")
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "ortfix.matrix/2" and doc["command"] == "matrix show" and doc["exit_code"] == 0
    assert any("1.22.0" in b["versions"] and b["cuda_major"] == 12 for b in doc["builds"])


def _broken_copy(tmp_path: Path, old: str, new: str, name: str = "ort.yaml") -> Path:
    d = tmp_path / "compat"
    shutil.copytree(COMPAT, d)
    text = (d / name).read_text()
    assert old in text
    (d / name).write_text(text.replace(old, new, 1))
    return d


def _line_of(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    d = _broken_copy(tmp_path, "releases:", "releases:\n  - versions: [\"1.0.0\"\n    package: x")
    with pytest.raises(OrtfixError) as err:
        load_matrix(d, use_cache=False)
    assert "ort.yaml:" in err.value.message and "invalid YAML" in err.value.message


def test_schema_error_names_the_line(tmp_path: Path) -> None:
    d = _broken_copy(tmp_path, "cuda_major: 12", "cuda_major: twelve")
    line = _line_of(d / "ort.yaml", "cuda_major: twelve")
    with pytest.raises(OrtfixError) as err:
        load_matrix(d, use_cache=False)
    assert f"ort.yaml:{line}:" in err.value.message
    assert "cuda_major" in err.value.message


def test_unknown_schema_version(tmp_path: Path) -> None:
    d = _broken_copy(tmp_path, "schema_version: 1", "schema_version: 99", name="cuda.yaml")
    with pytest.raises(OrtfixError) as err:
        load_matrix(d, use_cache=False)
    assert "cuda.yaml:" in err.value.message and "schema_version 99" in err.value.message


def test_duplicate_version_is_rejected(tmp_path: Path) -> None:
    text = (COMPAT / "ort.yaml").read_text()
    at = text.index('"1.22.0"')  # the first row naming 1.22.0 names it twice
    line = text[:at].count("\n") + 1
    package = re.findall(r'^    package: "([^"]+)"', text[at:], re.M)[0]
    with pytest.raises(OrtfixError, match=rf"^ort\.yaml:{line}: {re.escape(package)} 1\.22\.0 .*already in row \d+$"):
        validate_document(text.replace('"1.22.0"', '"1.22.0", "1.22.0"', 1).encode(), "ort.yaml")


def test_corrupt_matrix_makes_check_fail_cleanly(tmp_path: Path) -> None:
    d = _broken_copy(tmp_path, "cuda_major: 12", "cuda_major: [")
    proc = run_ortfix("check", env={"ORTFIX_COMPAT_DIR": str(d), "ORTFIX_NO_CACHE": "1"})
    assert_one_line_error(proc, "ort.yaml:")


def test_validate_cli_reports_file_and_line(tmp_path: Path) -> None:
    d = _broken_copy(tmp_path, "cuda_major: 12", "cuda_major: twelve")
    proc = run_ortfix("matrix", "validate", str(d / "ort.yaml"))
    assert_one_line_error(proc, f"ort.yaml:{_line_of(d / 'ort.yaml', 'twelve')}:")


def _measured_sizes() -> dict[str, list[tuple[float, float]]]:
    """Every `size_mib` in the YAML files, read with plain YAML (not ortfix's loader), keyed by the distribution of
    the wheel it was measured on: the name before the first '-' of the `measured` file name (the wheel naming rule)."""
    import yaml

    out: dict[str, list[tuple[float, float]]] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            size = node.get("size_mib")
            if isinstance(size, dict):
                dist = size["measured"].split("-")[0].lower().replace("_", "-")
                out.setdefault(dist, []).append((size["download"], size["unpacked"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in sorted(COMPAT.glob("*.yaml")):
        walk(yaml.safe_load(path.read_text(encoding="utf-8")))
    return out


def test_wheel_size_estimates() -> None:
    """The estimate for a distribution is the largest wheel any row measured for it, under either spelling."""
    matrix = load_matrix()
    measured = _measured_sizes()
    assert {"nvidia-cudnn-cu12", "onnxruntime-gpu"} <= set(measured), sorted(measured)
    for dist, sizes in measured.items():
        largest = max(sizes, key=lambda s: s[1])
        assert matrix.size_estimate(dist) == largest, dist
        assert matrix.size_estimate(dist.replace("-", "_").upper()) == largest, dist
        assert all(0 < down <= unpacked for down, unpacked in sizes), (dist, sizes)
    assert matrix.size_estimate("numpy") is None


def test_the_largest_measured_wheel_is_the_estimate(tmp_path: Path) -> None:
    """Two rows measured for one distribution: the larger (unpacked) wins, whichever row comes first."""
    row = '  - versions: ["1.21.0", "1.21.1", "1.22.0"]\n    package: "onnxruntime-gpu"\n    index: "default"\n'
    for small, big in ((10.0, 900.5), (900.5, 10.0)):
        d = _broken_copy(tmp_path / str(small), row + "    size_mib: {download: 270.1, unpacked: 432.2,",
                         row + f"    size_mib: {{download: 5.5, unpacked: {small},")
        text = (d / "ort.yaml").read_text()
        first = text.index('    package: "onnxruntime-gpu"\n    index: "default"\n')  # the first default-index row
        end = text.index("\n", text.index('    index: "default"\n', first) + 1)
        wheel = "onnxruntime_gpu-1.11.0-cp39-cp39-manylinux_2_17_x86_64.whl"
        size = f'    size_mib: {{download: 7.5, unpacked: {big}, measured: "{wheel}"}}\n'
        (d / "ort.yaml").write_text(text[:end + 1] + size + text[end + 1:])
        expected = (5.5, small) if small > big else (7.5, big)
        assert load_matrix(d, use_cache=False).size_estimate("onnxruntime-gpu") == expected


def test_size_without_its_measured_wheel_is_rejected(tmp_path: Path) -> None:
    text = (REPO / "compat" / "cuda.yaml").read_text(encoding="utf-8")
    broken = text.replace('measured: "nvidia_cublas_cu12', 'measuredx: "nvidia_cublas_cu12', 1)
    assert broken != text
    bad = tmp_path / "cuda.yaml"
    bad.write_text(broken, encoding="utf-8")
    line = text[: text.index('measured: "nvidia_cublas_cu12')].count("\n") + 1
    assert_one_line_error(run_ortfix("matrix", "validate", str(bad)), f"{bad}:{line}")


def test_every_nvidia_wheel_has_published_versions() -> None:
    m = load_matrix(COMPAT, use_cache=False)
    wheels = [(c.major, w) for c in m.cuda.values() for w in c.wheels] + [(r.cuda_major, r.wheel) for r in m.cudnn]
    assert len(wheels) >= 20
    for major, wheel in wheels:
        assert wheel.cuda_major == major and wheel.published is not None, wheel.distribution
        assert wheel.published.source.strip() and wheel.published.by_cuda
        assert all(g.cuda.startswith(f"{major}.") for g in wheel.published.by_cuda), wheel.distribution
    assert {w.distribution for _, w in wheels if w.ptx_jit} == {"nvidia-cuda-nvrtc-cu11", "nvidia-cuda-nvrtc-cu12",
                                                                 "nvidia-cuda-nvrtc"}


@pytest.mark.parametrize(("old", "new", "message"), [
    # the cuBLAS 11.8 group holding a version older than the 11.7 group's 11.10.3.66
    ('versions: ["11.11.3.6"]', 'versions: ["11.9.0.1"]', "is not newer than 11.10.3.66 (CUDA 11.7)"),
    ('versions: ["11.11.3.6"]', 'versions: ["11.11.3.6", "11.11.3.5"]', "ascending order"),
    ('versions: ["11.11.3.6"]', 'versions: ["11.11.3.6", "11.10.3.66"]', "listed twice"),
    ('versions: ["11.11.3.6"]', 'versions: ["12.0.1.189"]', "outside its specifier ~=11.0"),
    ('- cuda: "11.8"\n              versions: ["11.11.3.6"]', '- cuda: "12.0"\n              versions: ["11.11.3.6"]',
     "CUDA 12.0 is not a CUDA 11 minor"),
    ('linux_aarch64: ["11.10.3.66"]', 'linux_aarch64: ["11.10.3.67"]', "11.10.3.67 (not on linux_aarch64) is not"),
    ('linux_aarch64: ["11.10.3.66"]', 'linux_riscv64: ["11.10.3.66"]', "linux_riscv64"),
])
def test_broken_published_versions_name_the_line(tmp_path: Path, old: str, new: str, message: str) -> None:
    d = _broken_copy(tmp_path, old, new, name="cuda.yaml")
    line = _line_of(d / "cuda.yaml", new.splitlines()[0].strip())  # the first occurrence: the one changed
    with pytest.raises(OrtfixError) as err:
        load_matrix(d, use_cache=False)
    assert message in err.value.message, err.value.message
    assert f"cuda.yaml:{line}:" in err.value.message, err.value.message


def test_a_wheel_without_published_versions_is_rejected(tmp_path: Path) -> None:
    text = (COMPAT / "cuda.yaml").read_text(encoding="utf-8")
    start = text.index("        published:", text.index('distribution: "nvidia-cublas-cu11"'))
    end = text.index('      - distribution: "nvidia-cufft-cu11"')
    d = tmp_path / "compat"
    shutil.copytree(COMPAT, d)
    (d / "cuda.yaml").write_text(text[:start] + text[end:], encoding="utf-8")
    with pytest.raises(OrtfixError) as err:
        load_matrix(d, use_cache=False)
    assert "'published' is a required property" in err.value.message


def test_widely_deployed_driver_is_data_and_decides_the_no_driver_choice(tmp_path: Path) -> None:
    """The driver a plan with no driver known prefers to run on comes from cuda.yaml, not from code: at R535 a CUDA 12
    build is chosen for an empty venv (recorded facts); moved to R580, where CUDA 13 runs too, the newest build."""
    from factsdata import load_facts
    from ortfix.check.diagnose import diagnose
    from ortfix.plan.make import make_plan
    from ortfix.plan.model import PlanOptions

    def chosen_major(matrix_dir: Path | None) -> int:
        matrix = load_matrix(matrix_dir, use_cache=False)
        facts = load_facts("empty")
        plan = make_plan(facts, diagnose(facts, matrix), matrix, PlanOptions())
        assert plan.target is not None
        return plan.target.cuda_major

    assert load_matrix(use_cache=False).widely_deployed_driver == "535.54.03"
    assert chosen_major(None) == 12
    compat = tmp_path / "compat"
    shutil.copytree(REPO / "compat", compat)
    cuda = compat / "cuda.yaml"
    cuda.write_text(cuda.read_text(encoding="utf-8").replace('  linux: "535.54.03"', '  linux: "580.65.06"', 1),
                    encoding="utf-8")
    assert load_matrix(compat, use_cache=False).widely_deployed_driver == "580.65.06"
    assert chosen_major(compat) == 13


def _stamp(path: Path, day: str) -> None:
    text = path.read_text(encoding="utf-8")
    new, n = re.subn(r'^data_version: "[^"]*"', f'data_version: "{day}"', text, count=1, flags=re.MULTILINE)
    assert n == 1, path
    path.write_text(new, encoding="utf-8")


def test_data_version_is_the_newest_matrix_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The matrix's data_version is the newest of its matrix files' (addons.yaml counts; errors.yaml, another kind,
    does not count);
    an edit to a file is seen through the cache (keyed by path, size and mtime), also when the size stays the same."""
    d = tmp_path / "compat"
    shutil.copytree(COMPAT, d)
    _stamp(d / "ort.yaml", "2020.01.02")
    _stamp(d / "cuda.yaml", "2021.03.04")
    _stamp(d / "addons.yaml", "2019.01.01")
    _stamp(d / "errors.yaml", "2030.01.01")
    assert load_matrix(d, use_cache=False).data_version == "2021.03.04"
    cache = tmp_path / "cache"
    monkeypatch.delenv("ORTFIX_NO_CACHE", raising=False)
    monkeypatch.setenv("ORTFIX_CACHE_DIR", str(cache))
    assert load_matrix(d).data_version == "2021.03.04"
    assert list(cache.glob("matrix-*.json")), "the validated matrix was not cached"
    before = (d / "ort.yaml").stat()
    _stamp(d / "ort.yaml", "2022.05.06")  # the same size: only the modification time tells the cache
    os.utime(d / "ort.yaml", ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))  # an edit a second later
    assert (d / "ort.yaml").stat().st_size == before.st_size
    assert load_matrix(d).data_version == "2022.05.06"


def test_a_data_version_that_is_no_day_names_the_line(tmp_path: Path) -> None:
    d = tmp_path / "compat"
    shutil.copytree(COMPAT, d)
    _stamp(d / "cuda.yaml", "2026-11-23")
    with pytest.raises(OrtfixError) as err:
        load_matrix(d, use_cache=False)
    assert f"cuda.yaml:{_line_of(d / 'cuda.yaml', 'data_version:')}: data_version" in err.value.message


@pytest.mark.parametrize(("system", "machine", "tag"), [
    ("Linux", "x86_64", "linux_x86_64"), ("linux", "AMD64", "linux_x86_64"), ("Linux", "aarch64", "linux_aarch64"),
    ("Linux", "ppc64le", "linux_ppc64le"), ("Windows", "AMD64", "win_amd64"), ("windows", "x86_64", "win_amd64"),
    ("Windows", "ARM64", "win_arm64"), ("Darwin", "arm64", None),
])
def test_wheel_platform(system: str, machine: str, tag: str | None) -> None:
    assert wheel_platform(system, machine) == tag


@pytest.mark.parametrize("damage", ["[]", "CACHE_WITH_NO_DOCS", "CACHE_WITH_EMPTY_DOCS", "CACHE_WITH_A_LIST_OF_FILES"])
def test_a_damaged_matrix_cache_is_validated_again_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   damage: str) -> None:
    # A cache file that is not what ortfix wrote (a JSON list ended in AttributeError: "unexpected" on every command).
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("ORTFIX_NO_CACHE", raising=False)
    reference = load_matrix(COMPAT, use_cache=False)
    load_matrix(COMPAT)  # writes the cache
    (cache_file,) = (tmp_path / "ortfix").glob("matrix-*.json")
    good = json.loads(cache_file.read_text(encoding="utf-8"))
    written = {"CACHE_WITH_NO_DOCS": {**good, "docs": {}},
               "CACHE_WITH_EMPTY_DOCS": {**good, "docs": {kind: {} for kind in good["docs"]}},
               "CACHE_WITH_A_LIST_OF_FILES": {**good, "files": [1, 2]}}
    cache_file.write_text(json.dumps(written[damage]) if damage in written else damage, encoding="utf-8")
    again = load_matrix(COMPAT)
    assert (again.builds, again.data_version, again.files) == (reference.builds, reference.data_version,
                                                               reference.files)
    assert json.loads(cache_file.read_text(encoding="utf-8")) == good  # rewritten from the validated YAML
