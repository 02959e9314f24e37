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
    """Every command ends here: its exit code, or what stopped it rendered once (cli/output.ended)."""
    _streams_that_cannot_fail()
    from ortfix.cli.invocation import Invocation

    invocation = Invocation(sys.argv[1:])
    try:
        from ortfix.speed import prefetch

        prefetch.start(invocation.prefetch)
        if invocation.check is not None and not os.environ.get("ORTFIX_NO_FASTPATH"):
            from ortfix.cli import fastcheck

            sys.exit(fastcheck.run(invocation.check))
        from ortfix.cli.app import run

        sys.exit(run(invocation))
    except (KeyboardInterrupt, Exception) as exc:  # from the fast path, click's commands, or outside them
        from ortfix.cli.output import ended

        sys.exit(ended(exc, invocation))


if __name__ == "__main__":
    entry()
