"""What the `flowforge` commands share: the consoles, reading `--input` and
`--inputs-file`, importing `--import` code, showing a RunResult with the exit
code that goes with it, and calling the storage with its errors as exit codes.
The commands themselves: `main.py` (run, validate, schema) and one module per
group beside it (`runs.py`, `blocks.py`, ...).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from flowforge.cli.exits import fail, run_exit_code
from flowforge.cli.progress import print_summary
from flowforge.errors import FlowforgeError, WorkflowError

__all__ = ["out", "err", "parse_inputs", "read_text_file", "split_secret_inputs", "import_plugins",
           "show_result", "storage_call"]

out = Console(markup=False)
err = Console(stderr=True, soft_wrap=True, markup=False)   # long messages are never cut or broken


def parse_inputs(pairs: list[str], inputs_file: Path | None) -> dict[str, Any]:
    """`k=v` pairs (each value JSON when it parses as JSON, else a string;
    `k=@path` the text of a file, `k=@@text` the text `@text`) over an
    optional JSON/YAML file of inputs."""
    values: dict[str, Any] = {}
    if inputs_file is not None:
        from flowforge.workflow.loader import parse_text
        text = read_text_file(inputs_file, f"--inputs-file {inputs_file}",
                              give=": give a JSON or YAML file")
        try:
            data = parse_text(text, str(inputs_file))
        except WorkflowError as exc:
            fail(f"--inputs-file {exc}")
        if data is None:
            fail(f"--inputs-file {inputs_file} is empty: write a mapping such as "
                 f"{{\"query\": \"refund policy\"}}")
        if not isinstance(data, dict):
            fail(f"--inputs-file {inputs_file}: expected a mapping of input names to values, "
                 f"got {type(data).__name__}")
        values.update(data)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            fail(f"--input {pair!r}: write it as name=value, e.g. --input query='refund policy'")
        if raw.startswith("@@"):
            value: Any = raw[1:]
        elif raw.startswith("@"):
            value = _file_input(key.strip(), raw[1:])
        else:
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
        values[key.strip()] = value
    return values


def _file_input(name: str, path_text: str) -> str:
    """The text of the file an `--input name=@path` names (as is: never JSON-parsed)."""
    return read_text_file(Path(path_text).expanduser(), f"--input {name}=@{path_text}",
                          missing=f" (to pass text starting with @, write --input {name}=@@...)")


def read_text_file(path: Path, label: str, *, give: str = ": give a text file",
                   missing: str = "") -> str:
    """A file named on the command line, as text; every way it cannot be read
    is one line starting with `label` (how the user wrote it), exit 2."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        fail(f"{label}: no such file{missing}")
    except IsADirectoryError:
        fail(f"{label} is a directory{give}")
    except UnicodeDecodeError:
        fail(f"{label} is not UTF-8 text{give}")
    except OSError as exc:
        fail(f"{label}: {exc.strerror or exc}")
    raise AssertionError("unreachable")


def split_secret_inputs(workflow: Any, inputs: dict[str, Any]
                        ) -> tuple[dict[str, Any], dict[str, str]]:
    """Inputs the workflow reads as `{{secrets.NAME}}` and does not declare
    (a prompt-chain's `{apiKey}`) are passed as secrets for this run: hidden
    from every record and never stored."""
    from flowforge.apps.chains import split_variables

    declared = workflow.doc.inputs
    rest, hidden = split_variables(workflow, {k: v for k, v in inputs.items()
                                              if k not in declared})
    return {**{k: v for k, v in inputs.items() if k in declared}, **rest}, hidden


def import_plugins(targets: list[str]) -> None:
    """Import user code (functions, block types, providers) before running."""
    import importlib
    import importlib.util

    for target in targets:
        path = Path(target)
        try:
            if path.suffix == ".py":
                if not path.exists():
                    fail(f"--import {target}: no such file")
                spec = importlib.util.spec_from_file_location(path.stem, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[path.stem] = module
                spec.loader.exec_module(module)
            else:
                importlib.import_module(target)
        except typer.Exit:
            raise
        except Exception as exc:  # noqa: BLE001 - user code: report, do not trace
            fail(f"--import {target} failed: {type(exc).__name__}: {exc}")


def show_result(result: Any, as_json: bool, stored: bool = True) -> None:
    if as_json:
        from flowforge.service.recorder import CUT_OFF

        print(json.dumps(result.to_dict(), default=str, ensure_ascii=False))
        if result.status == "failed" and (result.error or "").startswith(CUT_OFF):
            err.print(f"error: {result.error}", highlight=False, markup=False)
    else:
        print_summary(result, out, stored=stored)
        if result.status == "waiting":
            waiting = [bid for bid, record in result.blocks.items()
                       if record.status == "waiting"]
            err.print(f"run {result.run_id} is waiting on {', '.join(waiting)}: "
                      f"`flowforge runs approve|reject {result.run_id} BLOCK` decides an "
                      f"approval; `flowforge runs resume-due` continues what is due",
                      highlight=False, markup=False)
    raise typer.Exit(run_exit_code(result.status))


def storage_call(coro: Any) -> Any:
    from flowforge.cli.exits import exit_code

    try:
        return asyncio.run(coro)
    except FlowforgeError as exc:
        fail(str(exc), exit_code(exc))
