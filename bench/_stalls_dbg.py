"""`/health` while one user attacks the server (issue 23): each request that
once froze it for seconds is replayed against a real `flowforge serve`
process on loopback while another client polls `/health` every 20 ms; the
p50, p99 and worst `/health` answer during each attack are printed (target:
p99 < 100 ms), with what the attack itself got back.

    .venv/bin/python bench/stalls.py                 # every attack, ~1 minute
    .venv/bin/python bench/stalls.py --only template --repeat 20
    .venv/bin/python bench/stalls.py --only runs --only requests   # the request floods
    .venv/bin/python bench/stalls.py --only memory --only bigdoc --only doubling --repeat 1   # issue 41

Client and server share the machine's cores.  `/health` is polled from a
process of its own (`--poller process`, the default): polled from the
attacker's event loop (`--poller loop`, how the first figures were taken) its
latency also counts the attacking client's own work on 500 answers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

FLOWFORGE = str(Path(sys.executable).parent / "flowforge")
EVIL = "^(a+)+$"

FLOOD = {"id": "flood", "blocks": [
    {"id": "spin", "type": "loop", "with": {"times": 100_000, "max_iterations": 100_000},
     "blocks": [{"id": "step", "type": "set", "with": {"i": "{{loop.index}}"}}]}]}
#: a long run that holds its slot while idle (a `wait` under 30 s sleeps in the run)
BUSY = {"id": "busy", "blocks": [{"id": "hold", "type": "wait", "with": {"seconds": 20}}]}
BLOCK = {"id": "slow_example", "name": "Slow example", "description": "checks a code",
         "execution_type": "python",
         "source_code": "async def execute(inputs, context):\n    return {'ok': True}\n",
         "input_schema": {"type": "object", "properties": {
             "code": {"type": "string", "pattern": EVIL}}},
         "output_schema": {"type": "object"},
         "examples": [{"inputs": {"code": "a" * 50_000 + "!"}, "outputs": {"ok": True}}]}


#: a sandboxed block that asks for 2 GB and holds 200 MB of it for a second
HOG = {"id": "hog", "name": "Hog", "description": "holds memory", "execution_type": "python",
       "metadata": {"memory_mb": 2048, "cpu_seconds": 5},
       "source_code": ("import time\nasync def execute(inputs, context):\n"
                       "    held = bytearray(inputs['mb'] * 1024 * 1024)\n"
                       "    time.sleep(1)\n    return {'held': len(held)}\n"),
       "input_schema": {"type": "object", "properties": {"mb": {"type": "integer"}}},
       "output_schema": {"type": "object"},
       "examples": [{"inputs": {"mb": 1}, "outputs": {"held": 1024 * 1024}}]}
HOGS = {"id": "hogs", "blocks": [{"id": "h", "uses": "hog", "with": {"mb": 200}}]}
#: 31 `set` blocks, each twice the one before, from 1 KB: 2 TB by the last (was: the
#: server grew to 19 GB in a minute, the kernel killed it, and it died again on resume)
DOUBLING = {"id": "doubling", "blocks": [
    {"id": "a0", "type": "set", "with": {"v": "y" * 1000}},
    *({"id": f"a{k}", "type": "set", "with": {"v": f"{{{{a{k - 1}.v}}}}{{{{a{k - 1}.v}}}}"}}
      for k in range(1, 31))]}


def _big_document(blocks: int) -> dict:
    """`set` blocks of ~100 bytes each: 9,000 of them are ~890 KB, under the body limit."""
    return {"id": f"big{blocks}", "inputs": {"x": {"type": "string"}},
            "blocks": [{"id": f"b{i}", "type": "set",
                        "with": {"v": f"{{{{input.x}}}} value number {i} padding", "n": i}}
                       for i in range(blocks)]}


def _yaml_post(client: httpx.AsyncClient, text: str):
    return client.post("/api/validate", content=text.encode(),
                       headers={"Content-Type": "application/yaml"})


async def template(clients):
    """`{{` and 100,000 spaces to /api/validate (was: 3,000 spaces, 24 s)."""
    answer = await _yaml_post(clients[0], "{{" + " " * 100_000)
    return answer.status_code


async def pattern(clients):
    """An input `pattern: ^(a+)+$` against 100,000 a's and a `!` (was: 29 a's, 18 s)."""
    answer = await clients[0].post("/api/workflows/coded/runs",
                                   json={"inputs": {"code": "a" * 100_000 + "!"}})
    return answer.status_code


async def notation(clients):
    """A parser schema notation of 100,000 spaces (was: 36 s)."""
    text = ("id: w\nblocks:\n  - id: p\n    type: parser\n    with:\n      text: 'x'\n"
            "      schema: 'Array<" + " " * 100_000 + "'\n")
    return (await _yaml_post(clients[0], text)).status_code


async def registry(clients):
    """A registry block whose example hits a bad pattern (was: 5 s)."""
    return (await clients[0].post("/api/blocks", json=BLOCK)).status_code


async def events(clients):
    """Four users' loops of 100,000 passes at once (was: 200,004 events each, 12 s)."""
    answers = await asyncio.gather(*(c.post("/api/workflows/flood/runs?wait=true", json={})
                                     for c in clients[:4]))
    return sorted({a.json().get("status", a.status_code) for a in answers})


