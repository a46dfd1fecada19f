"""On Redis a worker takes its messages itself (`RedisConsumer`): it runs runs
without importing Celery or Kombu, whose application cost every worker start
~0.25 s of CPU; only a message to send (a reaper's takeover, a due run) needs
them.  Nor does its start load the pipeline builder or an HTTP client (~0.2 s
more), which only a build or a webhook needs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from flowforge.service.pool import enqueue
from flowforge.storage import storage_from_url
from tests.workers.test_pool import chain, ended, wait_for

#: Imported first by the worker (`--import`): Celery and Kombu stay installed (the
#: worker checks that they are), but importing either fails.
NO_CELERY = '''
import importlib.abc
import importlib.machinery
import sys


class Refused(importlib.abc.Loader):
    def create_module(self, spec):
        raise ImportError(f"{spec.name} may not be imported by this worker")

    def exec_module(self, module):
        raise ImportError(f"{module.__name__} may not be imported by this worker")


class NoCelery(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("celery", "kombu"):
            return importlib.machinery.ModuleSpec(name, Refused())
        return None


sys.meta_path.insert(0, NoCelery())
'''


async def test_a_worker_on_redis_runs_runs_without_celery(pool, tmp_path):
    blocker = tmp_path / "no_celery.py"
    blocker.write_text(NO_CELERY)
    worker = pool.start(options=("--import", str(blocker)))
    pool.wait_ready(worker)
    storage = storage_from_url(pool.database)
    await storage.open()
    try:
        run_id = await enqueue(chain(2, 0.02, tmp_path / "steps.log"), storage=storage,
                               queue=pool.queue)
        row = await wait_for(storage, run_id, ended)
        assert row["status"] == "succeeded", row
        assert (tmp_path / "steps.log").read_text().count("end") == 2
    finally:
        await storage.close()
    assert worker.poll() is None           # still serving: nothing it did needed Celery


def test_a_worker_s_start_loads_neither_the_builder_nor_an_http_client(tmp_path):
    """What `flowforge worker` does before it says it is ready, in a fresh
    process: its modules, the loaders' warm-up, the run database opened.  A
    worker loads stored documents, which are flowforge documents: the
    foreign formats' converters (Pipeline JSON's among them) stay unloaded."""
    started = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        import flowforge.cli.worker
        from flowforge.service.pool.work import prepare_worker
        prepare_worker("sqlite:///{tmp_path / 'runs.db'}")
        print("flowforge.formats.pipeline_json" in sys.modules, *sorted(
            name for name in ("httpx", "flowforge.apps.thinker.thinker",
                              "flowforge.apps.thinker.clarifier")
            if name in sys.modules))
        """)], capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ["False"]
