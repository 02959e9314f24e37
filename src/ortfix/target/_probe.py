"""The probe: runs INSIDE the target interpreter and prints one JSON document describing its environment.

Standard library only, and syntax that Python 3.6 accepts, because it runs in whatever interpreter the user points
ortfix at. It never imports onnxruntime (that can crash or cost 200 ms); it reads files instead.

Over the usual ~400 lines on purpose: it is sent to the target as the source of one `python -c`, so it must be one
self-contained file (it cannot import ortfix's other modules, which the target does not have).
"""
import sys

# `python -c` puts the current directory first on sys.path; a user's sysconfig.py there must not hijack the probe.
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]

# Only modules site.py would have loaded (importing site under -S does not run it), plus sysconfig once sys.prefix
# is the venv's (environment_kind): json, re, platform and importlib.util cost the probe 12 ms of its 31
# (json.decoder alone pulls in re, enum, functools and collections), so it does without them.
import os
import site

if False:  # typing is only for the type checker: importing it costs the probe 4 ms
    from typing import Any, Dict, List, Optional, Set  # noqa: F401

try:  # json.dumps' own C escaper for strings, without json's imports (a third of the probe's run time otherwise)
    from _json import encode_basestring_ascii as c_encode_string
except ImportError:  # an interpreter built without it: encode_char() below
    c_encode_string = None  # type: ignore[assignment]
try:  # and the C encoder json.dumps runs for a whole document: a third of the time encode() below takes
    from _json import make_encoder as c_make_encoder
except ImportError:  # an interpreter built without it: encode()
    c_make_encoder = None  # type: ignore[assignment,misc]

PROBE_SCHEMA = 2  # 2: an ORT distribution's RECORD rows are paths, but those of its extension module (MODULE_MARK)
INTERESTING_PREFIXES = ("onnxruntime", "ort-nightly", "ort_nightly", "nvidia-", "nvidia_", "tensorrt")
ORT_PREFIXES = ("onnxruntime", "ort-nightly")  # normalized names whose RECORD rows are reported
# The RECORD rows reported whole ([path, digest, size]): those that may list ORT's extension module, whose size and
# digest tell which of two builds in one folder is the one on disk (check/facts.py, `_owners`: its file name starts
# with this, and a row names it only if its path has it: normpath keeps the last part). Every other row is reported
# as its path alone: the parent uses only the paths and their number, and the digests were most of the report (608
# rows of onnxruntime-gpu 1.22.0, 65 of its 68 KB).
MODULE_MARK = "onnxruntime_pybind11_state"
# Normalized names whose installed files are checked against their RECORD (size only: hashing hundreds of MB on every
# check is out of the question, and a pip stopped half-way leaves files missing or cut short, not altered).
VERIFIED_PREFIXES = ("onnxruntime", "ort-nightly", "nvidia-")
TORCH_LIB_PREFIXES = ("cud", "cublas", "cufft", "curand", "nvrtc", "nvJit", "zlibwapi",
                      "libcud", "libcublas", "libcufft", "libcurand", "libnvrtc", "libnvJit")
IDENTIFIER_START = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"
IDENTIFIER_CHARS = IDENTIFIER_START + "0123456789"
# Case folding as re.IGNORECASE does it for an ASCII pattern: A-Z, and the four non-ASCII letters it also matches to
# i, i, s and k (str.lower() differs on them, and "\u0130".lower() is two characters). This file is ASCII: it is
# sent as the argument of `-c`, which a strict C locale decodes as ASCII.
FOLD = {c: c + 32 for c in range(65, 91)}  # type: Dict[int, int]
FOLD.update({0x130: 0x69, 0x131: 0x69, 0x17F: 0x73, 0x212A: 0x6B})
# The escapes json.dumps writes short; encode_char() writes any other character outside " " to "~" as \uXXXX.
JSON_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
ENV_VARS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "PATH", "CUDA_PATH", "CUDA_HOME", "CUDNN_PATH", "CONDA_PREFIX",
            "CONDA_DEFAULT_ENV", "VIRTUAL_ENV", "PYTHONPATH", "ORT_CUDA_UNAVAILABLE")


