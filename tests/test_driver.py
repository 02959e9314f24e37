"""Driver detection from the files a real driver leaves (captured from real machines, see data/driver/README.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ortfix.system.driver import parse_gpu_query, parse_nvidia_smi_csv
from ortfix.system.linux.driver import detect_driver, parse_proc_version
from ortfix.system.linux.ldcache import LdCache

DATA = Path(__file__).parent / "data" / "driver"


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("proc-version-open-565.txt", "565.57.01"),
        ("proc-version-open-525.txt", "525.60.11"),
        ("proc-version-jetson.txt", "35.3.1"),
        ("proc-version-proprietary-535.txt", "535.104.12"),
    ],
)
def test_proc_version_formats(name: str, version: str) -> None:
    assert parse_proc_version((DATA / name).read_text()) == version


def test_nvidia_smi_csv() -> None:
    driver, gpus = parse_nvidia_smi_csv((DATA / "nvidia-smi-a100.csv").read_text())
    assert driver == "535.104.12"
    assert [(g.index, g.compute_capability) for g in gpus] == [(0, "8.0"), (1, "8.0")]


def _smi_q(field: str) -> str:
    """A top-level field of `nvidia-smi -q` as the H100 machine printed it: the oracle the parsers are held to."""
    for line in (DATA / "nvidia-smi-q-h100.txt").read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == field:
            return value.strip()
    raise AssertionError(f"{field} not in nvidia-smi -q")


def test_h100_driver_files_agree_with_nvidia_smi_q() -> None:
    """Captured on a lent H100 (driver 580, open kernel module): /proc, /sys, the CSV query and the NVML child's
    answer each give what `nvidia-smi -q` says."""
    driver = _smi_q("Driver Version")
    assert driver == "580.159.04"
    assert parse_proc_version((DATA / "proc-version-open-580-h100.txt").read_text()) == driver
    assert (DATA / "sys-module-version-h100.txt").read_text().strip() == driver
    smi_driver, smi_gpus = parse_nvidia_smi_csv((DATA / "nvidia-smi-h100.csv").read_text())
    assert smi_driver == driver
    assert [(g.index, g.name, g.compute_capability) for g in smi_gpus] == [(0, _smi_q("Product Name"), "9.0")]
    nvml = parse_gpu_query((DATA / "nvml-query-h100.json").read_text())
    assert nvml is not None and nvml.error is None
    assert (nvml.driver, nvml.cuda) == (driver, _smi_q("CUDA Version"))
    assert nvml.gpus == smi_gpus


def test_h100_kernel_module_files_through_detect_driver(tmp_path: Path) -> None:
    root = _fake_root(tmp_path, proc="proc-version-open-580-h100.txt",
                      sys_version=(DATA / "sys-module-version-h100.txt").read_text().strip())
    facts = detect_driver(LdCache(source="none"), root=root)
    assert facts.present and facts.version == facts.kernel_module == _smi_q("Driver Version")


@pytest.mark.parametrize("text", ["", "[]", '{"gpus": [{"index": "x"}]}', '{"gpus": 3}', "[" * 100_000])
def test_gpu_query_output_that_is_not_the_document(text: str) -> None:
    assert parse_gpu_query(text) is None


def _fake_root(tmp_path: Path, *, proc: str | None = None, sys_version: str | None = None,
               wsl_libcuda: str | None = None) -> Path:
    root = tmp_path / "root"
    if proc is not None:
        (root / "proc/driver/nvidia").mkdir(parents=True)
        (root / "proc/driver/nvidia/version").write_text((DATA / proc).read_text())
    if sys_version is not None:
        (root / "sys/module/nvidia").mkdir(parents=True)
        (root / "sys/module/nvidia/version").write_text(sys_version + "\n")
    if wsl_libcuda is not None:
        lib = root / "usr/lib/wsl/lib"
        lib.mkdir(parents=True)
        (lib / f"libcuda.so.{wsl_libcuda}").write_bytes(b"\x7fELF")
        os.symlink(f"libcuda.so.{wsl_libcuda}", lib / "libcuda.so.1")
    root.mkdir(exist_ok=True)
    return root


def test_no_driver(tmp_path: Path) -> None:
    facts = detect_driver(LdCache(source="none"), root=_fake_root(tmp_path))
    assert not facts.present and facts.version is None


def test_kernel_module_only(tmp_path: Path) -> None:
    root = _fake_root(tmp_path, proc="proc-version-proprietary-535.txt")
    facts = detect_driver(LdCache(source="none"), root=root, query_gpus=False)
    assert facts.present and facts.version == "535.104.12" and not facts.reboot_needed


def test_sys_module_wins_over_proc(tmp_path: Path) -> None:
    root = _fake_root(tmp_path, proc="proc-version-open-525.txt", sys_version="565.57.01")
    assert detect_driver(LdCache(source="none"), root=root, query_gpus=False).kernel_module == "565.57.01"


def test_upgrade_without_reboot_is_not_no_gpu(tmp_path: Path) -> None:
    # Kernel module 535 still loaded, user-space libraries already 550: "reboot needed", the GPU is still there.
    root = _fake_root(tmp_path, proc="proc-version-proprietary-535.txt", wsl_libcuda="550.54.14")
    facts = detect_driver(LdCache(source="none"), root=root, query_gpus=False)
    assert facts.present and facts.reboot_needed
    assert (facts.kernel_module, facts.userspace, facts.version) == ("535.104.12", "550.54.14", "550.54.14")


def test_wsl_libcuda_without_kernel_module(tmp_path: Path) -> None:
    facts = detect_driver(LdCache(source="none"), root=_fake_root(tmp_path, wsl_libcuda="560.35.03"),
                          query_gpus=False)
    assert facts.present and facts.version == "560.35.03"
