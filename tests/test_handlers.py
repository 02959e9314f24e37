"""The action handlers' `verify` and `describe` (transaction/actions/), called directly on a fake environment folder
built on disk: real files and folders, `bin/python` a link to this interpreter, no venv, no pip, nothing run.
Each case is one reason a step cannot run here (matched on a stable fragment of its message), or valid details that
give no reason at all."""

from __future__ import annotations

import base64
import hashlib
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from ortfix.errors import OrtfixError
from ortfix.fields import BadField
from ortfix.plan.kinds import (
    ActionKind,
    Installer,
    PipInstallDetails,
    PipUninstallDetails,
    SymlinkDetails,
    WriteFileDetails,
)
from ortfix.transaction.actions import handler_for
from ortfix.transaction.actions.base import TargetEnv, open_env, verified

PYVER = f"python{sys.version_info.major}.{sys.version_info.minor}"
AS_ROOT = os.geteuid() == 0
needs_non_root = pytest.mark.skipif(AS_ROOT, reason="root may write into a read-only folder: run as a normal user")


@dataclass(frozen=True)
class FakeEnv:
    prefix: Path
    site: Path
    env: TargetEnv


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeEnv]:
    """An environment folder: bin/python (a link to this interpreter), lib/pythonX.Y/site-packages, etc/conda."""
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    site = prefix / "lib" / PYVER / "site-packages"
    site.mkdir(parents=True)
    (prefix / "etc" / "conda" / "activate.d").mkdir(parents=True)
    env = open_env(str(prefix / "bin" / "python"), str(prefix), str(site), str(site), str(prefix / "bin"), "venv")
    try:
        yield FakeEnv(Path(env.prefix), Path(env.purelib), env)
    finally:
        env.fs.close()


def sha_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def reasons(env: TargetEnv, kind: ActionKind, details: Mapping[str, object]) -> list[str]:
    """The handler's problems in English (each a str or an i18n.Msg: English as a str)."""
    return [str(r) for r in handler_for(kind).verify(env, details)]


def described(env: TargetEnv, kind: ActionKind, details: Mapping[str, object]) -> list[str]:
    return [str(line) for line in handler_for(kind).describe(env, details)]


def problems(env: TargetEnv, kind: ActionKind, details: Mapping[str, object]) -> list[str]:
    return [str(p) for p in verified(env, kind, details)]


# ---------------------------------------------------------------------------------------------------------------------
# write-file
# ---------------------------------------------------------------------------------------------------------------------

PTH_TEXT = "import _ortfix_preload\n"


def write_details(path: Path, *, replaces_existing: bool = False, content: str = PTH_TEXT) -> WriteFileDetails:
    return {"path": str(path), "content": content, "sha256": sha_text(content), "mode": 0o644,
            "replaces_existing": replaces_existing}


def test_write_file_new_hook_has_no_reasons_and_describes_the_write(fake: FakeEnv) -> None:
    pth = fake.site / "_ortfix_preload.pth"
    details = write_details(pth)
    assert reasons(fake.env, ActionKind.WRITE_FILE, details) == []
    lines = described(fake.env, ActionKind.WRITE_FILE, details)
    assert lines[0].startswith(f"create {pth} ({len(PTH_TEXT)} bytes, mode 0644, sha256 {sha_text(PTH_TEXT)[:16]}")
    assert lines[-1] == "  | import _ortfix_preload"


def test_write_file_replacing_an_existing_hook_has_no_reasons(fake: FakeEnv) -> None:
    hook = fake.prefix / "etc" / "conda" / "activate.d" / "ortfix-cuda-libs.sh"
    hook.write_text("# an earlier ortfix hook\n", encoding="utf-8")
    details = write_details(hook, replaces_existing=True, content="export X=1\n")
    assert reasons(fake.env, ActionKind.WRITE_FILE, details) == []
    assert "the current file is kept in the stash" in described(fake.env, ActionKind.WRITE_FILE, details)[0]


def test_write_file_over_a_file_that_appeared_since_the_plan_is_refused(fake: FakeEnv) -> None:
    pth = fake.site / "_ortfix_preload.pth"
    pth.write_text("import something_else\n", encoding="utf-8")  # other content, there now, not when planned
    assert reasons(fake.env, ActionKind.WRITE_FILE, write_details(pth)) == [
        f"{pth} appeared since the plan was made"]


