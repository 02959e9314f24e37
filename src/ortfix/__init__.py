"""ortfix: make ONNX Runtime actually run on the GPU."""

__version__ = "0.1.0"
