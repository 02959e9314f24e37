"""The test toolkit itself must be real: its libraries are checked with binutils' readelf (never with the toolkit),
its wheels with zipfile and the real pip, and `ld_so_list` against what glibc's ld.so must find."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import shutil
import subprocess
import sysconfig
import zipfile
from pathlib import Path

import pytest

from support.fixtures import (
    CU12_PROVIDER_NEEDED,
    NVIDIA_CU12,
    TENSORRT_PROVIDER_NEEDED,
    PipError,
    build_stub_lib,
    build_wheel,
    fake_nvidia_wheel,
    fake_ort_gpu_wheel,
    ld_so_list,
    make_venv,
    pip_install,
)
from txtools import ortfix_env

pytestmark = pytest.mark.skipif(shutil.which("readelf") is None or shutil.which("gcc") is None,
                                reason="needs gcc and binutils' readelf")

_DYNAMIC_LINE = re.compile(r"^\s*0x[0-9a-fA-F]+\s+\((\w+)\)\s+.*?\[(.*)\]\s*$")


def dynamic(lib: Path) -> dict[str, list[str]]:
    """readelf -d: {tag: [values in file order]} for the string-valued tags (NEEDED, SONAME, RPATH, RUNPATH)."""
    out = subprocess.run(["readelf", "-dW", str(lib)], capture_output=True, text=True, check=True).stdout
    tags: dict[str, list[str]] = {}
    for line in out.splitlines():
        if m := _DYNAMIC_LINE.match(line):
            tags.setdefault(m[1], []).append(m[2])
    return tags


def elf_header(lib: Path) -> str:
    return subprocess.run(["readelf", "-hW", str(lib)], capture_output=True, text=True, check=True).stdout


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def run_python(python: Path, code: str) -> str:
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# --- ELF stubs ------------------------------------------------------------------------------------------------------


def test_stub_has_exactly_the_soname_needed_and_runpath_asked_for(tmp_path: Path) -> None:
    needed = ["libzeta.so.1", "libcudnn.so.9", "libcublasLt.so.12"]  # not sorted: the order must survive
    lib = build_stub_lib(tmp_path / "a" / "libtop.so.3", soname="libtop.so.3", needed=needed,
                         runpath=["$ORIGIN", "$ORIGIN/../deps", "/opt/with,comma"])
    assert dynamic(lib) == {"NEEDED": needed, "SONAME": ["libtop.so.3"],
                            "RUNPATH": ["$ORIGIN:$ORIGIN/../deps:/opt/with,comma"]}
    header = elf_header(lib)
    assert "ELF64" in header and "DYN (Shared object file)" in header
    symbols = subprocess.run(["readelf", "--dyn-syms", "-W", str(lib)], capture_output=True, text=True,
                             check=True).stdout
    assert "ortfix_stub_libtop_so_3" in symbols
    assert os.access(lib, os.R_OK | os.X_OK)


def test_stub_without_soname_or_dependencies(tmp_path: Path) -> None:
    lib = build_stub_lib(tmp_path / "libplain.so", soname=None)
    assert dynamic(lib) == {}  # not even libc.so.6: -nostdlib
    assert ld_so_list(lib, {}) == {}


@pytest.mark.parametrize(("kind", "present", "absent"), [("runpath", "RUNPATH", "RPATH"),
                                                        ("rpath", "RPATH", "RUNPATH")])
def test_rpath_or_runpath_as_asked(tmp_path: Path, kind: str, present: str, absent: str) -> None:
    dirs = ["$ORIGIN/../lib", "/usr/local/cuda/lib64"]
    if kind == "runpath":
        lib = build_stub_lib(tmp_path / "libx.so.1", soname="libx.so.1", needed=["liby.so.2"], runpath=dirs)
    else:
        lib = build_stub_lib(tmp_path / "libx.so.1", soname="libx.so.1", needed=["liby.so.2"], rpath=dirs)
    tags = dynamic(lib)
    assert tags[present] == ["$ORIGIN/../lib:/usr/local/cuda/lib64"]
    assert absent not in tags
    assert tags["NEEDED"] == ["liby.so.2"]


def test_stub_refuses_both_path_kinds(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not both"):
        build_stub_lib(tmp_path / "libx.so", soname=None, runpath=["/a"], rpath=["/b"])


def test_stubs_come_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ORTFIX_TEST_CACHE", str(cache))
    first = build_stub_lib(tmp_path / "one" / "libc1.so.1", soname="libc1.so.1", needed=["libdep.so.4"])
    built = sorted(cache.rglob("*.so"))
    assert len(built) == 2  # the library and the throwaway libdep.so.4 it was linked against
    second = build_stub_lib(tmp_path / "two" / "libc1.so.1", soname="libc1.so.1", needed=["libdep.so.4"])
    assert sorted(cache.rglob("*.so")) == built
    assert first.read_bytes() == second.read_bytes()
    assert first.stat().st_ino != second.stat().st_ino  # copies, not links into the cache
    other = build_stub_lib(tmp_path / "three" / "libc1.so.1", soname="libc1.so.1", needed=["libdep.so.4"],
                           marker="another build")
    assert other.read_bytes() != first.read_bytes()
    assert dynamic(other) == dynamic(first)


def test_32bit_stub_is_elfclass32_and_the_loader_skips_it(tmp_path: Path) -> None:
    try:
        build_stub_lib(tmp_path / "bad" / "libx.so.1", soname="libx.so.1", machine_32bit=True)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    assert "ELF32" in elf_header(tmp_path / "bad" / "libx.so.1")
    build_stub_lib(tmp_path / "good" / "libx.so.1", soname="libx.so.1")
    top = build_stub_lib(tmp_path / "top" / "libtop.so", soname="libtop.so", needed=["libx.so.1"],
                         runpath=[str(tmp_path / "bad"), str(tmp_path / "good")])
    assert ld_so_list(top, {}) == {"libx.so.1": str(tmp_path / "good" / "libx.so.1")}


# --- the ld.so oracle -----------------------------------------------------------------------------------------------


def test_ld_so_list_follows_an_origin_chain_and_reports_what_is_missing(tmp_path: Path) -> None:
    leaf = build_stub_lib(tmp_path / "deps" / "libleaf.so.1", soname="libleaf.so.1")
    build_stub_lib(tmp_path / "deps" / "libmid.so.2", soname="libmid.so.2", needed=["libleaf.so.1"],
                   runpath=["$ORIGIN"])
    top = build_stub_lib(tmp_path / "top" / "libtop.so", soname="libtop.so", needed=["libmid.so.2", "libgone.so.7"],
                         runpath=["$ORIGIN/../deps"])
    via = f"{tmp_path}/top/../deps"  # ld.so prints the expanded $ORIGIN as it is, unnormalised
    assert ld_so_list(top, {}) == {"libmid.so.2": f"{via}/libmid.so.2", "libleaf.so.1": f"{via}/libleaf.so.1",
                                   "libgone.so.7": None}
    leaf.unlink()
    assert ld_so_list(top, {}) == {"libmid.so.2": f"{via}/libmid.so.2", "libleaf.so.1": None, "libgone.so.7": None}


def test_ld_so_list_uses_exactly_the_given_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_stub_lib(tmp_path / "lib" / "libx.so.1", soname="libx.so.1")
    top = build_stub_lib(tmp_path / "top" / "libtop.so", soname="libtop.so", needed=["libx.so.1"])
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "lib"))  # ours, not the one given: must not count
    assert ld_so_list(top, {}) == {"libx.so.1": None}
    assert ld_so_list(top) == {"libx.so.1": None}
    assert ld_so_list(top, {"LD_LIBRARY_PATH": str(tmp_path / "lib")}) == {"libx.so.1": str(tmp_path / "lib/libx.so.1")}


# --- wheels, venvs, pip ---------------------------------------------------------------------------------------------


def _record_ok(zf: zipfile.ZipFile, record_name: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(zf.read(record_name).decode())))
    assert sorted(r[0] for r in rows) == sorted(zf.namelist())
    for path, digest, size in rows:
        if path == record_name:
            assert (digest, size) == ("", "")
            continue
        data = zf.read(path)
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={expected}" and int(size) == len(data), path
    return rows


@pytest.mark.slow
def test_build_wheel_writes_a_valid_wheel_pip_installs(tmp_path: Path) -> None:
    lib = build_stub_lib(tmp_path / "src" / "libfoo.so.1", soname="libfoo.so.1")
    lib.chmod(0o600)  # the wheel must still make it loadable
    wheel = build_wheel(tmp_path / "house", "My.Pkg-name", "2.0",
                        {"my_pkg/__init__.py": b"x = 1\n", "my_pkg/libfoo.so.1": lib},
                        requires=["dep>=1"], extras={"gpu": ["gpudep~=1.0; python_version >= '3'"]},
                        requires_python=">=3.9")
    assert wheel.name == "my_pkg_name-2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        assert zf.testzip() is None
        _record_ok(zf, "my_pkg_name-2.0.dist-info/RECORD")
        metadata = zf.read("my_pkg_name-2.0.dist-info/METADATA").decode().splitlines()
        wheel_info = zf.read("my_pkg_name-2.0.dist-info/WHEEL").decode().splitlines()
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
    assert metadata[:3] == ["Metadata-Version: 2.1", "Name: My.Pkg-name", "Version: 2.0"]
    assert "Requires-Python: >=3.9" in metadata and "Requires-Dist: dep>=1" in metadata
    assert "Provides-Extra: gpu" in metadata
    assert """Requires-Dist: gpudep~=1.0; (python_version >= '3') and extra == "gpu\"""" in metadata
    assert "Root-Is-Purelib: true" in wheel_info and "Tag: py3-none-any" in wheel_info
    assert modes["my_pkg/libfoo.so.1"] == 0o755 and modes["my_pkg/__init__.py"] == 0o644

    python = make_venv(tmp_path / "venv")
    pip_install(python, "my-pkg-name", find_links=tmp_path / "house", no_deps=True)
    installed = site_packages(tmp_path / "venv") / "my_pkg" / "libfoo.so.1"
    assert installed.is_file() and os.access(installed, os.R_OK | os.X_OK)
    assert dynamic(installed) == {"SONAME": ["libfoo.so.1"]}
    out = run_python(python, "import importlib.metadata as m; print(m.version('my-pkg-name')); "
                             "print(m.requires('my-pkg-name'))")
    assert out.splitlines()[0] == "2.0" and "extra == \"gpu\"" in out

    platform_wheel = build_wheel(tmp_path / "other", "plat", "1.0", {"plat/__init__.py": b""},
                                 tag="cp311-cp311-linux_x86_64")
    with zipfile.ZipFile(platform_wheel) as zf:
        assert "Root-Is-Purelib: false" in zf.read("plat-1.0.dist-info/WHEEL").decode()