def make_path(*parts):
    # type: (str) -> List[str]
    # site.makepath: the absolute path and the form known paths are compared in.
    path = os.path.join(*parts)
    try:  # noqa: SIM105 (contextlib would be one more import for the probe)
        path = os.path.abspath(path)
    except OSError:  # the working directory is gone: site.py keeps the path as it is
        pass
    return [path, os.path.normcase(path)]


def add_path(paths, known, path):
    # type: (List[str], Set[str], str) -> None
    path, case = make_path(path)
    if case not in known:
        paths.append(path)
        known.add(case)


def pth_lines(path):
    # type: (str) -> List[str]
    # The lines of a .pth file as site.py reads them (UTF-8, else the file system's encoding); none when unreadable.
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return []
    try:  # data.decode("utf-8-sig"), without importing that codec's module (encodings.utf_8_sig)
        text = (data[3:] if data.startswith(b"\xef\xbb\xbf") else data).decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode(sys.getfilesystemencoding(), "surrogateescape")
    return text.splitlines()


def add_site_dir(paths, known, site_dir):
    # type: (List[str], Set[str], str) -> None
    # site.addsitedir without running anything: the folder, then each .pth file's path lines, in name order; a line
    # that starts with "import" is code site.py would run, and is skipped (as are comments and blank lines).
    add_path(paths, known, site_dir)
    site_dir = make_path(site_dir)[0]
    try:
        names = sorted(n for n in os.listdir(site_dir) if n.endswith(".pth") and not n.startswith("."))
    except OSError:
        return
    for name in names:
        for line in pth_lines(os.path.join(site_dir, name)):
            if line.startswith("#") or not line.strip() or line.startswith(("import ", "import\t")):
                continue
            path, case = make_path(site_dir, line.rstrip())
            if case not in known and os.path.exists(path):
                paths.append(path)
                known.add(case)


def venv_config():
    # type: () -> Optional[List[Any]]
    # site.venv: [the venv's folder, whether the base's site-packages count] when a pyvenv.cfg sits beside the
    # interpreter or one folder up; else None.
    exe_dir = os.path.dirname(os.path.abspath(sys.executable))
    site_prefix = os.path.dirname(exe_dir)
    for cfg in (os.path.join(exe_dir, "pyvenv.cfg"), os.path.join(site_prefix, "pyvenv.cfg")):
        if os.path.isfile(cfg):
            system_site = "true"
            for line in pth_lines(cfg):
                key, eq, value = line.partition("=")
                if eq and key.strip().lower() == "include-system-site-packages":
                    system_site = value.strip().lower()
            return [site_prefix, system_site == "true"]
    return None


def site_path():
    # type: () -> List[str]
    # What `site` does at start-up, worked out without running any of the environment's code: ortfix starts the probe
    # with -S, so that no .pth import line and no sitecustomize runs (run by root, they would run as root). The venv's
    # prefix, the user site, the site-packages folders and their .pth path lines go into sys.path as site.py would
    # put them. Returns the prefixes whose site-packages count. Started without -S, site has done it all already.
    if not sys.flags.no_site:
        return list(getattr(site, "PREFIXES", [sys.prefix]))
    paths = []  # type: List[str]
    known = set()  # type: Set[str]
    for entry in sys.path:
        add_path(paths, known, entry)
    prefixes = [sys.prefix, sys.exec_prefix]
    user_site = None  # type: Optional[bool]
    venv = venv_config()
    if venv is not None:
        sys.prefix = sys.exec_prefix = venv[0]
        add_site_packages(paths, known, [venv[0]])
        if venv[1]:
            prefixes.insert(0, venv[0])
        else:
            prefixes = [venv[0]]
            user_site = False
    if user_site is None:
        check = getattr(site, "check_enableusersite", None)  # absent from legacy virtualenv's own site.py
        user_site = bool(check()) if check is not None else False
    site.ENABLE_USER_SITE = user_site
    if user_site and os.path.isdir(site.getusersitepackages()):
        add_site_dir(paths, known, site.getusersitepackages())
    add_site_packages(paths, known, prefixes)
    sys.path[:] = paths
    return prefixes


