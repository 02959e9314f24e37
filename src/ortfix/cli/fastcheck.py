"""`ortfix check` without importing click.

`check` is the command people run most and the one whose speed is measured (scripts/bench_check.py). This path
still pays (measured again for issue 22, after the options moved to commands/inputs.py): a replayed
`ortfix check --python V` took 0.74x the wall time (median ratio of 25 pairs; medians 182 against 248 ms) and 0.73x
the CPU time (99 against 139 ms) of the same command forced through click (ORTFIX_NO_FASTPATH=1), timed as whole
processes in turn, A B A B, after 2 warm-up runs each; V: the onnxruntime-gpu 1.22.0 venv with its NVIDIA wheels
(`gpu_venv` of tests/ortvenvs.py), on a shared 2-core machine. `check --fresh`, which spends its time on the probe
and the ELF reads, gains less: 0.95x (15 pairs). Earlier runs of scripts/bench_check.py (its "via click" line)
agree: 67/100/127 ms against 98/127/178 ms replayed. Since it also ends without the interpreter's
teardown and collects no garbage (`end`, __main__.py): 146, 109 and 98 ms against 241, 162 and 141 ms through
click (three runs of scripts/bench_check.py, load average 6-8).

The entry point hands the plain forms of `check` here
(cli/invocation.parse_check: `--python P`, `--json`, `--driver V`, `--compute-capability X.Y`, `--fresh`,
`--verbose`/`-v`, `--with PART`, each at most once); anything else (help, a typo, a repeated option, another command)
goes to the click CLI, which owns every message about the command line. The values are validated by the function
click's `check` calls too (commands/inputs.check_request), so both say the same about a bad one.
Both paths call `check_command`, so they print the same thing and exit the same way (tests/test_fastcheck.py compares
them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (2 ms) on the path of a replayed `check`
if TYPE_CHECKING:
    from typing import Any, NoReturn


def check_command(python: str | None, as_json: bool, driver_version: str | None, compute_capability: str | None,
                  echo: Callable[[str], None], fresh: bool = False, verbose: bool = False,
                  with_: Sequence[str] = (), lang: str | None = None) -> int:
    """Run `check` and print its report; the exit code. OrtfixError is the caller's to render.

    The options are validated by commands/inputs.check_request, as they are as click's. An identical earlier check
    is replayed while nothing it depended on has changed (commands/check.check_output); `fresh` skips that.
    `verbose`: every library row of the report, not only those that are a problem. `with_` (`--with tensorrt`):
    TensorRT is judged and shown even where none is installed. `lang`: the `--lang` given (the environment's
    variables are part of a saved check's key already), so that a replay is never in another language."""
    from ortfix.commands.check import check_output
    from ortfix.commands.inputs import check_request

    request = check_request(python, driver_version, compute_capability, with_)
    python = request.python
    key = (as_json, driver_version, compute_capability, verbose, request.with_tensorrt)
    output, code = check_output(python, (*key, lang), fresh=fresh, full=lambda: _check(python, *key))
    echo(output)
    return code


def _check(python: str | None, as_json: bool, driver_version: str | None, compute_capability: str | None,
           verbose: bool, with_tensorrt: bool = False) -> tuple[str, int, str]:
    """(what `check` prints, its exit code, the probe's report it was made from)."""
    from ortfix.cli.render import check_json, render_check
    from ortfix.commands.check import own_environment_note, run_check

    result = run_check(python, driver_version=driver_version, compute_capability=compute_capability,
                       with_tensorrt=with_tensorrt)
    code = int(result.exit_code)
    if as_json:
        from ortfix.cli.output import Command, dump_json, envelope  # the JSON envelope only: text needs no enum

        output = dump_json(envelope(Command.CHECK, code, check_json(result)))
    else:
        output = render_check(result.facts, result.findings, result.target, own_environment_note(result.target),
                              verbose=verbose, with_tensorrt=with_tensorrt)
    return output, code, result.facts.probe.report


def run(opts: dict[str, Any]) -> int:
    """The exit code of a plain `check`; what goes wrong is rendered by the entry point (output.ended)."""

    from ortfix.cli.streams import fit
    from ortfix.safetext import visible_lines

    def echo(text: str) -> None:  # as cli/app.py's: what the environment said is shown escaped, symbols as fit
        sys.stdout.write(fit(visible_lines(text), sys.stdout) + "\n")

    code = check_command(**opts, echo=echo)
    sys.stdout.flush()
    return code


def end(code: int) -> NoReturn:
    """End the process with `code` once what it printed is out and the atexit handlers have run, without the
    interpreter's teardown (freeing every module and object one by one: a sixth of a fresh check's CPU time, 17 ms
    of a replayed one's, on the machine of the figures above). Nothing of a check needs it: its files are written
    and closed before it prints, and it starts no thread."""
    import atexit

    sys.stdout.flush()
    sys.stderr.flush()
    atexit._run_exitfuncs()  # what a normal exit runs (prefetch's clean-up), and reports, before the teardown
    sys.stderr.flush()
    os._exit(code)
