"""Where an environment folder given as `--python` keeps its interpreter, in the order they are tried: shared by
target/choose.py and speed/early.py (which must import nothing else), so that the early probe starts exactly the
interpreter the normal path picks."""

INTERPRETER_PLACES: tuple[tuple[str, ...], ...] = (
    ("bin", "python"), ("bin", "python3"), ("Scripts", "python.exe"), ("python.exe",))