def test_write_file_replacing_a_file_that_disappeared_is_refused(fake: FakeEnv) -> None:
    pth = fake.site / "_ortfix_preload.pth"
    assert reasons(fake.env, ActionKind.WRITE_FILE, write_details(pth, replaces_existing=True)) == [
        f"{pth} disappeared since the plan was made"]


def test_write_file_over_a_link_pointing_outside_the_prefix_is_refused(fake: FakeEnv, tmp_path: Path) -> None:
    outside = tmp_path / "outside.pth"
    outside.write_text(PTH_TEXT, encoding="utf-8")
    pth = fake.site / "_ortfix_preload.pth"
    pth.symlink_to(outside)
    for replaces in (False, True):
        assert reasons(fake.env, ActionKind.WRITE_FILE, write_details(pth, replaces_existing=replaces)) == [
            f"{pth} is not a regular file"]
    assert outside.read_text(encoding="utf-8") == PTH_TEXT


@needs_non_root
def test_write_file_into_a_folder_that_is_not_writable_is_refused(fake: FakeEnv) -> None:
    pth = fake.site / "_ortfix_preload.pth"
    fake.site.chmod(0o555)
    try:
        assert reasons(fake.env, ActionKind.WRITE_FILE, write_details(pth)) == [f"cannot write {pth}: not writable"]
    finally:
        fake.site.chmod(0o755)


def test_write_file_of_a_file_that_is_not_an_ortfix_hook_is_refused(fake: FakeEnv) -> None:
    other = fake.site / "sitecustomize.py"
    with pytest.raises(BadField, match="is not a file ortfix writes"):
        reasons(fake.env, ActionKind.WRITE_FILE, write_details(other))
    [problem] = problems(fake.env, ActionKind.WRITE_FILE, write_details(other))
    assert problem.startswith(f"{other} is not a file ortfix writes (only its own hooks: ")


def test_write_file_whose_content_was_edited_after_planning_is_refused(fake: FakeEnv) -> None:
    details = write_details(fake.site / "_ortfix_preload.pth")
    details["content"] = "import os; os.system('true')\n"
    [problem] = problems(fake.env, ActionKind.WRITE_FILE, details)
    assert "does not match its sha256 (edited)" in problem


# ---------------------------------------------------------------------------------------------------------------------
# symlink
# ---------------------------------------------------------------------------------------------------------------------


@pytest.fixture
def cublas_dir(fake: FakeEnv) -> Path:
    lib = fake.site / "nvidia" / "cublas" / "lib"
    lib.mkdir(parents=True)
    (lib / "libcublas.so.12.1.0").write_bytes(b"\x7fELF not really")
    return lib


def test_symlink_valid_soname_link_has_no_reasons(fake: FakeEnv, cublas_dir: Path) -> None:
    details: SymlinkDetails = {"path": str(cublas_dir / "libcublas.so.12"), "target": "libcublas.so.12.1.0"}
    assert reasons(fake.env, ActionKind.SYMLINK, details) == []
    assert described(fake.env, ActionKind.SYMLINK, details) == [
        f"create the symbolic link {cublas_dir / 'libcublas.so.12'} -> libcublas.so.12.1.0"]


@pytest.mark.parametrize(("name", "target"), [
    ("cublas.txt", "libcublas.so.12.1.0"),  # the link is no library name
    ("libcublas.so.12", "../../../../../../etc/passwd"),  # the target is no file name next to it
    ("libcublas.so.12", "cublas.py"),
])
def test_symlink_that_is_not_a_soname_link_is_refused(fake: FakeEnv, cublas_dir: Path, name: str,
                                                      target: str) -> None:
    details: SymlinkDetails = {"path": str(cublas_dir / name), "target": target}
    with pytest.raises(BadField, match="is not a library's SONAME link"):
        reasons(fake.env, ActionKind.SYMLINK, details)
    assert problems(fake.env, ActionKind.SYMLINK, details) == [
        f"{cublas_dir / name} -> {target} is not a library's SONAME link"]


