#!/usr/bin/env python3
"""Write a convolution model with dynamic batch, height and width (seed 004's kind of model) for `ortfix tune` on a
real GPU: five 3x3 convolutions with ReLU, 3 -> 32 -> 64 -> 64 -> 64 -> 16 channels, random weights.

Needs the `onnx` package and numpy (both are on the lent GPU machines). Usage: python conv_model.py OUT.onnx
"""

from __future__ import annotations

import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CHANNELS = (3, 32, 64, 64, 64, 16)


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(4)
    nodes, inits = [], []
    current = "x"
    for i, (cin, cout) in enumerate(zip(CHANNELS, CHANNELS[1:])):
        w = numpy_helper.from_array((rng.standard_normal((cout, cin, 3, 3)) * 0.1).astype(np.float32), f"w{i}")
        b = numpy_helper.from_array(np.zeros(cout, dtype=np.float32), f"b{i}")
        inits += [w, b]
        conv_out = f"c{i}"
        nodes.append(helper.make_node("Conv", [current, f"w{i}", f"b{i}"], [conv_out], pads=[1, 1, 1, 1]))
        current = f"r{i}" if i < len(CHANNELS) - 2 else "y"
        nodes.append(helper.make_node("Relu", [conv_out], [current]))
    graph = helper.make_graph(
        nodes, "tune_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", CHANNELS[-1], "H", "W"])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    onnx.save(build(), sys.argv[1])
