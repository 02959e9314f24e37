"""`ortfix explain`: recognise known ONNX Runtime / CUDA / cuDNN failure messages in a log and say what they mean.
The patterns, matching and describing live in explain.patterns; what a message, the matrix and this machine's facts
add to a pattern (the analyses) in explain.analyses."""
