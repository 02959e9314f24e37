"""The probe: runs INSIDE the target interpreter and prints one JSON document describing its environment.

Standard library only, and syntax that Python 3.6 accepts, because it runs in whatever interpreter the user points
ortfix at. It never imports onnxruntime (that can crash or cost 200 ms); it reads files instead.
"""
import sys

# `python -c` puts the current directory first on sys.path; a user's json.py there must not hijack the probe.
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]

import json
import os
import platform
import re
import site
import sysconfig

if False:  # typing is only for the type checker: importing it costs the probe 4 ms
    from typing import Any, Dict, List, Optional  # noqa: F401

PROBE_SCHEMA = 1
INTERESTING = re.compile(r"^(onnxruntime|ort[-_]nightly|nvidia[-_]|torch$|tensorrt)", re.IGNORECASE)
ENV_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PATH", "CUDA_PATH", "CUDA_HOME", "CUDNN_PATH", "CONDA_PREFIX",
            "CONDA_DEFAULT_ENV", "VIRTUAL_ENV", "PYTHONPATH", "ORT_CUDA_UNAVAILABLE")


def normalize(name):
    # type: (str) -> str
    return re.sub(r"[-_.]+", "-", name).lower()


def read_text(path, limit=None):
    # type: (str, Optional[int]) -> Optional[str]
    try:
        with open(path, "rb") as f:
            data = f.read(limit) if limit else f.read()
        return data.decode("utf-8", "replace")
    except OSError:
        return None


def metadata_headers(text):
    # type: (str) -> Dict[str, List[str]]
    headers = {}  # type: Dict[str, List[str]]
    for line in text.split("\n"):
        if not line.strip():
            break
        if line[:1] in (" ", "\t") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        headers.setdefault(key.strip().lower(), []).append(value.strip())
    return headers


def search_dirs():
    # type: () -> List[str]
    seen = []  # type: List[str]
    for entry in sys.path:
        if entry and os.path.isdir(entry):
            real = os.path.realpath(entry)
            if real not in seen:
                seen.append(real)
    return seen


def read_record(dist_dir):
    # type: (str) -> List[List[Any]]
    text = read_text(os.path.join(dist_dir, "RECORD"))
    if text is None:
        return []
    rows = []
    for line in text.splitlines():
        if not line:
            continue
        parts = line.rsplit(",", 2)
        if len(parts) != 3:
            continue
        path, digest, size = parts
        if path.startswith('"') and path.endswith('"'):
            path = path[1:-1].replace('""', '"')
        rows.append([path, digest, int(size) if size.isdigit() else None])
    return rows


def scan_distributions():
    # type: () -> Dict[str, Any]
    interesting = []  # type: List[Dict[str, Any]]
    dependents = []  # type: List[Dict[str, Any]]
    total = 0
    for location in search_dirs():
        try:
            names = os.listdir(location)
        except OSError:
            continue
        for entry in names:
            if entry.endswith(".dist-info"):
                meta_file = "METADATA"
            elif entry.endswith(".egg-info"):
                meta_file = "PKG-INFO"
            else:
                continue
            total += 1
            stem = entry.rsplit(".", 1)[0]
            name_guess = stem.split("-", 1)[0]
            dist_dir = os.path.join(location, entry)
            meta_path = os.path.join(dist_dir, meta_file) if os.path.isdir(dist_dir) else dist_dir
            if INTERESTING.match(name_guess):
                text = read_text(meta_path) or ""
                headers = metadata_headers(text)
                name = (headers.get("name") or [name_guess])[0]
                record = read_record(dist_dir) if normalize(name).startswith(("onnxruntime", "ort-nightly")) else []
                interesting.append({
                    "name": name,
                    "normalized": normalize(name),
                    "version": (headers.get("version") or [""])[0],
                    "location": location,
                    "dist_info": dist_dir,
                    "requires": headers.get("requires-dist", []),
                    "installer": (read_text(os.path.join(dist_dir, "INSTALLER")) or "").strip(),
                    "files": record,
                })
                continue
            # Everyone else matters only if it depends on onnxruntime: read just the headers, and only parse them
            # when the bytes mention onnxruntime at all (keeps 1,000 unrelated distributions cheap).
            head = read_text(meta_path, 65536)
            if not head or "onnxruntime" not in head:
                continue
            headers = metadata_headers(head)
            reqs = [r for r in headers.get("requires-dist", []) if re.match(r"^\s*onnxruntime", r, re.I)]
            if reqs:
                dependents.append({
                    "name": (headers.get("name") or [name_guess])[0],
                    "version": (headers.get("version") or [""])[0],
                    "location": location,
                    "requires": reqs,
                })
    return {"interesting": interesting, "dependents": dependents, "total": total}


