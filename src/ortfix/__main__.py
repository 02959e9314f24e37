"""Entry point of the `ortfix` command (and `python -m ortfix`)."""

import os
import sys


def entry() -> None:
    from ortfix import prefetch

    argv = sys.argv[1:]
    prefetch.start(argv)
    if not os.environ.get("ORTFIX_NO_FASTPATH"):
        from ortfix import fastpath

        opts = fastpath.parse_check(argv)
        if opts is not None:
            sys.exit(fastpath.run(opts))
    from ortfix.cli import main

    main()


if __name__ == "__main__":
    entry()
