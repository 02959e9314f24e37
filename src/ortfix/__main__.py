"""Entry point of the `ortfix` command (and `python -m ortfix`)."""

import os
import sys


def entry() -> None:
    argv = sys.argv[1:]
    try:
        from ortfix.speed import prefetch

        prefetch.start(argv)
        if not os.environ.get("ORTFIX_NO_FASTPATH"):
            from ortfix.cli import fastcheck

            opts = fastcheck.parse_check(argv)
            if opts is not None:
                sys.exit(fastcheck.run(opts))
        from ortfix.cli.app import main

        main()
    except (KeyboardInterrupt, Exception) as exc:  # the fast path's, and anything outside a click command
        from ortfix.errors import exit_for

        sys.exit(exit_for(exc, debug=argv[:1] == ["--debug"]))


if __name__ == "__main__":
    entry()
