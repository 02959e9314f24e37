"""Entry point of the `ortfix` command (and `python -m ortfix`)."""

import os
import sys


def _streams_that_cannot_fail() -> None:
    """Under a strict C locale (`LC_ALL=C PYTHONUTF8=0`) standard output is ASCII with strict errors: a report's
    marks (\u2717, \u2713) would end the command with a UnicodeEncodeError. What the stream cannot encode is written
    as its escape instead."""
    for stream in (sys.stdout, sys.stderr):
        try:
            "\u2713\u2717\u2026".encode(getattr(stream, "encoding", None) or "ascii")
        except (UnicodeEncodeError, LookupError):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")


def entry() -> None:
    argv = sys.argv[1:]
    _streams_that_cannot_fail()
    try:
        from ortfix.speed import prefetch

        prefetch.start(argv)
        if not os.environ.get("ORTFIX_NO_FASTPATH"):
            from ortfix.cli import fastcheck

            opts = fastcheck.parse_check(argv)
            if opts is not None:
                sys.exit(fastcheck.run(opts))
        from ortfix.cli.app import run

        sys.exit(run(argv))
    except (KeyboardInterrupt, Exception) as exc:  # the fast path's, and anything outside a click command
        from ortfix.cli.output import ended

        sys.exit(ended(exc, argv))


if __name__ == "__main__":
    entry()