def test_symlink_named_for_another_library_is_refused(fake: FakeEnv, cublas_dir: Path) -> None:
    details: SymlinkDetails = {"path": str(cublas_dir / "libcudnn.so.9"), "target": "libcublas.so.12.1.0"}
    assert any("it names another library" in r for r in problems(fake.env, ActionKind.SYMLINK, details))


def test_symlink_over_an_existing_file_is_refused(fake: FakeEnv, cublas_dir: Path) -> None:
    link = cublas_dir / "libcublas.so.12"
    link.write_bytes(b"a real file")
    assert reasons(fake.env, ActionKind.SYMLINK, {"path": str(link), "target": "libcublas.so.12.1.0"}) == [
        f"{link} exists: ortfix never overwrites a file with a link"]


def test_symlink_to_a_file_that_is_not_there_is_refused(fake: FakeEnv, cublas_dir: Path) -> None:
    link = cublas_dir / "libcublas.so.12"
    assert reasons(fake.env, ActionKind.SYMLINK, {"path": str(link), "target": "libcublas.so.12.9.9"}) == [
        f"the link target libcublas.so.12.9.9 is not a file next to {link}"]


def test_symlink_outside_site_packages_is_refused(fake: FakeEnv) -> None:
    link = fake.prefix / "lib" / "libcublas.so.12"
    (fake.prefix / "lib" / "libcublas.so.12.1.0").write_bytes(b"x")
    assert problems(fake.env, ActionKind.SYMLINK, {"path": str(link), "target": "libcublas.so.12.1.0"}) == [
        f"{link} is not inside the environment's site-packages"]


@needs_non_root
def test_symlink_in_a_folder_that_is_not_writable_is_refused(fake: FakeEnv, cublas_dir: Path) -> None:
    link = cublas_dir / "libcublas.so.12"
    cublas_dir.chmod(0o555)
    try:
        assert reasons(fake.env, ActionKind.SYMLINK, {"path": str(link), "target": "libcublas.so.12.1.0"}) == [
            f"cannot create {link}: its folder is not writable"]
    finally:
        cublas_dir.chmod(0o755)


# ---------------------------------------------------------------------------------------------------------------------
# pip-uninstall
# ---------------------------------------------------------------------------------------------------------------------


def install_dist(site: Path, record_extra: str = "") -> Path:
    """demo 1.0 as pip leaves it: a package, a .dist-info with METADATA and a RECORD naming every file."""
    (site / "demo").mkdir()
    code = b"VALUE = 1\n"
    (site / "demo" / "__init__.py").write_bytes(code)
    dist_info = site / "demo-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\n", encoding="utf-8")
    digest = base64.urlsafe_b64encode(hashlib.sha256(code).digest()).rstrip(b"=").decode()
    (dist_info / "RECORD").write_text(
        f"demo/__init__.py,sha256={digest},{len(code)}\ndemo-1.0.dist-info/METADATA,,\n"
        f"demo-1.0.dist-info/RECORD,,\n{record_extra}", encoding="utf-8")
    return dist_info


def uninstall_details(site: Path, dist_info: Path) -> PipUninstallDetails:
    return {"distribution": "demo", "version": "1.0", "location": str(site), "dist_info": str(dist_info)}


def test_pip_uninstall_of_an_installed_distribution_has_no_reasons(fake: FakeEnv) -> None:
    details = uninstall_details(fake.site, install_dist(fake.site))
    assert reasons(fake.env, ActionKind.PIP_UNINSTALL, details) == []
    lines = described(fake.env, ActionKind.PIP_UNINSTALL, details)
    assert lines[0].startswith("move aside 3 files of demo 1.0 ")
    assert sorted(lines[1:]) == sorted(f"  - {fake.site / p}" for p in (
        "demo/__init__.py", "demo-1.0.dist-info/METADATA", "demo-1.0.dist-info/RECORD"))


def test_pip_uninstall_of_a_distribution_not_installed_is_refused(fake: FakeEnv) -> None:
    gone = fake.site / "demo-1.0.dist-info"
    assert reasons(fake.env, ActionKind.PIP_UNINSTALL, uninstall_details(fake.site, gone)) == [
        f"demo 1.0 is no longer installed ({gone} is gone)"]


