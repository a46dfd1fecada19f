"""The `flowforge` command line run inside the test's own process.

A test about what a command prints and which exit code it gives does not need
a new interpreter: starting one costs ~0.3 s of CPU to import flowforge again,
and the suite ran ~150 of them for these tests alone.  `flowforge()` here
invokes the very click command `flowforge` runs (`cli.main.command()`) and
answers as `subprocess.run` did, so a test reads the same `returncode`,
`stdout` and `stderr`.  What a real process would print on a crash, a
traceback on stderr with exit code 1, is printed here too, so a test that a
command never shows one still means it.

Tests about processes (a signal, another process's run, a server, the
installed script) start real ones."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import subprocess
import traceback
from collections.abc import Iterable, Mapping
from pathlib import Path
from unittest import mock

from click.testing import CliRunner

from flowforge.cli.main import command

__all__ = ["flowforge"]

_COMMAND = command()
_RUNNER = CliRunner()


def flowforge(*args: str, env: Mapping[str, str] | None = None, unset: Iterable[str] = (),
              cwd: Path | None = None, input: str | None = None, timeout: float = 300
              ) -> subprocess.CompletedProcess:
    """`flowforge ARGS` with the environment `env` laid over this process's
    (less the names in `unset`), in `cwd`, reading `input` on stdin.  A command
    still running after `timeout` seconds ends this test process with every
    thread's stack printed (as `subprocess.run(timeout=...)` ended a hung one):
    a hang fails its test instead of holding the suite."""
    faulthandler.dump_traceback_later(timeout, exit=True)
    try:
        # the whole environment is put back afterwards, what the command set included
        with mock.patch.dict(os.environ, env or {}), contextlib.chdir(cwd or os.getcwd()):
            for name in unset:
                os.environ.pop(name, None)
            result = _RUNNER.invoke(_COMMAND, list(args), input=input, prog_name="flowforge")
    finally:
        faulthandler.cancel_dump_traceback_later()
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["flowforge", *args], result.exit_code,
                                       result.stdout, stderr)
