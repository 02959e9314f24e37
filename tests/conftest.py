"""Shared pytest fixtures: a session-wide wheelhouse of fake-but-real wheels (see tests/support/fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.fixtures import fake_ort_cpu_wheel, fake_ort_gpu_wheel, nvidia_cu12_set


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A --find-links folder with onnxruntime-gpu 1.22.0, onnxruntime 1.22.0 and the NVIDIA CUDA 12 set.

    Built once per session (about a second; the compiled stubs are cached across sessions). Shared by every test:
    one that needs other wheels builds them into a folder of its own, never into this one."""
    house = tmp_path_factory.mktemp("wheelhouse")
    fake_ort_gpu_wheel(house, version="1.22.0")
    fake_ort_cpu_wheel(house, version="1.22.0")
    nvidia_cu12_set(house)
    return house