def test_pip_uninstall_without_a_record_is_refused(fake: FakeEnv) -> None:
    egg = fake.site / "demo-1.0.egg-info"
    egg.mkdir()
    assert reasons(fake.env, ActionKind.PIP_UNINSTALL, uninstall_details(fake.site, egg)) == [
        "demo 1.0 was installed without a RECORD (demo-1.0.egg-info): uninstall it with pip"]


def test_pip_uninstall_whose_record_leads_outside_the_environment_is_refused(fake: FakeEnv) -> None:
    dist_info = install_dist(fake.site, record_extra="../../../../outside.txt,,\n")
    [problem] = reasons(fake.env, ActionKind.PIP_UNINSTALL, uninstall_details(fake.site, dist_info))
    assert problem.startswith("demo 1.0 lists files outside the environment or behind a link: ")
    assert problem.endswith("; uninstall it with pip yourself")


def test_pip_uninstall_outside_site_packages_is_refused(fake: FakeEnv) -> None:
    elsewhere = fake.prefix / "lib"
    dist_info = elsewhere / "demo-1.0.dist-info"
    dist_info.mkdir()
    assert problems(fake.env, ActionKind.PIP_UNINSTALL, uninstall_details(elsewhere, dist_info)) == [
        f"{elsewhere} is not a site-packages folder of this environment"]


@needs_non_root
def test_pip_uninstall_from_a_folder_that_is_not_writable_is_refused(fake: FakeEnv) -> None:
    details = uninstall_details(fake.site, install_dist(fake.site))
    (fake.site / "demo").chmod(0o555)
    try:
        assert reasons(fake.env, ActionKind.PIP_UNINSTALL, details) == [
            f"cannot move files out of {fake.site / 'demo'}: not writable"]
    finally:
        (fake.site / "demo").chmod(0o755)


# ---------------------------------------------------------------------------------------------------------------------
# pip-install
# ---------------------------------------------------------------------------------------------------------------------


def install_details(installer: Installer | None, *requirements: str) -> PipInstallDetails:
    return {"requirements": list(requirements) or ["onnxruntime-gpu==1.22.0"], "installer": installer,
            "reinstall": False}


def test_pip_install_with_pip_has_no_reasons_and_describes_the_command(fake: FakeEnv) -> None:
    details = install_details("pip")
    assert reasons(fake.env, ActionKind.PIP_INSTALL, details) == []
    assert described(fake.env, ActionKind.PIP_INSTALL, details) == [
        f"run (the environment's own pip, with your pip configuration): {fake.env.python} -m pip install "
        "onnxruntime-gpu==1.22.0 --only-binary=:all: --disable-pip-version-check --no-user"]


def test_pip_install_with_uv_but_no_uv_on_path_is_refused(fake: FakeEnv) -> None:
    assert fake.env.uv is None
    [problem] = reasons(fake.env, ActionKind.PIP_INSTALL, install_details("uv"))
    assert problem.startswith("the plan installs with uv, but no uv is on PATH now")


def test_pip_install_without_an_installer_is_refused(fake: FakeEnv) -> None:
    [problem] = reasons(fake.env, ActionKind.PIP_INSTALL, install_details(None))
    assert problem.startswith("the target environment has no pip (and no uv was found)")


@pytest.mark.parametrize("requirement", ["onnxruntime-gpu @ https://example.invalid/x.whl", "--index-url=x",
                                         "onnxruntime-gpu[cuda]==1.22.0", "x; python_version > '3'"])
def test_pip_install_of_something_other_than_a_plain_requirement_is_refused(fake: FakeEnv, requirement: str) -> None:
    assert problems(fake.env, ActionKind.PIP_INSTALL, install_details("pip", requirement)) == [
        f"{requirement!r} is not a plain requirement (a name and version specifiers only)"]


@needs_non_root
def test_pip_install_into_a_site_packages_that_is_not_writable_is_refused(fake: FakeEnv) -> None:
    fake.site.chmod(0o555)
    try:
        assert reasons(fake.env, ActionKind.PIP_INSTALL, install_details("pip")) == [f"{fake.site} is not writable"]
    finally:
        fake.site.chmod(0o755)


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(OrtfixError, match="unknown action kind 'chmod'"):
        handler_for("chmod")
