"""What ortfix tells a Windows user to do about the two things in the GPU stack that no pip wheel provides well: the
Microsoft Visual C++ runtime (`msvcp140.dll` >= 14.40 for onnxruntime-gpu >= 1.22) and cuDNN 8's `zlibwapi.dll`.
Findings (check/), verify's verdicts and explain's patterns (compat/errors.yaml says the same in words) use these
strings, so every place gives the same remedy.

Sources (read 2026-11-24):
- The rule itself: docs/windows-dlls.md ("MSVC runtime"): ORT >= 1.22 imports `_Mtx_lock` without
  `_Mtx_init_in_situ` (the constexpr-mutex change of microsoft/STL 4730), which an msvcp140.dll older than 14.40 does
  not handle; python.org's Python ships vcruntime140.dll and vcruntime140_1.dll but not msvcp140.dll, which then
  comes from System32 (the redistributable) or, in conda, from the environment's own `vc14_runtime`. Read off the
  real win_amd64 wheel of 1.19.2: onnxruntime_pybind11_state.pyd imports MSVCP140.dll and MSVCP140_1.dll, and
  onnxruntime_providers_cuda.dll imports MSVCP140.dll (pefile).
- The pip package `msvc-runtime` (checked by downloading msvc_runtime-14.44.35112-cp311-cp311-win_amd64.whl and
  listing it): msvcp140.dll etc. with FileVersion 14.44.35211, installed as wheel *data* into `sys.prefix` and
  `sys.prefix\\Scripts`; its METADATA names no author or project page; it is the package WinPython bundles (WinPython
  changelogs list msvc_runtime 14.27 ... 14.32 upgrades). Why ortfix does not install it: a DLL an extension module
  imports is searched in the *application's* folder (python.exe's), System32 and `os.add_dll_directory` folders
  (CPython's LOAD_LIBRARY_SEARCH_DEFAULT_DIRS), never PATH. In a venv, `Scripts\\python.exe` is a launcher that starts
  the base interpreter (since CPython 3.7.2: bpo-34977, python/cpython#11030 "venv redirector"; multiprocessing's
  bpo-35797 "bypass the redirect executor and launch our base Python"), so the venv's copies are not in the
  application's folder: `onnxruntime_pybind11_state.pyd` still gets System32's msvcp140.dll, and the provider DLL,
  which imports msvcp140.dll too, gets the one already loaded. It works only in a base python.org install
  (sys.prefix is python.exe's folder), where it changes every program of that Python, and in conda it would
  overwrite files `vc14_runtime` owns. The redistributable is the one remedy that works for every kind of
  environment.
- zlibwapi.dll: docs/windows-dlls.md ("DLL names"): cuDNN 8.3 to 8.9 for Windows load zlibwapi.dll, no wheel
  ships it and NVIDIA stopped distributing it (seeds/002: "Could not locate zlibwapi.dll"); cuDNN 9 does not use it,
  and onnxruntime-gpu >= 1.19 is built for cuDNN 9 (compat/ort.yaml).
"""

from __future__ import annotations

from ortfix.i18n import N_, Msg

# onnxruntime-gpu releases from this one on need msvcp140.dll of at least MSVC_MIN_VERSION.
MSVC_MIN_ORT = "1.22"
MSVC_MIN_VERSION: tuple[int, int] = (14, 40)
MSVC_DLL = "msvcp140.dll"
MSVC_REDIST = "Microsoft Visual C++ Redistributable for Visual Studio 2015-2022 (x64)"

# Microsoft's permanent address of the latest x64 redistributable ("Latest supported Visual C++ Redistributable
# downloads", learn.microsoft.com: "Permalink for latest supported x64 version"), and its winget package id.
MSVC_REDIST_URL = "https://aka.ms/vs/17/release/vc_redist.x64.exe"
MSVC_WINGET_ID = "Microsoft.VCRedist.2015+.x64"
# The one remedy: check's WIN001 (outside conda), verify's verdict, explain's answers (compat/errors.yaml's
# `{msvc_remedy}`, filled in by explain/patterns.py) and README say this.
MSVC_REMEDY_MSG = Msg(
    N_("install the latest {redist}, version {version} or newer ({url}, or `winget install {winget}`), then start the "
       "program again: it updates msvcp140.dll in System32, which every Python finds"),
    redist=MSVC_REDIST, version=f"{MSVC_MIN_VERSION[0]}.{MSVC_MIN_VERSION[1]}", url=MSVC_REDIST_URL,
    winget=MSVC_WINGET_ID)
MSVC_REMEDY = str(MSVC_REMEDY_MSG)
MSVC_WHY_MSG = Msg(
    N_("onnxruntime-gpu {ort} and newer need {dll} {version} or newer (the C++ runtime's mutex changed); python.org's "
       "Python does not ship msvcp140.dll, so the one in System32 is used"),
    ort=MSVC_MIN_ORT, dll=MSVC_DLL, version=f"{MSVC_MIN_VERSION[0]}.{MSVC_MIN_VERSION[1]}")
MSVC_WHY = str(MSVC_WHY_MSG)
# Why ortfix does not `pip install msvc-runtime` for the user (see the module docstring).
MSVC_PIP_PACKAGE_NOTE = N_(
    "the pip package msvc-runtime copies the DLLs into sys.prefix and its Scripts folder; in a venv that is not the "
    "folder of the python.exe that runs, so onnxruntime would still get System32's msvcp140.dll"
)

ZLIBWAPI_DLL = "zlibwapi.dll"
ZLIBWAPI_WHY = N_(
    "cuDNN 8.3 to 8.9 for Windows load zlibwapi.dll, which no pip wheel ships and NVIDIA no longer distributes"
)
ZLIBWAPI_REMEDY = N_(  # compat/errors.yaml's cudnn8-zlibwapi-missing says the same (tests/test_windows_plan.py)
    "move to cuDNN 9 rather than hunting for a zlibwapi.dll: onnxruntime-gpu 1.19 or newer is built for cuDNN 9, and "
    "`ortfix plan` moves to such a release with its nvidia-cudnn wheel (`ortfix plan --ort-version 1.19.2` or newer "
    "to choose one); cuDNN 9 does not use zlibwapi.dll. Staying on cuDNN 8 (onnxruntime-gpu 1.18 or older) means "
    "putting an x64 zlibwapi.dll (zlib built with ZLIB_WINAPI) in a folder on PATH yourself"
)


def msvc_version_ok(version: tuple[int, ...] | None) -> bool | None:
    """Whether an msvcp140.dll FileVersion (14, 44, 35211, 0) is new enough for onnxruntime-gpu >= MSVC_MIN_ORT;
    None when the version is not known."""
    if version is None or len(version) < 2:
        return None
    return tuple(version[:2]) >= MSVC_MIN_VERSION
