"""Write the tiny ONNX models ortfix ships as package data, by hand-encoding protobuf (no `onnx` package needed at
build or run time). The bytes are deterministic: `python scripts/make_models.py --check` fails if the committed files
differ from what this script produces.

verify_conv.onnx: input "x" float [N, 3, H, W] (N, H, W dynamic), Conv 3->8 (3x3, pads 1) + Relu, Conv 8->3 (1x1),
Add x (a residual), output "y" float [N, 3, H, W]. Opset 13, IR version 7: every onnxruntime >= 1.8 loads it. The
weights are small dyadic fractions (exact in float32), so CPU and CUDA results can be compared tightly.

Field numbers are those of onnx/onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto,
ValueInfoProto, TypeProto, TensorShapeProto, OperatorSetIdProto).
"""

from __future__ import annotations

import argparse
import struct
import sys
from collections.abc import Sequence
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parents[1] / "src" / "ortfix" / "verify" / "models"

# protobuf wire types
_VARINT = 0
_LEN = 2

# onnx enums
FLOAT = 1  # TensorProto.DataType.FLOAT
ATTR_INTS = 7  # AttributeProto.AttributeType.INTS
IR_VERSION = 7
OPSET = 13


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 two's complement, as protobuf encodes negative int64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, _VARINT) + _varint(value)


def _bytes(field: int, data: bytes) -> bytes:
    return _key(field, _LEN) + _varint(len(data)) + data


def _str(field: int, text: str) -> bytes:
    return _bytes(field, text.encode("utf-8"))


def attribute_ints(name: str, values: Sequence[int]) -> bytes:
    # AttributeProto: name = 1, ints = 8 (repeated int64, not packed in proto2), type = 20
    return _str(1, name) + b"".join(_int(8, v) for v in values) + _int(20, ATTR_INTS)


def node(op_type: str, inputs: Sequence[str], outputs: Sequence[str], name: str,
         attributes: Sequence[bytes] = ()) -> bytes:
    # NodeProto: input = 1, output = 2, name = 3, op_type = 4, attribute = 5
    return (b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs) + _str(3, name)
            + _str(4, op_type) + b"".join(_bytes(5, a) for a in attributes))


def tensor(name: str, dims: Sequence[int], values: Sequence[float]) -> bytes:
    # TensorProto: dims = 1 (repeated int64), data_type = 2, name = 8, raw_data = 9 (little-endian float32)
    count = 1
    for d in dims:
        count *= d
    assert len(values) == count, (name, len(values), count)
    raw = struct.pack(f"<{count}f", *values)
    return b"".join(_int(1, d) for d in dims) + _int(2, FLOAT) + _str(8, name) + _bytes(9, raw)


def value_info(name: str, dims: Sequence[int | str]) -> bytes:
    # ValueInfoProto: name = 1, type = 2; TypeProto: tensor_type = 1; TypeProto.Tensor: elem_type = 1, shape = 2;
    # TensorShapeProto: dim = 1; Dimension: dim_value = 1, dim_param = 2
    shape = b"".join(_bytes(1, _str(2, d) if isinstance(d, str) else _int(1, d)) for d in dims)
    tensor_type = _int(1, FLOAT) + _bytes(2, shape)
    return _str(1, name) + _bytes(2, _bytes(1, tensor_type))


def graph(name: str, nodes: Sequence[bytes], initializers: Sequence[bytes], inputs: Sequence[bytes],
          outputs: Sequence[bytes]) -> bytes:
    # GraphProto: node = 1, name = 2, initializer = 5, input = 11, output = 12
    return (b"".join(_bytes(1, n) for n in nodes) + _str(2, name) + b"".join(_bytes(5, t) for t in initializers)
            + b"".join(_bytes(11, i) for i in inputs) + b"".join(_bytes(12, o) for o in outputs))


def model(graph_bytes: bytes, *, doc: str) -> bytes:
    # ModelProto: ir_version = 1, producer_name = 2, producer_version = 3, doc_string = 6, graph = 7,
    # opset_import = 8 (OperatorSetIdProto: domain = 1 (empty: ai.onnx), version = 2)
    return (_int(1, IR_VERSION) + _str(2, "ortfix") + _str(3, "make_models/1") + _str(6, doc)
            + _bytes(7, graph_bytes) + _bytes(8, _int(2, OPSET)))


def _weights(count: int, salt: int) -> list[float]:
    """Deterministic small values in [-0.5, 0.5): k/32, exact in float32."""
    return [((i * 7919 + salt * 104729) % 31 - 15) / 32.0 for i in range(count)]


def verify_conv() -> bytes:
    w1 = tensor("w1", [8, 3, 3, 3], _weights(8 * 3 * 3 * 3, 1))
    b1 = tensor("b1", [8], _weights(8, 2))
    w2 = tensor("w2", [3, 8, 1, 1], _weights(3 * 8, 3))
    b2 = tensor("b2", [3], _weights(3, 4))
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["h"], "conv1",
             [attribute_ints("kernel_shape", [3, 3]), attribute_ints("pads", [1, 1, 1, 1]),
              attribute_ints("strides", [1, 1])]),
        node("Relu", ["h"], ["r"], "relu"),
        node("Conv", ["r", "w2", "b2"], ["c"], "conv2", [attribute_ints("kernel_shape", [1, 1])]),
        node("Add", ["c", "x"], ["y"], "residual"),
    ]
    g = graph("ortfix_verify_conv", nodes, [w1, b1, w2, b2], [value_info("x", ["N", 3, "H", "W"])],
              [value_info("y", ["N", 3, "H", "W"])])
    return model(g, doc="ortfix verify/tune model: Conv+Relu+Conv+Add on float [N,3,H,W]; made by "
                        "scripts/make_models.py")


MODELS = {"verify_conv.onnx": verify_conv}


def build_all() -> dict[str, bytes]:
    return {name: make() for name, make in MODELS.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed files; write nothing")
    parser.add_argument("--out", type=Path, default=MODELS_DIR, help="folder to write to (default: %(default)s)")
    args = parser.parse_args(argv)
    status = 0
    for name, data in build_all().items():
        path = args.out / name
        if args.check:
            same = path.exists() and path.read_bytes() == data
            print(f"{path}: {'up to date' if same else 'DIFFERS from scripts/make_models.py'}")
            status |= not same
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            print(f"{path}: {len(data)} bytes")
    return status


if __name__ == "__main__":
    sys.exit(main())