async def runs(clients):
    """One user starts 500 long runs at once (was: all accepted), then keeps
    them running while /health is polled for 3 s more."""
    answers = await asyncio.gather(*(clients[0].post("/api/workflows/busy/runs", json={})
                                     for _ in range(500)))
    codes = [a.status_code for a in answers]
    await asyncio.sleep(3)
    return {code: codes.count(code) for code in sorted(set(codes))}


async def requests(clients):
    """One user posts 500 ten-block documents to /api/validate at once (each is
    parsed and checked: no per-user cap but the request rate applies)."""
    document = {"id": "many", "blocks": [{"id": f"b{i}", "type": "set",
                                          "with": {"v": f"{{{{input.x}}}} {i}"}}
                                         for i in range(10)], "inputs": {"x": {"type": "string"}}}
    answers = await asyncio.gather(*(clients[0].post("/api/validate", json=document)
                                     for _ in range(500)))
    codes = [a.status_code for a in answers]
    return {code: codes.count(code) for code in sorted(set(codes))}


async def memory(clients):
    """Two users start 16 runs each of a block asking for 2 GB (was: 32 GB asked of a
    24 GB machine, 9.5 GB held by five runs): the memory budget makes them wait."""
    answers = await asyncio.gather(*(c.post("/api/workflows/hogs/runs?wait=true", json={})
                                     for c in clients[:2] for _ in range(16)))
    states = [a.json().get("status", a.status_code) for a in answers]
    return {state: states.count(state) for state in sorted(set(map(str, states)))}


async def bigdoc(clients):
    """Save the 9,000-block document (886 KB; was: /health held 1.2-1.9 s) and a
    2,000-block one, then 20 validations of them from 4 clients at once (was: p99 1 s)."""
    huge, limit = _big_document(9000), _big_document(2000)
    codes = [(await clients[0].post("/api/workflows", json=huge)).status_code,
             (await clients[0].post("/api/workflows", json=limit)).status_code]

    async def validations(client, count):
        return [(await client.post("/api/validate", json=huge if i % 2 else limit)
                 ).json().get("valid") for i in range(count)]

    valid = sum(await asyncio.gather(*(validations(c, 5) for c in clients[:4])), [])
    return {"saves": codes, "valid": valid.count(True), "refused": valid.count(False)}


async def doubling(clients):
    """Four users run the doubling document four times each at once: each run fails
    at its value limit (a14, 16.4 MB) instead of growing the server until it dies."""
    answers = await asyncio.gather(*(c.post("/api/workflows/doubling/runs?wait=true", json={})
                                     for c in clients[:4] for _ in range(4)))
    failed = [a.json() for a in answers if a.json().get("status") == "failed"]
    where = sorted({bid for body in failed for bid, block in body["blocks"].items()
                    if block["status"] == "failed"})
    return {"failed": len(failed), "of": len(answers), "at": where}


ATTACKS = {"template": template, "pattern": pattern, "notation": notation,
           "registry": registry, "events": events, "runs": runs, "requests": requests,
           "memory": memory, "bigdoc": bigdoc, "doubling": doubling}