def site_packages(prefixes):
    # type: (List[str]) -> List[str]
    if hasattr(site, "getsitepackages"):
        return site.getsitepackages(prefixes)
    # legacy virtualenv's own site.py has none: the POSIX layout
    return [os.path.join(p, "lib", "python%d.%d" % sys.version_info[:2], "site-packages") for p in prefixes]


def add_site_packages(paths, known, prefixes):
    # type: (List[str], Set[str], List[str]) -> None
    for site_dir in site_packages(prefixes):
        if os.path.isdir(site_dir):
            add_site_dir(paths, known, site_dir)


def normalize(name):
    # type: (str) -> str
    # PEP 503: every run of "-", "_" and "." becomes one "-".
    name = name.replace("_", "-").replace(".", "-")
    while "--" in name:
        name = name.replace("--", "-")
    return name.lower()


def is_interesting(name_guess):
    # type: (str) -> bool
    folded = name_guess.translate(FOLD)
    return folded in ("torch", "torch\n") or folded.startswith(INTERESTING_PREFIXES)  # as re's `torch$` did


def read_text(path):
    # type: (str) -> Optional[str]
    try:
        with open(path, "rb") as f:
            data = f.read()
        return data.decode("utf-8", "replace")
    except OSError:
        return None


def requires_onnxruntime(requirement):
    # type: (str) -> bool
    # A Requires-Dist value naming onnxruntime or one of its variants (case folded as re.IGNORECASE folds).
    return requirement.lstrip()[:11].translate(FOLD) == "onnxruntime"


def requires_interesting(requirement):
    # type: (str) -> bool
    # A Requires-Dist value naming a distribution a plan may change (ORT, NVIDIA wheels, TensorRT): what a plan must
    # not take from the distribution that requires it.
    return requires_onnxruntime(requirement) or requirement.lstrip()[:12].translate(FOLD).startswith(
        INTERESTING_PREFIXES)


def marker_environment(system, release, machine):
    # type: (str, str, str) -> Dict[str, str]
    # The PEP 508 marker values of this interpreter, as packaging.markers.default_environment() computes them
    # (without importing platform: 1.7 ms; the values are the ones platform reports).
    impl = sys.implementation
    info = impl.version
    impl_version = "%d.%d.%d" % (info.major, info.minor, info.micro)
    if info.releaselevel != "final":
        impl_version += info.releaselevel[0] + str(info.serial)
    names = {"cpython": "CPython", "pypy": "PyPy", "ironpython": "IronPython", "jython": "Jython"}
    version = uname_version()
    return {
        "implementation_name": impl.name,
        "implementation_version": impl_version,
        "os_name": os.name,
        "platform_machine": machine,
        "platform_release": release,
        "platform_system": system,
        "platform_version": version,
        "python_full_version": sys.version.split()[0],
        "platform_python_implementation": names.get(impl.name, impl.name),
        "python_version": "%d.%d" % sys.version_info[:2],
        "sys_platform": sys.platform,
    }


def uname_version():
    # type: () -> str
    if not hasattr(os, "uname"):  # Windows
        import platform

        return platform.version()
    return os.uname().version


def is_torch_cuda_lib(name):
    # type: (str) -> bool
    return name.startswith(TORCH_LIB_PREFIXES)


def read_head(path, limit):
    # type: (str, int) -> Optional[bytes]
    # The first `limit` bytes with bare os.open/os.read: half the cost of open() for each of the thousands of
    # METADATA files a big environment has, which only need a glance.
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))  # Windows: no CRLF translation
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


