"""Entry point of the `ortfix` command (and `python -m ortfix`)."""

import sys


def entry() -> None:
    from ortfix import prefetch

    prefetch.start(sys.argv[1:])
    from ortfix.cli import main

    main()


if __name__ == "__main__":
    entry()
