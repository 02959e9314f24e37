"""Entry point of the `ortfix` command (and `python -m ortfix`)."""

import os
import sys


def entry() -> None:
    argv = sys.argv[1:]
    from ortfix.cli import streams

    streams.prepare(sys.stdout)  # nothing ortfix prints ends it with a UnicodeEncodeError (cli/streams.py)
    streams.prepare(sys.stderr)
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