def metadata_headers(text):
    # type: (str) -> Dict[str, List[str]]
    # The headers end at the first blank line, at the latest the first empty one: only the text before it is split
    # (the long description after it is most of a METADATA file).
    blank = text.find("\n\n")
    headers = {}  # type: Dict[str, List[str]]
    for line in (text if blank < 0 else text[:blank]).split("\n"):
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
    # type: (str) -> Optional[List[List[Any]]]
    # None when there is no RECORD: pip writes it last, so a .dist-info without one is an install cut short.
    text = read_text(os.path.join(dist_dir, "RECORD"))
    if text is None:
        return None
    rows = []  # type: List[List[Any]]
    append = rows.append
    quoted = '"' in text
    for line in text.splitlines():
        # line.rsplit(",", 2) without its list: a row has two commas at least (the last two end path and digest)
        head, _, size = line.rpartition(",")
        path, comma, digest = head.rpartition(",")
        if not comma:
            continue
        if quoted and path.startswith('"') and path.endswith('"'):
            path = path[1:-1].replace('""', '"')
        append([path, digest, int(size) if size and not size.strip("0123456789") else None])
    return rows


def verify_record(location, rows):
    # type: (str, List[List[Any]]) -> Any
    # How many rows were checked, and those whose file is missing or has another size: [path, recorded size, size on
    # disk or None, None] (mark_overwritten fills in the last item). Rows without a size (RECORD's own), empty files
    # (a namespace folder's __init__.py, shared by every NVIDIA wheel and removed with the first one uninstalled) and
    # cached bytecode (rewritten by any interpreter, removed by anyone) are not checked: none says the install is
    # damaged.
    bad = []
    checked = 0
    stat = os.stat
    # Relative to the folder opened once (fstatat): a third cheaper than resolving the whole path for each row.
    fd = None
    if stat in os.supports_dir_fd:
        try:
            fd = os.open(location, os.O_RDONLY)
        except OSError:
            fd = None
    try:
        for path, _digest, size in rows:
            if not size or path.endswith(".pyc"):
                continue
            checked += 1
            try:
                actual = (stat(path, dir_fd=fd) if fd is not None
                          else stat(os.path.join(location, path))).st_size  # type: Optional[int]
            except OSError:
                actual = None
            if actual != size:
                bad.append([path, size, actual, None])
    finally:
        if fd is not None:
            os.close(fd)
    return checked, bad


def mark_overwritten(checked):
    # type: (List[Any]) -> None
    # A file with another size that another checked distribution in the same folder lists with exactly that size was
    # overwritten by it (two ONNX Runtime builds, or two cuDNN majors, in one folder): not damage. Only looked at
    # when something has another size, so a healthy environment pays nothing for it.
    if not any(bad[2] is not None for entry, _rows in checked for bad in entry["damaged"]):
        return
    sizes = {}  # type: Dict[Any, List[Any]]
    for entry, rows in checked:
        for path, _digest, size in rows:
            sizes.setdefault((entry["location"], path), []).append((entry["name"], size))
    for entry, _rows in checked:
        for bad in entry["damaged"]:
            if bad[2] is None:
                continue
            for other, size in sizes.get((entry["location"], bad[0]), ()):
                if other != entry["name"] and size == bad[2]:
                    bad[3] = other
                    break


