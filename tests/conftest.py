"""Test-wide set-up: every test gets its own database file, and nothing a
test does can reach a model API or another machine."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import pytest

from tests import shared_servers

# Collecting imports ~5,000 modules (SDKs define thousands of classes) that live
# for the whole run; Python's collector kept walking them all: ~1-2 s of each
# worker's 8-10 s of collecting.  Rarely while collecting, then those objects
# are set aside (gc.freeze) so the collections during the tests skip them.
_THRESHOLDS = gc.get_threshold()
gc.set_threshold(100_000, 50, 50)


def pytest_collection_finish(session):
    gc.freeze()
    gc.set_threshold(*_THRESHOLDS)


# Where a test relies on the default model it gets the small, fast one (seconds, not
# a minute per run), in this process and in every `flowforge` process it starts;
# tests/providers/test_default_model.py checks the default itself.  The README's
# `make demo` test runs on it too: on local/qwen2.5-0.5b the demo takes ~1-2 min.
os.environ["FLOWFORGE_DEFAULT_MODEL"] = "local/smollm2"

_DURATIONS = Path(__file__).with_name("durations.json")


def pytest_configure(config):
    """Files go to the workers in collection order, which the hook below makes the
    longest first; xdist's own order (`--loadscope-reorder`, the most tests first)
    queued each file of one long test last, the run's tail (schemathesis, the real
    model, Phoenix: the last worker ended 16-36 s after the first; now within ~1 s).
    The workers share one PostgreSQL of each kind (tests/shared_servers.py)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    shared_servers.begin_run(config)


def pytest_unconfigure(config):
    shared_servers.end_run(config)


def pytest_collection_modifyitems(items):
    """The longest test files first, by their seconds in tests/durations.json
    (`bench/suite.py --save-durations` writes it; a file it does not list comes
    after, in collection order).  A file's tests keep their order."""
    seconds = json.loads(_DURATIONS.read_text(encoding="utf-8")) if _DURATIONS.is_file() else {}
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))


def pytest_xdist_auto_num_workers(config):
    """`make test` runs `-n auto`: two workers per core (at most 8), not one.
    Most tests wait (on servers, subprocesses, a browser, sleeps), and with
    one worker per core the two cores of the machine we measure on were busy
    only 60 % of the run: 10 min 39 s on 2 workers, 5 min 14 s of tests on 4."""
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


@pytest.fixture(autouse=True)
def _isolated_database(tmp_path, monkeypatch):
    """Runs recorded by a test go to a throwaway SQLite file, never the user's."""
    monkeypatch.setenv("FLOWFORGE_DATABASE_URL", f"sqlite:///{tmp_path / 'flowforge.db'}")
    yield


# --- No test may reach another machine (providers' guard; see tests/providers) -------------
import ipaddress  # noqa: E402
import socket  # noqa: E402

_OFF_MACHINE: list[str] = []


def _loopback(address) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False   # a host name: connect() is given addresses, so refuse names too


@pytest.fixture(autouse=True, scope="session")
def _no_network_beyond_loopback():
    """Any in-process socket connection to a non-loopback address is refused and fails the
    test that made it (even if the code under test swallowed the error); hosted model APIs
    are refused earlier by `providers.base.ALLOW_MODEL_REQUESTS = False`."""
    from flowforge.providers import base

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def check(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address):
            _OFF_MACHINE.append(repr(address))
            raise ConnectionRefusedError(f"tests may not connect beyond 127.0.0.1: {address!r}")

    def connect(sock, address):
        check(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        check(sock, address)
        return real_connect_ex(sock, address)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        patch.setattr(base, "ALLOW_MODEL_REQUESTS", False)
        yield


@pytest.fixture(autouse=True)
def _fail_on_off_machine_connection():
    _OFF_MACHINE.clear()
    yield
    if _OFF_MACHINE:
        attempts = ", ".join(_OFF_MACHINE)
        _OFF_MACHINE.clear()
        pytest.fail(f"the test tried to connect beyond loopback: {attempts}")


# --- No test may leave a stopped server answering the process's SIGTERM ------------------
import signal  # noqa: E402


@pytest.fixture(autouse=True)
def _sigterm_handler_restored():
    """A server serving in the test's event loop takes SIGTERM while it runs; two
    servers stopped in the order they started leave the first one's handler
    installed, and sse-starlette then ends every later event stream of the process
    within half a second (it asks the SIGTERM handler's server whether it is
    exiting). A test must stop its servers last-started first; this puts the
    handler back and names the test that did not. (SIGINT is not checked:
    asyncio's runner holds it while a test's loop runs.)"""
    before = signal.getsignal(signal.SIGTERM)
    yield
    after = signal.getsignal(signal.SIGTERM)
    if after != before:
        signal.signal(signal.SIGTERM, before)
        pytest.fail(f"the test left {after!r} as the process's SIGTERM handler (a server "
                    "it started and stopped): stop servers in the reverse order of their start")


@pytest.fixture(scope="module")
def flowforge_bin(tmp_path_factory) -> Path:
    """A folder to put first on PATH whose `flowforge` runs each command in a
    child forked from one process that imported the CLI once
    (tests/forked_cli.py): the guides' and the README's shell blocks, ~90
    commands, each without ~0.4 s of CPU spent importing."""
    from tests.forked_cli import forked_cli

    env = {**os.environ, "COLUMNS": "200",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    with forked_cli(tmp_path_factory.mktemp("forked_cli"), env) as folder:
        yield folder
