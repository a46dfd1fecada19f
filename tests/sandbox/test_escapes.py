"""Untrusted block code must not get out: every escape attempt is stopped
with a clear error, in both confinements (bubblewrap and the plain
subprocess with seccomp)."""

from __future__ import annotations

import os
import shutil

import pytest

from flowforge.sandbox import Limits, SandboxError, run_python
from flowforge.sandbox.process import _POOL

pytestmark = pytest.mark.asyncio


def _modes() -> list[str]:
    if shutil.which("bwrap"):
        return ["bwrap", "process"]
    if os.environ.get("CI"):
        raise RuntimeError("bubblewrap is missing: scripts/install_system_deps.sh installs it")
    return ["process"]


@pytest.fixture(params=[(m, start) for m in _modes() for start in ("cold", "waiting")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def mode(request, monkeypatch) -> str:
    """Each confinement, started cold for the run or waiting beforehand in the
    pool (libseccomp loaded, modules preloaded where files are denied, before
    its job): both must hold."""
    mode, start = request.param
    _POOL.close()
    if start == "cold":
        monkeypatch.setenv("FLOWFORGE_SANDBOX_WARM", "0")
    else:
        monkeypatch.setenv("FLOWFORGE_SANDBOX_WARM", "1")
        _POOL.refill(mode)
        assert [c.alive() for c in _POOL.idle[mode]] == [True]
    yield mode
    _POOL.close()


def block(body: str) -> str:
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    return f"async def execute(inputs, context):\n{lines}\n"


async def stopped(mode: str, source: str, limits: Limits | None = None, **kw) -> SandboxError:
    with pytest.raises(SandboxError) as info:
        await run_python(source, {}, limits=limits or Limits(wall_seconds=10), mode=mode, **kw)
    return info.value


async def test_a_good_block_runs_and_its_prints_are_kept(mode):
    source = ("import math, statistics, collections, re, json, datetime\n" + block("""
print("checking", inputs["xs"])
words = collections.Counter(re.findall(r"\\w+", inputs["text"]))
day = datetime.date.fromisoformat("2024-02-28") + datetime.timedelta(days=1)
return {"mean": statistics.mean(inputs["xs"]), "root": math.sqrt(16),
        "top": words.most_common(1)[0][0], "day": day.isoformat(),
        "json": json.dumps({"a": 1})}
"""))
    result = await run_python(source, {"xs": [1, 2, 3], "text": "a b a"}, mode=mode)
    assert result.output == {"mean": 2, "root": 4.0, "top": "a", "day": "2024-02-29",
                             "json": '{"a": 1}'}
    assert result.logs == "checking [1, 2, 3]\n"
    assert result.mode == mode


async def test_the_blocks_own_error_names_its_line(mode):
    error = await stopped(mode, block('x = 1\nraise ValueError("bad input")'))
    assert error.kind == "error"
    assert "ValueError: bad input (line 3)" in str(error)


@pytest.mark.parametrize("attempt, expected", [
    ("import os\nreturn {'x': os.listdir('/')}", "module 'os' is not allowed"),
    ("import subprocess\nreturn {}", "module 'subprocess' is not allowed"),
    ("import socket\nreturn {}", "module 'socket' is not allowed"),
    ("return {'x': open('/etc/passwd').read()}", "'open' is not available"),
    ("return {'x': ().__class__.__base__.__subclasses__()}", "attribute '__class__'"),
    ("return {'x': getattr((), '__cl' + 'ass__')}", "'getattr' is not available"),
    ("return {'x': __import__('os')}", "'__import__' is not available"),
    ("def g():\n    yield 1\nreturn {'x': g().gi_frame.f_back.f_globals}", "'gi_frame'"),
    ("return {'x': eval('1+1')}", "'eval' is not available"),
    ("from os import path\nreturn {}", "module 'os' is not allowed"),
])
async def test_the_source_check_rejects_reflection_and_forbidden_imports(mode, attempt, expected):
    error = await stopped(mode, block(attempt))
    assert error.kind == "rejected"
    assert expected in str(error)


async def test_module_copies_hide_other_modules(mode):
    # collections imports sys; the copy handed to the block must not carry it.
    error = await stopped(mode, "import collections, random\n" +
                          block("return {'x': str(collections.sys.modules)}"))
    assert error.kind == "error" and "AttributeError" in str(error)


async def test_reading_files_fails_even_after_getting_past_the_source_check(mode):
    # Simulates a source-check bypass: the runner's own `io` reaches open().
    source = ("import json\n" + block("""
reader = json.JSONDecoder
loader = type(reader).mro(type(reader))
return {}
"""))
    error = await stopped(mode, source)
    assert error.kind == "rejected"           # `mro` is an escape route, refused up front


async def test_infinite_loop_is_stopped_by_the_cpu_limit(mode):
    error = await stopped(mode, block("while True:\n    pass"),
                          Limits(cpu_seconds=1, wall_seconds=10))
    assert error.kind == "cpu"
    assert "CPU-time limit of 1 s" in str(error)


async def test_sleeping_forever_is_stopped_by_the_wall_limit(mode):
    error = await stopped(mode, "import time\n" + block("time.sleep(60)\nreturn {}"),
                          Limits(wall_seconds=1))
    assert error.kind == "wall"
    assert "wall-time limit of 1 s" in str(error)


async def test_memory_bomb_is_stopped(mode):
    error = await stopped(mode, block("x = 'a' * (10 ** 10)\nreturn {}"),
                          Limits(memory_mb=128))
    assert error.kind == "memory"
    assert "memory limit of 128 MB" in str(error)


async def test_growing_memory_bomb_is_stopped(mode):
    error = await stopped(mode, block("x = []\nwhile True:\n    x.append(' ' * 10**6)"),
                          Limits(memory_mb=128, cpu_seconds=5))
    assert error.kind == "memory"


async def test_huge_output_is_refused(mode):
    error = await stopped(mode, block("return {'x': 'a' * 5_000_000}"),
                          Limits(output_bytes=100_000))
    assert error.kind == "output"
    assert "over the limit of 100000 bytes" in str(error)


async def test_huge_prints_are_truncated_not_fatal(mode):
    result = await run_python(block("for i in range(10000):\n    print('x' * 100)\nreturn {}"),
                              {}, limits=Limits(output_bytes=10_000), mode=mode)
    assert 0 < len(result.logs) <= 2_600


async def test_deep_recursion_is_an_ordinary_error(mode):
    error = await stopped(mode, block("def f(n):\n    return f(n + 1)\nreturn {'x': f(0)}"))
    assert "RecursionError" in str(error)


async def test_a_non_dict_result_is_refused(mode):
    error = await stopped(mode, block("return [1, 2]"))
    assert "must return a dict" in str(error)


async def test_network_is_refused_unless_declared(mode):
    error = await stopped(mode, "import httpx\n" + block("return {}"))
    assert error.kind == "error" and "module 'httpx' is not allowed" in str(error)


async def test_declared_network_goes_through_the_ssrf_guard(mode):
    # The metadata address and loopback are refused by the parent's guard.
    source = "import httpx\n" + block("""
r = await httpx.get("http://169.254.169.254/latest/meta-data/")
return {"status": r.status_code}
""")
    error = await stopped(mode, source, network=True)
    assert "request refused" in str(error) and "169.254.169.254" in str(error)


async def test_declared_network_reaches_an_allowed_host_through_the_parent(mode):
    seen = []

    async def fake_http(request):
        seen.append(request["url"])
        return {"status": 200, "headers": {}, "text": '{"ok": true}', "url": request["url"]}

    source = "import httpx\n" + block("""
r = await httpx.get("https://example.org/data.json")
return {"status": r.status_code, "body": r.json()}
""")
    result = await run_python(source, {}, network=True, http=fake_http, mode=mode)
    assert result.output == {"status": 200, "body": {"ok": True}}
    assert seen == ["https://example.org/data.json"]
    assert result.http_calls == ["GET https://example.org/data.json"]


async def test_a_seed_block_using_httpx_async_client_works_through_the_parent(mode):
    """Blocks written for the intent-to-pipeline seed use `httpx.AsyncClient`
    (issue 26): it works, every request still answered by the parent's guard."""
    seen = []

    async def fake_http(request):
        seen.append((request["method"], request["url"], request["params"],
                     request["headers"], request["json"]))
        return {"status": 201, "headers": {}, "text": '{"id": 7}', "url": request["url"]}

    source = "import httpx\n" + block("""
async with httpx.AsyncClient(base_url="https://api.example.org/v1",
                             headers={"X-Team": "a"}) as client:
    got = await client.get("/items", params={"q": "tent"})
    made = await client.post("items", json={"name": "tent"}, headers={"X-Try": "1"})
    gone = await httpx.delete("https://api.example.org/v1/items/7")
return {"got": got.status_code, "made": made.json(), "gone": gone.status_code}
""")
    result = await run_python(source, {}, network=True, http=fake_http, mode=mode)
    assert result.output == {"got": 201, "made": {"id": 7}, "gone": 201}
    assert seen == [
        ("GET", "https://api.example.org/v1/items", {"q": "tent"}, {"X-Team": "a"}, None),
        ("POST", "https://api.example.org/v1/items", {}, {"X-Team": "a", "X-Try": "1"},
         {"name": "tent"}),
        ("DELETE", "https://api.example.org/v1/items/7", None, None, None)]


# -- the outer layers alone: the source check is switched off, and the code
#    reaches `os` through the classic __subclasses__ walk ------------------------

OS_VIA_SUBCLASSES = block("""
os = None
for cls in ().__class__.__base__.__subclasses__():
    if cls.__name__ == "_wrap_close":
        os = cls.__init__.__globals__["sys"].modules["os"]
        sys = cls.__init__.__globals__["sys"]
assert os is not None, "no route to os"
""")


async def unchecked(mode: str, body: str, limits: Limits | None = None) -> SandboxError:
    source = OS_VIA_SUBCLASSES.rstrip() + "\n" + "\n".join(
        "    " + line for line in body.strip().splitlines()) + "\n"
    return await stopped(mode, source, limits, check=False)


async def test_reading_etc_passwd_fails_without_the_source_check(mode):
    error = await unchecked(mode, "fd = os.open('/etc/passwd', os.O_RDONLY)\n"
                                  "return {'x': os.read(fd, 100).decode()}")
    assert ("FileNotFoundError" in str(error)) if mode == "bwrap" else \
        ("PermissionError" in str(error))


async def test_reading_the_projects_files_fails_without_the_source_check(mode):
    path = os.path.abspath(__file__)
    error = await unchecked(mode, f"fd = os.open({path!r}, os.O_RDONLY)\nreturn {{}}")
    assert "FileNotFoundError" in str(error) or "PermissionError" in str(error)


async def test_sockets_fail_without_the_source_check(mode):
    # libc's socket() straight through ctypes (the runner loaded it for seccomp).
    source = OS_VIA_SUBCLASSES.rstrip() + "\n" + "\n".join("    " + line for line in """
ctypes = sys.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.socket(2, 1, 0)
return {"fd": fd, "errno": ctypes.get_errno()}
""".strip().splitlines()) + "\n"
    result = await run_python(source, {}, mode=mode, check=False)
    assert result.output == {"fd": -1, "errno": 1}          # EPERM from seccomp


async def test_spawning_processes_fails_without_the_source_check(mode):
    error = await unchecked(mode, "pid = os.fork()\nreturn {'pid': pid}")
    assert "PermissionError" in str(error)
    error = await unchecked(mode, "os.execv('/bin/sh', ['sh', '-c', 'id'])\nreturn {}")
    assert "PermissionError" in str(error) or "FileNotFoundError" in str(error)


async def test_fork_bomb_fails_without_the_source_check(mode):
    error = await unchecked(mode, "while True:\n    os.fork()", Limits(wall_seconds=10))
    assert "PermissionError" in str(error)


async def test_raising_limits_fails_without_the_source_check(mode):
    error = await unchecked(mode, "import_ = __builtins__['__import__']\n"
                                  "r = sys.modules['resource']\n"
                                  "r.setrlimit(r.RLIMIT_CPU, (1000, 1000))\nreturn {}")
    assert "PermissionError" in str(error) or "ValueError" in str(error)


# -- issue 17: pattern matching, submodules by name, io_uring, other processes ---------

@pytest.mark.parametrize("attempt", [
    "import json\nmatch json.dumps:\n    case object(__globals__=g):\n        return {'g': str(g)}\n"
    "return {}",
    "try:\n    1 / 0\nexcept Exception as e:\n    match e:\n"
    "        case Exception(__traceback__=tb):\n            return {'t': str(tb)}\nreturn {}",
    "match (1).real:\n    case int(tb_frame=f):\n        return {}\nreturn {}",
    "match {}:\n    case {**__builtins__}:\n        return {}\nreturn {}",
], ids=["globals", "traceback", "frame-attr", "bind-builtins"])
async def test_match_patterns_cannot_read_private_attributes(mode, attempt):
    error = await stopped(mode, block(attempt))
    assert error.kind == "rejected"
    assert "not allowed" in str(error) or "not available" in str(error)


async def test_from_import_hands_over_no_other_module(mode):
    error = await stopped(mode, block("from json import decoder\nreturn {'d': str(decoder)}"))
    assert error.kind == "error" and "ImportError" in str(error)
    result = await run_python(block("from json import dumps, loads\n"
                                    "return {'x': dumps(loads('[1]'))}"), {}, mode=mode)
    assert result.output == {"x": "[1]"}


async def test_io_uring_is_denied_without_the_source_check(mode):
    # io_uring_setup straight through ctypes: it would open and read files
    # around the file rules; the allow-list refuses it (EPERM).
    source = OS_VIA_SUBCLASSES.rstrip() + "\n" + "\n".join("    " + line for line in """
ctypes = sys.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
fd = libc.syscall(425, 8, params)
enter = libc.syscall(426, 0, 0, 0, 0, 0, 0)
return {"fd": fd, "errno": ctypes.get_errno(), "enter": enter}
""".strip().splitlines()) + "\n"
    result = await run_python(source, {}, mode=mode, check=False)
    assert result.output["fd"] == -1 and result.output["enter"] == -1
    assert result.output["errno"] == 1                       # EPERM from seccomp


async def test_signals_to_other_processes_are_denied_without_the_source_check(mode):
    import subprocess
    import sys

    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        source = OS_VIA_SUBCLASSES.rstrip() + "\n" + "\n".join("    " + line for line in f"""
ctypes = sys.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)
results = {{}}
results["kill"] = libc.kill({victim.pid}, 9)
info = ctypes.create_string_buffer(128)
results["sigqueue"] = libc.syscall(129, {victim.pid}, 9, info)
results["pidfd_open"] = libc.syscall(434, {victim.pid}, 0)
results["ptrace"] = libc.syscall(101, 16, {victim.pid}, 0, 0)
results["errno"] = ctypes.get_errno()
return results
""".strip().splitlines()) + "\n"
        result = await run_python(source, {}, mode=mode, check=False)
        assert victim.poll() is None, "the sandboxed block killed another process"
        assert result.output == {"kill": -1, "sigqueue": -1, "pidfd_open": -1, "ptrace": -1,
                                 "errno": 1}
    finally:
        victim.kill()
        victim.wait()


async def test_negative_or_huge_limits_in_block_metadata_are_invalid():
    from pydantic import ValidationError

    from flowforge.registry.model import BlockMetadata

    for bad in ({"cpu_seconds": -1}, {"memory_mb": 0}, {"cpu_seconds": 10_000}):
        with pytest.raises(ValidationError):
            BlockMetadata(**bad)
    with pytest.raises(ValueError, match="must be a positive number"):
        Limits(cpu_seconds=-5)


async def test_a_server_refuses_the_plain_process_confinement_unless_accepted():
    error = await stopped("process", block("return {'x': 1}"), isolated_only=True)
    assert error.kind == "isolation" and "--allow-process-sandbox" in str(error)
    result = await run_python(block("return {'x': 1}"), {}, mode="process")
    assert result.output == {"x": 1}


async def test_server_runs_ask_for_isolation(tmp_path, monkeypatch):
    """Without bubblewrap, a server's registry Python block fails clearly
    unless the administrator accepted the plain-process confinement."""
    from flowforge.server.settings import ServerSettings
    from tests.server.conftest import start_server

    monkeypatch.setenv("FLOWFORGE_SANDBOX", "process")        # as on a host without bwrap
    document = {"id": "py", "blocks": [{"id": "stats", "uses": "math_stats",
                                        "with": {"numbers": [1, 2, 3]}}]}
    for accepted in (False, True):
        live, stop = await start_server(f"sqlite:///{tmp_path / f'{accepted}.db'}",
                                        allow_process_sandbox=accepted)
        try:
            async with live.client() as client:
                await client.post("/api/workflows", json=document)
                answer = (await client.post("/api/workflows/py/runs?wait=true", json={})).json()
        finally:
            await stop()
        if accepted:
            assert answer["status"] == "succeeded", answer["blocks"]
        else:
            assert answer["status"] == "failed"
            assert "--allow-process-sandbox" in answer["blocks"]["stats"]["error"]
    assert ServerSettings().allow_process_sandbox is False


# -- found by a second look at the pattern-matching fix: a metaclass's
#    __match_args__, functools reading attributes by name, string annotations ------

METACLASS_MATCH = "import json\n" + block("""
class M(type):
    def __instancecheck__(cls, obj):
        return True
    @property
    def __match_args__(cls):
        return ('__globals__',)
class C(metaclass=M):
    pass
match json.dumps:
    case C(g):
        return {'g': str(g)}
return {}
""")
UPDATE_WRAPPER = "import functools, json\n" + block("""
box = []
W = type('W', (), {'__setattr__': lambda s, k, v: box.append(v)})
functools.update_wrapper(W(), json.dumps, assigned=('__globals__',), updated=())
return {'g': str(box[0])}
""")
SINGLEDISPATCH = "import functools\nbox = []\n" + block("""
@functools.singledispatch
def f(x):
    return 0
def g(x: "box.append(().__class__.__base__.__subclasses__()) or int"):
    return 1
f.register(g)
return {'n': len(box[0])}
""")


@pytest.mark.parametrize("source", [METACLASS_MATCH, UPDATE_WRAPPER, SINGLEDISPATCH],
                         ids=["metaclass-match-args", "update-wrapper", "singledispatch"])
async def test_attribute_reads_by_name_are_refused(mode, source):
    error = await stopped(mode, source)
    assert error.kind == "rejected", str(error)


async def test_functools_copies_leave_out_what_reads_attributes_by_name(mode):
    result = await run_python(block(
        "import functools\nreturn {'names': sorted(n for n in dir(functools) if n in "
        "('wraps', 'update_wrapper', 'singledispatch', 'reduce', 'partial'))}"), {}, mode=mode)
    assert result.output == {"names": ["partial", "reduce"]}


async def test_ordinary_classes_and_builtin_patterns_still_work(mode):
    source = block("""
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def __repr__(self):
        return f"P({self.x}, {self.y})"
match [1, 2]:
    case list([a, b]):
        pair = (a, b)
match Point(3, 4):
    case Point(x=3, y=y):
        found = y
return {'pair': list(pair), 'found': found, 'p': repr(Point(1, 2))}
""")
    result = await run_python(source, {}, mode=mode)
    assert result.output == {"pair": [1, 2], "found": 4, "p": "P(1, 2)"}