def scan_distributions(dirs):
    # type: (List[str]) -> Dict[str, object]
    interesting = []  # type: List[Dict[str, object]]
    checked = []  # type: List[object]
    dependents = []  # type: List[Dict[str, object]]
    total = 0
    for location in dirs:
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
            # A .dist-info is always a folder; an .egg-info may be the PKG-INFO file itself.
            meta_path = (dist_dir + os.sep + meta_file if meta_file == "METADATA" or os.path.isdir(dist_dir)
                         else dist_dir)
            if is_interesting(name_guess):
                text = read_text(meta_path) or ""
                headers = metadata_headers(text)
                name = (headers.get("name") or [name_guess])[0]
                normalized = normalize(name)
                dist = {
                    "name": name,
                    "normalized": normalized,
                    "version": (headers.get("version") or [""])[0],
                    "location": location,
                    "dist_info": dist_dir,
                    "requires": headers.get("requires-dist", []),
                    "installer": (read_text(os.path.join(dist_dir, "INSTALLER")) or "").strip(),
                    "files": [],
                    "record": None,  # whether a RECORD was found; None: not checked (torch, tensorrt, .egg-info)
                    "checked": 0,  # RECORD rows compared with the file on disk
                    "damaged": [],  # [path, recorded size, size on disk or None, overwritten by or None]
                }  # type: Dict[str, object]
                ort = normalized.startswith(ORT_PREFIXES)
                verified = meta_file == "METADATA" and normalized.startswith(VERIFIED_PREFIXES)
                rows = read_record(dist_dir) if ort or verified else None
                if ort:
                    dist["files"] = [row if MODULE_MARK in row[0] else row[0] for row in rows or ()]
                if verified:
                    dist["record"] = rows is not None
                    # Sizes are compared only where ortfix judges them: NVIDIA wheels and the ORT builds that
                    # install the `onnxruntime` package (not onnxruntime-genai, -extensions...: every check pays).
                    if rows and (normalized.startswith("nvidia-")
                                 or any(row[0].startswith("onnxruntime/") for row in rows)):
                        dist["checked"], dist["damaged"] = verify_record(location, rows)
                        checked.append((dist, rows))
                interesting.append(dist)
                continue
            # Everyone else matters only if it depends on what a plan may change (onnxruntime, NVIDIA wheels,
            # TensorRT): read just the headers, and only parse them when the bytes mention one at all (keeps 1,000
            # unrelated distributions cheap). Requirements come from the header block alone (metadata_headers): an
            # ASCII block that names none has no requirement naming one, so the rest (the long description, most
            # of the file) is looked at only where the block has other bytes, which FOLD may make one of them.
            head = read_head(meta_path, 65536)
            if not head:
                continue
            blank = head.find(b"\n\n")
            block = head if blank < 0 else head[:blank]
            if not names_interesting(block.lower()) and (is_ascii(block) or not names_interesting(head.lower())):
                continue
            headers = metadata_headers(head.decode("utf-8", "replace"))
            reqs = [r for r in headers.get("requires-dist", []) if requires_interesting(r)]
            if reqs:
                dependents.append({
                    "name": (headers.get("name") or [name_guess])[0],
                    "version": (headers.get("version") or [""])[0],
                    "location": location,
                    "requires": reqs,
                })
    mark_overwritten(checked)
    return {"interesting": interesting, "dependents": dependents, "total": total}


def names_interesting(folded):
    # type: (bytes) -> bool
    return (b"onnxruntime" in folded or b"nvidia" in folded or b"tensorrt" in folded or b"ort-nightly" in folded
            or b"ort_nightly" in folded)


def is_ascii(data):
    # type: (bytes) -> bool
    try:  # bytes.isascii() is Python 3.7's
        data.decode("ascii")
    except UnicodeDecodeError:
        return False
    return True


def parse_assignments(text):
    # type: (str) -> Dict[str, str]
    # What re.finditer(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=\n]*)?=\s*(['\"])(.*?)\2\s*$", text, re.M) finds:
    # `NAME = 'value'` lines, also annotated (`NAME: type = 'value'`, the annotation on one line), where the whitespace
    # around "=" may span lines but the quoted value may not, and the closing quote is the last one on its line with
    # only whitespace after it.
    out = {}  # type: Dict[str, str]
    size = len(text)
    start = 0
    while start < size:
        end = text.find("\n", start)  # where the next line starts, less one; the match's end when there is one
        i = start
        if text[i] in IDENTIFIER_START:
            while i < size and text[i] in IDENTIFIER_CHARS:
                i += 1
            name = text[start:i]
            while i < size and text[i].isspace():
                i += 1
            if i < size and text[i] == ":":  # an annotation (torch 2.x: `cuda: Optional[str] = '12.4'`), one line
                while i < size and text[i] not in "=\n":
                    i += 1
            if i < size and text[i] == "=":
                i += 1
                while i < size and text[i].isspace():
                    i += 1
                if i < size and text[i] in "'\"":
                    line_end = text.find("\n", i)
                    if line_end < 0:
                        line_end = size
                    close = text.rfind(text[i], i + 1, line_end)
                    if close > i and not text[close + 1:line_end].strip():
                        out[name] = text[i + 1:close]
                        # `\s*$` is greedy: the match ends at the last line end within the whitespace after it.
                        after = line_end
                        while after < size and text[after].isspace():
                            after += 1
                        end = size if after == size else text.rfind("\n", line_end, after)
        if end < 0:
            break
        start = end + 1
    return out