async def measure(url: str, keys: list[str], names: list[str], repeat: int,
                  poller_kind: str = "process") -> None:
    clients = [httpx.AsyncClient(base_url=url, timeout=120,
                                 headers={"Authorization": f"Bearer {key}"}) for key in keys]
    coded = ("id: coded\ninputs:\n  code: {type: string, pattern: '" + EVIL + "'}\n"
             "blocks:\n  - {id: s, type: parser, with: {text: '{\"a\": 1}', schema: "
             "{type: object}}}\n")
    await clients[0].put("/api/workflows/coded", content=coded.encode(),
                         headers={"Content-Type": "application/yaml"})
    for client in clients[:4]:
        await client.post("/api/workflows", json=FLOOD)
        await client.post("/api/workflows", json=DOUBLING)
    await clients[0].post("/api/workflows", json=BUSY)
    await clients[0].get("/api/blocks/slow_example")        # load the registry first
    if "memory" in names:
        added = await clients[0].post("/api/blocks", json=HOG)
        assert added.status_code < 300, added.text
        for client in clients[:2]:
            await client.post("/api/workflows", json=HOGS)
    print(f"{'attack':<10} {'health p50':>10} {'p99':>8} {'max':>8} {'gap':>8} {'polls':>6} "
          f"{'attack s':>8}  answer")
    async with httpx.AsyncClient(base_url=url, timeout=120) as health:
        for name in names:
            latencies: list[float] = []
            done = asyncio.Event()

            async def poll() -> None:
                while not done.is_set():
                    started = time.perf_counter()
                    (await health.get("/health")).raise_for_status()
                    latencies.append(time.perf_counter() - started)
                    await asyncio.sleep(0.02)

            if poller_kind == "process":
                process = subprocess.Popen([sys.executable, __file__, "--poll", url],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           text=True)
            else:
                poller = asyncio.create_task(poll())
            await asyncio.sleep(0.1)
            started = time.perf_counter()
            for _ in range(repeat):
                answer = await ATTACKS[name](clients)
            took = time.perf_counter() - started
            gap = 0.0
            if poller_kind == "process":
                out, _ = await asyncio.to_thread(process.communicate, "", 60)
                pairs = [tuple(map(float, x.split(","))) for x in out.split()]
                latencies = [latency for _, latency in pairs]
                print('SLOW', [(round(a,3), round(b*1000)) for a,b in pairs if b>0.05])
                # the longest time /health went unanswered: between two answers
                ends = [start + latency for start, latency in pairs]
                gap = max((b - a for a, b in zip(ends, ends[1:])), default=0.0)
            else:
                done.set()
                await poller
            await _settle(clients[0])
            ms = sorted(x * 1000 for x in latencies)
            p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
            alive = (await health.get("/health")).status_code == 200
            print(f"{name:<10} {statistics.median(ms):>8.1f}ms {p99:>6.1f}ms {ms[-1]:>6.1f}ms "
                  f"{gap * 1000:>6.1f}ms {len(ms):>6} {took:>8.2f}  {answer}"
                  f"{'' if alive else '  SERVER DOWN'}")
    for client in clients:
        await client.aclose()


async def _settle(client: httpx.AsyncClient) -> None:
    """Let runs an attack started end before the next attack is measured."""
    for _ in range(600):
        listed = (await client.get("/api/runs?status=running")).json()
        if not listed.get("runs"):
            return
        await asyncio.sleep(0.1)


def poll_health(url: str) -> None:
    """The poller process: GET /health every 20 ms until standard input closes,
    then print each answer's start and seconds."""
    import threading

    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    latencies = []
    with httpx.Client(base_url=url, timeout=120) as client:
        while not stop.is_set():
            started = time.perf_counter()
            client.get("/health").raise_for_status()
            latencies.append((started, time.perf_counter() - started))
            time.sleep(0.02)
    print(" ".join(f"{start:.6f},{x:.6f}" for start, x in latencies))


def _peak_mb(pid: int) -> str:
    """The server process's peak resident memory, from the kernel's count."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return f"{int(line.split()[1]) / 1024:,.0f}"
    except OSError:
        pass
    return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(ATTACKS), action="append")
    parser.add_argument("--repeat", type=int, default=5, help="times each attack is sent")
    parser.add_argument("--poller", choices=["process", "loop"], default="process",
                        help="poll /health from a process of its own (default) or from "
                             "the attacker's event loop")
    parser.add_argument("--poll", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.poll:
        poll_health(args.poll)
        return
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "PYTHONPATH": "/tmp/probe", "FLOWFORGE_DATABASE_URL": f"sqlite:///{folder}/db.sqlite",
               "FLOWFORGE_SECRET_KEY_FILE": f"{folder}/secret.key"}
        keys = []
        for index, name in enumerate(("ann", "ben", "cat", "dan")):
            made = subprocess.run([FLOWFORGE, "users", "create", name,
                                   *(["--admin"] if index == 0 else [])],
                                  env=env, capture_output=True, text=True, check=True)
            keys.append(made.stdout.strip().splitlines()[-1])
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = subprocess.Popen([FLOWFORGE, "serve", "--port", str(port), "--log-level",
                                   "warning"], env=env, start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=open("/tmp/srv.err","w"))
        url = f"http://127.0.0.1:{port}"
        spy = None
        try:
            for _ in range(300):
                try:
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            spy = None and subprocess.Popen(["/work/main/.venv/bin/py-spy", "record", "--pid", str(server.pid), "--rate", "250", "--format", "raw", "-o", "/tmp/spy.txt", "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            asyncio.run(measure(url, keys, args.only or list(ATTACKS), args.repeat,
                                args.poller))
            os.kill(server.pid, signal.SIGUSR1); time.sleep(0.5)
            print(f"server peak memory (VmHWM): {_peak_mb(server.pid)} MB")
        finally:
            spy and spy.send_signal(signal.SIGINT); spy and spy.wait(20)
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(15)


if __name__ == "__main__":
    main()
