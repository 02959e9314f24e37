"""Entry point of the `ortfix` command (and `python -m ortfix`)."""

import os
import sys


def entry() -> None:
    argv = sys.argv[1:]
    try:
        from ortfix import prefetch

        prefetch.start(argv)
        if not os.environ.get("ORTFIX_NO_FASTPATH"):
            from ortfix import fastpath

            opts = fastpath.parse_check(argv)
            if opts is not None:
                sys.exit(fastpath.run(opts))
        from ortfix.cli import main

        main()
    except KeyboardInterrupt:
        sys.stderr.write("ortfix: interrupted\n")
        sys.exit(130)
    except Exception as exc:  # outside any command (the commands render their own): still one line
        from ortfix.errors import OrtfixError
        from ortfix.fastpath import broken_pipe, report_unexpected

        if isinstance(exc, BrokenPipeError):
            sys.exit(broken_pipe())
        if isinstance(exc, OrtfixError):
            sys.stderr.write(exc.rendered() + "\n")
            sys.exit(int(exc.exit_code))
        sys.exit(report_unexpected(exc, debug=argv[:1] == ["--debug"]))


if __name__ == "__main__":
    entry()