def preload_blocks(text):
    # type: (str) -> List[List[str]]
    # The libraries `_ld_preload.py` loads at `import onnxruntime` (releases before 1.16, whose providers NEED no CUDA
    # library): one `try:` block of `CDLL("libcublas.so.11", mode=RTLD_GLOBAL)` lines per provider.
    blocks = []  # type: List[List[str]]
    for chunk in text.split("try:")[1:]:
        names = []  # type: List[str]
        for call in chunk.split("CDLL(")[1:]:
            call = call.lstrip()
            if call[:1] in ("'", '"'):
                end = call.find(call[0], 1)
                if end > 1:
                    names.append(call[1:end])
        if names:
            blocks.append(names)
    return blocks


def scan_onnxruntime_dirs(dirs):
    # type: (List[str]) -> List[Dict[str, Any]]
    found = []
    for location in dirs:
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
            "preload": preload_blocks(read_text(os.path.join(capi, "_ld_preload.py")) or ""),
            "files": [n for n in names if n.endswith((".so", ".dll", ".pyd", ".dylib")) or ".so." in n],
        })
    return found


def scan_torch(dirs):
    # type: (List[str]) -> Optional[Dict[str, object]]
    for location in dirs:
        pkg = os.path.join(location, "torch")
        version_file = os.path.join(pkg, "version.py")
        if not os.path.isfile(version_file):
            continue
        values = parse_assignments(read_text(version_file) or "")
        lib = os.path.join(pkg, "lib")
        try:
            libs = sorted(n for n in os.listdir(lib) if is_torch_cuda_lib(n))
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


def environment_kind(prefixes):
    # type: (List[str]) -> Dict[str, object]
    # After site_path(): sysconfig reads sys.prefix when it is imported, and site_path() makes it the venv's.
    import sysconfig

    prefix = sys.prefix
    base = getattr(sys, "base_prefix", getattr(sys, "real_prefix", prefix))
    is_venv = prefix != base or hasattr(sys, "real_prefix")
    is_conda = os.path.isdir(os.path.join(prefix, "conda-meta"))
    kind = "conda" if is_conda else "venv" if is_venv else "system"
    paths = sysconfig.get_paths()
    purelib = paths["purelib"]
    platlib = paths["platlib"]
    site_dirs = site_packages(prefixes) if hasattr(site, "getsitepackages") else [purelib]
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    return {
        "kind": kind,
        "prefix": prefix,
        "base_prefix": base,
        "conda": is_conda,
        "site_packages": site_dirs,
        "purelib": purelib,
        "platlib": platlib,
        "user_site": user_site,
        "user_site_enabled": bool(site.ENABLE_USER_SITE),
        "prefix_writable": os.access(platlib if os.path.isdir(platlib) else prefix, os.W_OK),
    }


def importable(name):
    # type: (str) -> bool
    # importlib.util.find_spec(name) is not None, without importing importlib (1.4 ms). setuptools' _distutils_hack
    # finder is skipped: it finds nothing but distutils, and asked about pip it imports traceback (2.6 ms) to look at
    # the stack.
    if name in sys.modules:
        return sys.modules[name] is not None
    for finder in sys.meta_path:
        if type(finder).__module__ == "_distutils_hack":
            continue
        if hasattr(finder, "find_spec"):
            found = finder.find_spec(name, None)
        elif sys.version_info < (3, 12) and hasattr(finder, "find_module"):  # a legacy finder: 3.12 ignores them
            found = finder.find_module(name, None)
        else:
            continue
        if found is not None:
            return True
    return False


