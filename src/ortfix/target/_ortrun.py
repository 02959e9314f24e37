"""Runs INSIDE the target interpreter, with onnxruntime: the session checks of `ortfix verify` (levels 2 and 3) and
the timings of `ortfix tune`.

Started as `python -c SOURCE ARGS_JSON`. Syntax that Python 3.6 accepts (types in comments); the standard library,
onnxruntime and numpy (which onnxruntime itself depends on) only. It reports as it goes: one line per stage,
`ORTFIX-RUN:` followed by JSON, flushed at once, so that when onnxruntime kills the process (a CUDA provider without a
driver dies of SIGSEGV) the parent still knows every stage that finished and which one was running.
"""
import sys

# `python -c` puts the current directory first on sys.path: a user's json.py there must not hijack this script.
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]

import json
import os
import time

if False:  # typing is only for the type checker
    from typing import Any, Optional  # noqa: F401

MARK = "ORTFIX-RUN:"
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
# onnxruntime type strings -> numpy dtype names
DTYPES = {
    "tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
    "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int16)": "int16", "tensor(int8)": "int8",
    "tensor(uint64)": "uint64", "tensor(uint32)": "uint32", "tensor(uint16)": "uint16", "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


class ShapeError(ValueError):
    """The shapes asked for do not fit the model (or cannot be made): reported as the message alone."""


def emit(stage, **fields):
    # type: (str, **object) -> None
    fields["stage"] = stage
    sys.stdout.write(MARK + json.dumps(fields) + "\n")
    sys.stdout.flush()


def describe(exc):
    # type: (BaseException) -> str
    text = str(exc).strip() or type(exc).__name__
    return text if isinstance(exc, ShapeError) else type(exc).__name__ + ": " + text


def io_info(args):
    # type: (list[Any]) -> list[dict[str, Any]]
    return [{"name": a.name, "shape": [d if isinstance(d, int) else (str(d) if d is not None else None)
                                       for d in (a.shape or [])], "type": a.type} for a in args]


def resolve_shapes(inputs, spec, default_dim):
    # type: (list[dict[str, Any]], Any, int) -> dict[str, list[int]]
    """One set of concrete shapes: `spec` is {name: dims}, or {"": dims} for a model with one input."""
    spec = dict(spec or {})
    if "" in spec:
        if len(inputs) != 1:
            names = ", ".join(i["name"] for i in inputs)
            raise ShapeError(f"the model has {len(inputs)} inputs ({names}): name each one, NAME=DIMS")
        spec[inputs[0]["name"]] = spec.pop("")
    unknown = sorted(set(spec) - set(i["name"] for i in inputs))
    if unknown:
        names = ", ".join(i["name"] for i in inputs)
        raise ShapeError(f"no input named {', '.join(unknown)} (the model's inputs: {names})")  # i18n: english
    shapes = {}
    for i in inputs:
        declared = i["shape"]
        given = spec.get(i["name"])
        if given is None:
            shapes[i["name"]] = [d if isinstance(d, int) and d > 0 else default_dim for d in declared]
            continue
        if len(given) != len(declared):
            dims = "x".join(str(d) for d in given)
            raise ShapeError(f"input {i['name']} has {len(declared)} dimensions {declared}; {dims} has {len(given)}")
        for pos, (d, g) in enumerate(zip(declared, given)):
            if isinstance(d, int) and d > 0 and d != g:
                raise ShapeError(f"input {i['name']}: dimension {pos} is fixed at {d}, not {g}")  # i18n: english
        shapes[i["name"]] = list(given)
    return shapes


def make_feed(np, inputs, shapes, seed):
    # type: (Any, list[dict[str, Any]], dict[str, list[int]], int) -> dict[str, Any]
    rng = np.random.RandomState(seed)
    feed = {}
    for i in inputs:
        dtype = DTYPES.get(i["type"])
        if dtype is None:
            raise ShapeError(f"input {i['name']} has type {i['type']}: ortfix can only make tensors of numbers")
        shape = tuple(shapes[i["name"]])
        if dtype.startswith("float"):
            feed[i["name"]] = rng.random_sample(shape).astype(dtype)
        elif dtype == "bool":
            feed[i["name"]] = np.zeros(shape, dtype=dtype)
        else:
            feed[i["name"]] = rng.randint(0, 4, size=shape).astype(dtype)
    return feed


def session(ort, model, providers):
    # type: (Any, str, list[Any]) -> Any
    return ort.InferenceSession(model, providers=providers)


def cuda_providers(options):
    # type: (dict[str, str]) -> list[object]
    return [(CUDA, dict(options)), CPU]


def do_verify(ort, args):
    # type: (Any, dict[str, Any]) -> None
    model = args["model"]
    try:
        cpu = session(ort, model, [CPU])
    except Exception as exc:
        emit("model", error=describe(exc))
        return
    inputs = io_info(cpu.get_inputs())
    emit("model", inputs=inputs, outputs=io_info(cpu.get_outputs()))
    if CUDA not in ort.get_available_providers():
        return
    try:
        gpu = session(ort, model, cuda_providers({}))
    except Exception as exc:
        emit("provider", providers=None, error=describe(exc))
        return
    got = gpu.get_providers()
    emit("provider", providers=got, error=None)
    if CUDA not in got:
        return
    import numpy as np  # type: ignore[import-not-found, unused-ignore]

    try:
        shapes = resolve_shapes(inputs, args.get("shapes"), args.get("default_dim", 1))
        feed = make_feed(np, inputs, shapes, 0)
        want = cpu.run(None, feed)
        have = gpu.run(None, feed)
    except Exception as exc:
        emit("numbers", error=describe(exc))
        return
    outputs = []
    for meta, a, b in zip(cpu.get_outputs(), want, have):
        a = np.asarray(a)
        b = np.asarray(b)
        row = {"name": meta.name, "shape": list(a.shape), "cuda_shape": list(b.shape)}
        if a.shape == b.shape and a.dtype.kind in "fc" and a.size:
            a64 = a.astype("float64")
            b64 = b.astype("float64")
            row["max_abs_diff"] = float(np.max(np.abs(a64 - b64)))
            row["max_abs_ref"] = float(np.max(np.abs(a64)))
            row["finite"] = bool(np.all(np.isfinite(b64)) == np.all(np.isfinite(a64)))
        elif a.shape == b.shape:
            row["equal"] = bool(np.array_equal(a, b))
        outputs.append(row)
    emit("numbers", shapes=shapes, outputs=outputs)


def timed(sess, feed):
    # type: (Any, dict[str, Any]) -> float
    start = time.perf_counter()
    sess.run(None, feed)
    return (time.perf_counter() - start) * 1000.0


def median(values):
    # type: (list[float]) -> Optional[float]
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def warm_up(ort, model, feed):
    # type: (Any, str, dict[str, Any]) -> None
    """The process's CUDA start (context, cuBLAS/cuDNN loading and handles) happens once, in whichever session comes
    first: paid here, apart, so that no configuration is charged for it (on an H100 it was 0.4 s of 'load' and 0.2 s
    of 'first run' on the first row)."""
    emit("progress", text="starting CUDA (timed apart: no configuration is charged for it)")  # i18n: english
    start = time.perf_counter()
    try:
        sess = session(ort, model, cuda_providers({}))
        timed(sess, feed)
        del sess
    except Exception as exc:
        emit("warmup", error=describe(exc))  # the configurations meet the same error and report it
        return
    emit("warmup", ms=(time.perf_counter() - start) * 1000.0)


def do_tune(ort, args):
    # type: (Any, dict[str, Any]) -> None
    import numpy as np  # type: ignore[import-not-found, unused-ignore]

    model = args["model"]
    runs = max(1, int(args.get("runs", 5)))
    try:
        probe = session(ort, model, [CPU])
        inputs = io_info(probe.get_inputs())
        sets = []  # type: list[dict[str, list[int]]]
        for spec in args["shape_sets"]:
            shapes = resolve_shapes(inputs, spec["spec"], spec["default_dim"])
            if shapes not in sets:  # a model with fixed shapes: one set is all there is
                sets.append(shapes)
        feeds = [make_feed(np, inputs, s, n) for n, s in enumerate(sets)]
    except Exception as exc:
        emit("inputs", error=describe(exc))
        return
    del probe
    emit("inputs", inputs=inputs, shape_sets=sets, available=ort.get_available_providers())
    configs = args["configs"]
    if any(c["provider"] == "cuda" for c in configs):
        warm_up(ort, model, feeds[0])
    for n, config in enumerate(configs):
        label = config["name"]
        emit("progress", text=f"[{n + 1}/{len(configs)}] {label}: creating the session")
        providers = [CPU] if config["provider"] == "cpu" else cuda_providers(config["options"])
        result = {"name": label, "fixed": None, "changing": None}  # type: dict[str, object]
        try:
            start = time.perf_counter()
            sess = session(ort, model, providers)
            result["load_ms"] = (time.perf_counter() - start) * 1000.0
            result["providers"] = sess.get_providers()
            if config["provider"] == "cuda" and sess.get_providers()[0] != CUDA:
                result["error"] = f"the session did not get {CUDA} (it got {sess.get_providers()})"  # i18n: english
                emit("result", **result)
                return
            first = timed(sess, feeds[0])
            steady = [timed(sess, feeds[0]) for _ in range(runs)]
            result["fixed"] = {"first_ms": first, "steady_ms": median(steady), "min_ms": min(steady),
                               "runs": len(steady)}
            if len(feeds) > 1:
                emit("progress", text=f"[{n + 1}/{len(configs)}] {label}: changing shapes")
                del sess
                sess = session(ort, model, providers)
                firsts = [timed(sess, f) for f in feeds]
                steady = [timed(sess, f) for _ in range(runs) for f in feeds]
                result["changing"] = {"first_ms": sum(firsts) / len(firsts), "first_max_ms": max(firsts),
                                      "steady_ms": median(steady), "min_ms": min(steady), "runs": len(steady),
                                      "total_ms": sum(firsts) + sum(steady), "shapes": len(feeds)}
            del sess
        except Exception as exc:
            result["error"] = describe(exc)
        emit("result", **result)


def main():
    # type: () -> None
    args = json.loads(sys.argv[1])
    try:
        import onnxruntime as ort  # type: ignore[import-not-found, unused-ignore]
    except BaseException as exc:
        emit("import", error=describe(exc))
        return
    emit("import", version=getattr(ort, "__version__", None), file=getattr(ort, "__file__", None),
         available=ort.get_available_providers(), pid=os.getpid())
    if args["mode"] == "verify":
        do_verify(ort, args)
    else:
        do_tune(ort, args)
    emit("done")


main()