def parse_assignments(text):
    # type: (str) -> Dict[str, str]
    out = {}  # type: Dict[str, str]
    for m in re.finditer(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(['\"])(.*?)\2\s*$", text, re.M):
        out[m.group(1)] = m.group(3)
    return out


def scan_onnxruntime_dirs():
    # type: () -> List[Dict[str, Any]]
    found = []
    for location in search_dirs():
        pkg = os.path.join(location, "onnxruntime")
        capi = os.path.join(pkg, "capi")
        if not os.path.isdir(capi):
            continue
        try:
            names = sorted(os.listdir(capi))
        except OSError:
            names = []
        info_text = read_text(os.path.join(capi, "build_and_package_info.py")) or ""
        found.append({
            "package_dir": pkg,
            "location": location,
            "build_info": parse_assignments(info_text),
            "files": [n for n in names if n.endswith((".so", ".dll", ".pyd", ".dylib")) or ".so." in n],
        })
    return found


def scan_torch():
    # type: () -> Optional[Dict[str, Any]]
    for location in search_dirs():
        pkg = os.path.join(location, "torch")
        version_file = os.path.join(pkg, "version.py")
        if not os.path.isfile(version_file):
            continue
        values = parse_assignments(read_text(version_file) or "")
        lib = os.path.join(pkg, "lib")
        try:
            libs = sorted(n for n in os.listdir(lib) if re.match(r"^(lib)?(cud|cublas|cufft|curand|nvrtc|nvJit)", n))
        except OSError:
            libs = []
        return {"dir": pkg, "version": values.get("__version__"), "cuda": values.get("cuda"),
                "lib_dir": lib, "libs": libs}
    return None


def glibc_version():
    # type: () -> Optional[str]
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")  # e.g. "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        value = None
    if value and value.startswith("glibc "):
        return value.split(" ", 1)[1]
    return None


def environment_kind():
    # type: () -> Dict[str, Any]
    prefix = sys.prefix
    base = getattr(sys, "base_prefix", getattr(sys, "real_prefix", prefix))
    is_venv = prefix != base or hasattr(sys, "real_prefix")
    is_conda = os.path.isdir(os.path.join(prefix, "conda-meta"))
    kind = "conda" if is_conda else "venv" if is_venv else "system"
    try:
        site_packages = site.getsitepackages()
    except AttributeError:  # old virtualenv's site.py
        site_packages = [sysconfig.get_paths()["purelib"]]
    purelib = sysconfig.get_paths()["purelib"]
    platlib = sysconfig.get_paths()["platlib"]
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    return {
        "kind": kind,
        "prefix": prefix,
        "base_prefix": base,
        "conda": is_conda,
        "site_packages": site_packages,
        "purelib": purelib,
        "platlib": platlib,
        "user_site": user_site,
        "user_site_enabled": bool(site.ENABLE_USER_SITE),
        "prefix_writable": os.access(platlib if os.path.isdir(platlib) else prefix, os.W_OK),
    }


def main():
    # type: () -> None
    import importlib.util

    dists = scan_distributions()
    uname = platform.uname()
    doc = {
        "probe_schema": PROBE_SCHEMA,
        "python": {
            "executable": sys.executable,
            "real_executable": os.path.realpath(sys.executable),
            "version": "%d.%d.%d" % sys.version_info[:3],
            "implementation": platform.python_implementation().lower(),
            "cache_tag": sys.implementation.cache_tag,
            "pointer_bits": 64 if sys.maxsize > 2 ** 32 else 32,
            "has_pip": importlib.util.find_spec("pip") is not None,
        },
        "os": {
            "system": uname.system,
            "release": uname.release,
            "machine": uname.machine,
            "glibc": glibc_version(),
            "wsl": "microsoft" in uname.release.lower(),
        },
        "env": environment_kind(),
        "environ": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
        "cwd": os.getcwd(),
        "sys_path": search_dirs(),
        "distributions": dists["interesting"],
        "dependents": dists["dependents"],
        "distribution_count": dists["total"],
        "onnxruntime_dirs": scan_onnxruntime_dirs(),
        "torch": scan_torch(),
    }
    sys.stdout.write(json.dumps(doc))


main()
