"""Entry point of the `ortfix` command (and `python -m ortfix`)."""

import os
import sys


def entry() -> None:
    """Every command ends here: its exit code, or what stopped it rendered once (cli/output.ended)."""
    from ortfix.cli import streams

    streams.prepare(sys.stdout)  # nothing ortfix prints ends it with a UnicodeEncodeError (cli/streams.py)
    streams.prepare(sys.stderr)
    from ortfix.cli.invocation import Invocation

    invocation = Invocation(sys.argv[1:])
    if invocation.lang:  # the click-free `check` speaks it too
        from ortfix.i18n import set_language

        set_language(invocation.lang)
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