@pytest.mark.slow
def test_pip_install_ignores_the_machines_pip_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere, empty = tmp_path / "elsewhere", tmp_path / "empty"
    empty.mkdir()
    build_wheel(elsewhere, "only-elsewhere", "1.0", {"only_elsewhere/__init__.py": b""})
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = {elsewhere}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("PIP_FIND_LINKS", str(elsewhere))
    python = make_venv(tmp_path / "venv")
    with pytest.raises(PipError, match="only-elsewhere") as failure:
        pip_install(python, "only-elsewhere", find_links=empty)
    assert failure.value.proc.returncode != 0
    pip_install(python, "only-elsewhere", find_links=elsewhere)
    assert (site_packages(tmp_path / "venv") / "only_elsewhere" / "__init__.py").is_file()


def test_fake_nvidia_wheel_layouts(tmp_path: Path) -> None:
    old = fake_nvidia_wheel(tmp_path, "nvidia-cudnn-cu11", "8.9.2.26",
                            {"libcudnn_cnn_train.so.8.9.2": "libcudnn_cnn_train.so.8"}, "nvidia/cudnn/lib")
    new = fake_nvidia_wheel(tmp_path, "nvidia-cuda-runtime-cu13", "13.0.96", {"libcudart.so.13": "libcudart.so.13"},
                            "nvidia/cu13/lib", namespace=True)
    with zipfile.ZipFile(old) as zf:
        names = set(zf.namelist())
        assert {"nvidia/__init__.py", "nvidia/cudnn/__init__.py", "nvidia/cudnn/lib/__init__.py",
                "nvidia/cudnn/lib/libcudnn_cnn_train.so.8.9.2"} <= names
        zf.extract("nvidia/cudnn/lib/libcudnn_cnn_train.so.8.9.2", tmp_path / "x")
    assert dynamic(tmp_path / "x/nvidia/cudnn/lib/libcudnn_cnn_train.so.8.9.2") == {
        "SONAME": ["libcudnn_cnn_train.so.8"], "RUNPATH": ["$ORIGIN"]}
    with zipfile.ZipFile(new) as zf:
        assert not [n for n in zf.namelist() if n.endswith("__init__.py")]
        assert "Root-Is-Purelib: true" in zf.read("nvidia_cuda_runtime_cu13-13.0.96.dist-info/WHEEL").decode()