def uname():
    # type: () -> List[str]
    if not hasattr(os, "uname"):  # Windows
        import platform

        result = platform.uname()
        return [result.system, result.release, result.machine]
    # What platform.uname() reports, without importing platform (1.7 ms): it blanks "unknown".
    info = os.uname()
    return ["" if v == "unknown" else v for v in (info.sysname, info.release, info.machine)]


def registry_path(root_name, key):
    # type: (str, str) -> Any
    # [raw value, registry type name, value with %VARS% expanded] of the `Path` value under a registry key; None
    # when the key or the value is absent or unreadable. Only on Windows (winreg).
    if sys.platform != "win32":
        return None
    import winreg

    root = getattr(winreg, root_name)
    try:
        with winreg.OpenKey(root, key) as handle:
            value, kind = winreg.QueryValueEx(handle, "Path")
    except OSError:
        return None
    if not isinstance(value, str):
        return None
    names = {winreg.REG_SZ: "REG_SZ", winreg.REG_EXPAND_SZ: "REG_EXPAND_SZ"}
    try:
        expanded = winreg.ExpandEnvironmentStrings(value)
    except OSError:
        expanded = value
    return [value, names.get(kind, str(kind)), expanded]


def windows_dirs():
    # type: () -> List[str]
    # System32 and the Windows folder, as the loader searches them (GetSystemDirectoryW, GetWindowsDirectoryW).
    out = []  # type: List[str]
    if sys.platform != "win32":
        return out
    try:
        import ctypes

        for getter in (ctypes.windll.kernel32.GetSystemDirectoryW, ctypes.windll.kernel32.GetWindowsDirectoryW):
            buf = ctypes.create_unicode_buffer(1024)
            size = getter(buf, 1024)
            out.append(buf.value if 0 < size < 1024 else "")
    except (ImportError, AttributeError, OSError):
        out = []
    if len(out) != 2 or not all(out):
        root = os.environ.get("SYSTEMROOT") or os.environ.get("WINDIR") or "C:\\Windows"
        out = [os.path.join(root, "System32"), root]
    return out


def process_image():
    # type: () -> str
    # The .exe this process runs. A venv's python.exe on Windows is a launcher that starts the base interpreter
    # (sys._base_executable) as a child: this code runs in that child, whose folder is the application folder of a
    # bare-name LoadLibrary, not venv\Scripts.
    if sys.platform == "win32":
        try:
            import ctypes

            buf = ctypes.create_unicode_buffer(32768)
            size = ctypes.windll.kernel32.GetModuleFileNameW(None, buf, 32768)
            if 0 < size < 32768:
                return buf.value
        except (ImportError, AttributeError, OSError):
            pass
    return getattr(sys, "_base_executable", "") or sys.executable


def windows_facts():
    # type: () -> Dict[str, object]
    # What the host needs to simulate Windows' DLL search for a process of this interpreter.
    system_dir, windows_dir = windows_dirs()
    machine = "SYSTEM\\CurrentControlSet\\Control\\Session Manager\\Environment"
    image = process_image()
    executables = [sys.executable, getattr(sys, "_base_executable", "") or "", image]
    return {
        "system_dir": system_dir,
        "windows_dir": windows_dir,
        "exe_dir": os.path.dirname(image),
        "process_exe": image,
        "machine_path": registry_path("HKEY_LOCAL_MACHINE", machine),
        "user_path": registry_path("HKEY_CURRENT_USER", "Environment"),
        "conda_dll_search_modification": os.environ.get("CONDA_DLL_SEARCH_MODIFICATION_ENABLE"),
        "packaged": any("\\windowsapps\\" in e.lower() for e in executables),
    }


