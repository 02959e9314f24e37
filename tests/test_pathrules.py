"""Whether a path lies in the environment (system/pathrules.py, and each platform's `inside`): the edge cases that a
plain `startswith` gets wrong, by Linux's and by Windows' rules, and links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ortfix.system.linux.platform import LinuxPlatform
from ortfix.system.pathrules import within, within_resolved
from ortfix.system.windows.platform import WindowsPlatform


@pytest.mark.parametrize(("path", "folder", "expected"), [
    ("/env/lib/libcudnn.so.9", "/env", True),
    ("/env", "/env", True),  # the folder itself
    ("/env2/lib", "/env", False),  # a sibling whose name starts with the folder's
    ("/env2", "/env", False),
    ("/env/lib/", "/env/", True),  # trailing separators
    ("/env/", "/env", True),
    ("/env", "/env/", True),
    ("/env/lib/../../other", "/env", False),  # ".." leaves it
    ("/env/./lib", "/env", True),
    ("/Env/lib", "/env", False),  # Linux compares case
    ("/usr/lib", "/", True),  # the root holds everything
    ("/", "/", True),
    ("/en", "/env", False),
])
def test_within_by_linux_rules(path: str, folder: str, expected: bool) -> None:
    assert within(path, folder, windows=False) is expected


@pytest.mark.parametrize(("path", "folder", "expected"), [
    (r"C:\Users\Me\Env\Lib\site-packages", r"c:\users\me\env", True),  # Windows ignores case
    (r"C:\Users\Me\ENV", r"C:\Users\Me\env", True),
    (r"C:\Users\Me\env2\Lib", r"C:\Users\Me\env", False),  # a sibling whose name starts with the folder's
    ("C:/Users/Me/env/Lib", r"C:\Users\Me\env", True),  # "/" and "\" alike
    (r"C:\Users\Me\env\Lib" + "\\", "C:\\Users\\Me\\env\\", True),  # trailing separators
    (r"C:\Users\Me\env\..\other", r"C:\Users\Me\env", False),
    (r"D:\Users\Me\env\Lib", r"C:\Users\Me\env", False),  # another drive
    (r"C:\anything", "C:\\", True),  # the drive's root holds everything on it
])
def test_within_by_windows_rules(path: str, folder: str, expected: bool) -> None:
    assert within(path, folder, windows=True) is expected


def test_strict_leaves_the_folder_itself_out() -> None:
    assert not within(r"C:\env", "c:\\ENV\\", windows=True, strict=True)
    assert within(r"C:\env\Library\bin", r"C:\env", windows=True, strict=True)
    assert not within("/env/", "/env", windows=False, strict=True)
    assert within("/env/lib", "/env", windows=False, strict=True)


def test_links_are_followed_only_when_resolved(tmp_path: Path) -> None:
    env, outside = tmp_path / "env", tmp_path / "elsewhere"
    (env / "lib").mkdir(parents=True)
    outside.mkdir()
    (outside / "libcudart.so.12").write_bytes(b"")
    (env / "lib" / "libcudart.so.12").symlink_to(outside / "libcudart.so.12")  # a link inside, to a file outside
    linked_env = tmp_path / "env-link"
    linked_env.symlink_to(env, target_is_directory=True)  # the environment reached through a linked folder
    inner = str(env / "lib" / "libcudart.so.12")
    assert within(inner, str(env), windows=False)
    assert not within_resolved(inner, str(env), windows=False)
    assert not within(str(linked_env / "lib"), str(env), windows=False)
    assert within_resolved(str(linked_env / "lib"), str(env), windows=False)
    assert within_resolved(str(env / "lib"), str(linked_env), windows=False)


def test_each_platform_answers_by_its_own_rules(tmp_path: Path) -> None:
    env = tmp_path / "Env"
    (env / "Lib").mkdir(parents=True)
    other_case = str(env / "Lib").replace(os.sep + "Env" + os.sep, os.sep + "ENV" + os.sep)
    assert WindowsPlatform().inside(other_case, str(env))
    assert not LinuxPlatform().inside(other_case, str(env))
    assert LinuxPlatform().inside(str(env / "Lib"), str(env))
    assert not LinuxPlatform().inside(str(tmp_path / "Env2"), str(env))
