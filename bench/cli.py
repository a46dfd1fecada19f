"""CPU of one short command line, start to end: what a user waits for on
each `flowforge run`, `validate` or `--help`, and what the suite pays ~290
times (most of a short command is its start: imports and the document's
models).  Each command runs N times as a fresh process; the figure is the
median of its CPU (user + system, from the kernel's child accounting), so
other work on the cores moves it little.

    .venv/bin/python bench/cli.py [--times 9] [--against REV]

Beside the commands: the floor (`python -c pass`) and `import flowforge`.
`--against REV` measures the same commands on another revision's `src/` in
the same run, interleaved command by command (the peer: the code before a
change), and prints the ratio of each.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SIMPLE = """version: 1
id: short
inputs: {name: {type: string}}
blocks:
  - {id: greet, type: set, with: {text: "hello {{input.name}}"}}
  - {id: reply, type: response, with: {message: "{{greet.text}}"}}
"""


def commands(folder: Path) -> dict[str, list[str]]:
    simple = folder / "short.yaml"
    simple.write_text(SIMPLE)
    cli = ["-m", "flowforge.cli.main"]
    scripted = f"scripted/{ROOT / 'examples/scripted/support.rules.yaml'}"
    return {
        "python -c pass (floor)": ["-c", "pass"],
        "import flowforge": ["-c", "import flowforge"],
        "flowforge --help": [*cli, "--help"],
        "flowforge validate short.yaml": [*cli, "validate", str(simple)],
        "flowforge run short.yaml --no-store": [*cli, "run", str(simple), "-i", "name=ann",
                                                "--json", "--no-store"],
        "flowforge run short.yaml (stored)": [*cli, "run", str(simple), "-i", "name=ann",
                                              "--json", "--db",
                                              f"sqlite:///{folder / 'runs.db'}"],
        "flowforge validate examples/support.yaml": [
            *cli, "validate", str(ROOT / "examples/support.yaml")],
        "flowforge run examples/support.yaml (scripted)": [
            *cli, "run", str(ROOT / "examples/support.yaml"), "--model", scripted,
            "-i", "query=Can I get a refund?", "--json", "--no-store"],
    }


def cpu_of(argv: list[str], src: Path, cwd: Path) -> float:
    """CPU seconds of one run of `python argv` with `src` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, *argv], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0,):
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--times", type=int, default=9)
    parser.add_argument("--against", metavar="REV",
                        help="also measure this git revision's src/, interleaved")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trees = {"now": ROOT / "src"}
        if args.against:
            other = folder / "against"
            other.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.against, "src"],
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(other)], input=archive, check=True)
            trees[args.against] = other / "src"
        for src in trees.values():      # both from bytecode (PYTHONDONTWRITEBYTECODE may be set)
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)
        figures: dict[str, dict[str, float]] = {}
        for name, argv in commands(folder).items():
            samples: dict[str, list[float]] = {label: [] for label in trees}
            for label, src in trees.items():           # warm the file cache and .pyc
                cpu_of(argv, src, folder)
            for _ in range(args.times):
                for label, src in trees.items():
                    samples[label].append(cpu_of(argv, src, folder))
            row = {label: round(statistics.median(values) * 1000) for label, values in
                   samples.items()}
            if args.against:
                row["ratio"] = round(row["now"] / row[args.against], 2)
            figures[name] = row
            print(json.dumps({"command": name, "cpu_ms_median": row}), flush=True)


if __name__ == "__main__":
    main()
