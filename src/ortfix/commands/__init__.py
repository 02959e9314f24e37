"""One function per command: each returns a frozen result that carries its exit code; the click layer only renders."""