def test_fake_ort_wheels_lay_out_like_the_real_ones(tmp_path: Path, wheelhouse: Path) -> None:
    gpu = next(wheelhouse.glob("onnxruntime_gpu-1.22.0-*.whl"))
    cpu = next(wheelhouse.glob("onnxruntime-1.22.0-*.whl"))
    with zipfile.ZipFile(gpu) as g, zipfile.ZipFile(cpu) as c:
        _record_ok(g, "onnxruntime_gpu-1.22.0.dist-info/RECORD")
        _record_ok(c, "onnxruntime-1.22.0.dist-info/RECORD")
        assert g.read("onnxruntime/capi/build_and_package_info.py") == (
            b"package_name = 'onnxruntime-gpu'\n__version__ = '1.22.0'\ncuda_version = '12.2'\n")
        assert c.read("onnxruntime/capi/build_and_package_info.py") == (
            b"package_name = 'onnxruntime'\n__version__ = '1.22.0'\n")
        assert "onnxruntime/capi/libonnxruntime_providers_cuda.so" in g.namelist()
        assert not [n for n in c.namelist() if "providers_cuda" in n or "providers_tensorrt" in n]
        ext = next(n for n in g.namelist() if "onnxruntime_pybind11_state" in n)
        assert g.read(ext) != c.read(ext)  # tells the variants apart on disk, as the real binaries do
        for zf in (g, c):
            meta = next(n for n in zf.namelist() if n.endswith("/METADATA"))
            deps = [x for x in zf.read(meta).decode().splitlines() if x.startswith("Requires-Dist")]
            assert all("extra ==" in x for x in deps)  # numpy, coloredlogs...: not in a hermetic wheel
    trt = fake_ort_gpu_wheel(tmp_path, tensorrt=True)
    with zipfile.ZipFile(trt) as zf:
        zf.extract("onnxruntime/capi/libonnxruntime_providers_tensorrt.so", tmp_path / "x")
    assert dynamic(tmp_path / "x/onnxruntime/capi/libonnxruntime_providers_tensorrt.so") == {
        "NEEDED": list(TENSORRT_PROVIDER_NEEDED)}