def encode(value):
    # type: (object) -> str
    # json.dumps(value) byte for byte (ensure_ascii, so pure ASCII), for the types the probe reports: importing json
    # would cost 8 ms.
    if isinstance(value, str):
        if c_encode_string is not None:
            return c_encode_string(value)
        # Most strings are printable ASCII (isprintable() is exactly " " to "~" there) with nothing to escape.
        if value.isprintable() and '"' not in value and "\\" not in value:
            try:
                value.encode("ascii")
                return '"' + value + '"'
            except UnicodeEncodeError:
                pass
        return '"' + "".join([encode_char(c) for c in value]) + '"'
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):  # a JSON object's keys are strings
            raise TypeError("cannot encode a key that is not a string")  # i18n: english
        return "{" + ", ".join([encode(key) + ": " + encode(item) for key, item in value.items()]) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join([encode(item) for item in value]) + "]"
    raise TypeError("cannot encode %r" % type(value))


def dumps(doc):
    # type: (object) -> str
    # json.dumps(doc) byte for byte, as json.dumps itself makes it (its C encoder, with its default separators and
    # ensure_ascii); encode() where the interpreter has no such encoder or it takes other arguments. Unlike encode(),
    # it would also write a float: the report has none.
    if c_make_encoder is not None and c_encode_string is not None:
        try:
            make = c_make_encoder(None, refuse, c_encode_string, None, ": ", ", ", False, False, True)
        except TypeError:  # another Python's signature
            make = None
        if make is not None:
            return "".join(make(doc, 0))
    return encode(doc)


def refuse(value):
    # type: (object) -> object
    raise TypeError("cannot encode %r" % type(value))


def encode_char(c):
    # type: (str) -> str
    if " " <= c < "\x7f" or c in JSON_SHORT_ESCAPES:
        return JSON_SHORT_ESCAPES.get(c, c)
    code = ord(c)
    if code > 0xFFFF:  # a UTF-16 surrogate pair; a lone surrogate (os.listdir's surrogateescape) stays as it is
        code -= 0x10000
        return "\\u%04x\\u%04x" % (0xD800 | code >> 10, 0xDC00 | code & 0x3FF)
    return "\\u%04x" % code


def main():
    # type: () -> None
    prefixes = site_path()
    dirs = search_dirs()  # once: each entry of sys.path resolved (realpath) once, not once per scan
    dists = scan_distributions(dirs)
    system, release, machine = uname()
    doc = {
        "probe_schema": PROBE_SCHEMA,
        "python": {
            "executable": sys.executable,
            "real_executable": os.path.realpath(sys.executable),
            "version": "%d.%d.%d" % sys.version_info[:3],
            "implementation": sys.implementation.name,
            "cache_tag": sys.implementation.cache_tag,
            "pointer_bits": 64 if sys.maxsize > 2 ** 32 else 32,
            "has_pip": importable("pip"),
        },
        "os": {
            "system": system,
            "release": release,
            "machine": machine,
            "glibc": glibc_version(),
            "wsl": "microsoft" in release.lower(),
        },
        "env": environment_kind(prefixes),
        "environ": {k: os.environ[k] for k in ENV_VARS if k in os.environ},
        "cwd": os.getcwd(),
        "sys_path": list(dirs),
        "distributions": dists["interesting"],
        "dependents": dists["dependents"],
        "distribution_count": dists["total"],
        "markers": marker_environment(system, release, machine),
        "onnxruntime_dirs": scan_onnxruntime_dirs(dirs),
        "torch": scan_torch(dirs),
    }
    if os.name == "nt":  # only there: a Linux report stays as it was
        doc["windows"] = windows_facts()
    # ASCII bytes (dumps() escapes everything else), whatever encoding and error handler stdout has.
    out = getattr(sys.stdout, "buffer", None)
    if out is None:
        sys.stdout.write(dumps(doc))
    else:
        out.write(dumps(doc).encode("ascii"))
        out.flush()


def end():
    # type: () -> None
    # The report is out: the interpreter's teardown (freeing every module one by one, a tenth of the probe's
    # instructions) is skipped, and ortfix, which waits for the probe to exit, has its answer that much sooner.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":  # as under `python -c`; tests load the functions without running it
    main()
    end()
