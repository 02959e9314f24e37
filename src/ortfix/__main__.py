"""Entry point of the `ortfix` command (and `python -m ortfix`)."""

import os
import sys


def entry() -> None:
    """Every command ends here: its exit code, or what stopped it rendered once (cli/output.ended)."""
    from ortfix.cli.invocation import Invocation

    invocation = Invocation(sys.argv[1:])
    from ortfix.speed import early

    early.spawn(invocation.prefetch)  # the probe, before anything else is imported (speed/prefetch.py takes it over)
    from ortfix.cli import streams

    streams.prepare(sys.stdout)  # nothing ortfix prints ends it with a UnicodeEncodeError (cli/streams.py)
    streams.prepare(sys.stderr)
    if invocation.lang:  # the click-free `check` speaks it too
        from ortfix.i18n import set_language

        set_language(invocation.lang)
    fast = None if os.environ.get("ORTFIX_NO_FASTPATH") else invocation.check  # cli/fastcheck.py's options
    if fast is not None:
        import gc

        gc.disable()  # a check is short and makes few cycles: collecting cost a fresh check 10% of its time
    try:
        from ortfix.speed import prefetch

        prefetch.start(invocation.prefetch)
        if fast is not None:
            from ortfix.cli import fastcheck

            fastcheck.end(fastcheck.run(fast))
        from ortfix.cli.app import run

        sys.exit(run(invocation))
    except (KeyboardInterrupt, Exception) as exc:  # from the fast path, click's commands, or outside them
        from ortfix.cli.output import ended

        sys.exit(ended(exc, invocation))


if __name__ == "__main__":
    entry()