@pytest.mark.slow
def test_gpu_wheel_and_cu12_set_install_at_the_real_paths(tmp_path: Path, wheelhouse: Path) -> None:
    venv = tmp_path / "venv"
    python = make_venv(venv)
    pip_install(python, "onnxruntime-gpu[cuda,cudnn]==1.22.0", find_links=wheelhouse)
    sp = site_packages(venv)

    capi = sp / "onnxruntime" / "capi"
    provider = capi / "libonnxruntime_providers_cuda.so"
    for name in ("build_and_package_info.py", "libonnxruntime_providers_shared.so", "libonnxruntime.so.1.22.0",
                 f"onnxruntime_pybind11_state{sysconfig.get_config_var('EXT_SUFFIX')}"):
        assert (capi / name).is_file(), name
    assert dynamic(provider) == {"NEEDED": list(CU12_PROVIDER_NEEDED)}  # no SONAME, no RUNPATH: like the real one
    assert dynamic(capi / "libonnxruntime_providers_shared.so") == {"SONAME": ["libonnxruntime_providers_shared.so"]}
    assert (sp / "nvidia" / "__init__.py").is_file()  # the 12.4-era wheels are not namespace packages
    for spec in NVIDIA_CU12:
        for filename, soname in spec.libs.items():
            lib = sp / spec.lib_dir / filename
            assert dynamic(lib)["SONAME"] == [soname], lib
    cublas = dynamic(sp / "nvidia/cublas/lib/libcublas.so.12")
    assert cublas["NEEDED"] == ["libcublasLt.so.12"] and cublas["RUNPATH"] == ["$ORIGIN"]
    assert "RUNPATH" not in dynamic(sp / "nvidia/cuda_runtime/lib/libcudart.so.12")

    out = run_python(python, "import importlib.metadata as m, onnxruntime; "
                             "print(sorted(d.metadata['Name'] for d in m.distributions())); "
                             "print(m.version('onnxruntime-gpu'), onnxruntime.__version__); "
                             "print(sum('onnxruntime' in line for line in open('/proc/self/maps')))")
    names, versions, mapped = out.splitlines()
    assert names == str(sorted(["onnxruntime-gpu", *(s.distribution for s in NVIDIA_CU12)]))  # no numpy & co.
    assert versions == "1.22.0 1.22.0"
    assert mapped == "0"  # importing the fake onnxruntime loads no shared library

    # The real loader: nothing is found as installed, everything is once the NVIDIA folders are on the path.
    assert ld_so_list(provider, {}) == dict.fromkeys(CU12_PROVIDER_NEEDED)
    lib_dirs = {spec.lib_dir: sp / spec.lib_dir for spec in NVIDIA_CU12}
    env = {"LD_LIBRARY_PATH": ":".join(str(d) for d in lib_dirs.values())}
    where = {soname: str(lib_dirs[spec.lib_dir] / filename) for spec in NVIDIA_CU12
             for filename, soname in spec.libs.items()}
    assert ld_so_list(provider, env) == {name: where[name] for name in CU12_PROVIDER_NEEDED}
    # cuDNN's sub-libraries find their siblings through RUNPATH $ORIGIN
    adv = sp / "nvidia/cudnn/lib/libcudnn_adv.so.9"
    assert ld_so_list(adv, {}) == {"libcudnn_ops.so.9": str(adv.parent / "libcudnn_ops.so.9"),
                                   "libcudnn_graph.so.9": str(adv.parent / "libcudnn_graph.so.9")}


def test_ortfix_env_keeps_no_path_of_the_caller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from an activated venv, the caller's PATH starts with that venv's bin: ortfix would take its python3 as the
    default target (test_apply's saved-plan test failed so). ortfix_env gives the system's folders instead."""
    activated = tmp_path / "venv" / "bin"
    monkeypatch.setenv("PATH", f"{activated}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("VIRTUAL_ENV", str(activated.parent))
    env = ortfix_env(tmp_path / "pip.conf", tmp_path)
    folders = env["PATH"].split(os.pathsep)
    assert str(activated) not in folders and {"/usr/bin", "/bin"} <= set(folders), folders
    assert "VIRTUAL_ENV" not in env
    assert ortfix_env(tmp_path / "pip.conf", tmp_path, PATH="/opt/tool")["PATH"] == "/opt/tool"  # a test's own wins
