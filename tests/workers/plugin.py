"""Functions the worker tests' workflows call, imported by each worker
(`flowforge worker --import tests/workers/plugin.py`): steps that sleep and
log their start and end, with the idempotency key they were given."""

import asyncio
import os

import flowforge


@flowforge.function("ww_step")
async def ww_step(n: int, seconds: float = 0.05, log: str = "", idempotency_key: str = "") -> dict:
    if log:
        with open(log, "a") as out:
            out.write(f"start {n} {idempotency_key} {os.getpid()}\n")
    await asyncio.sleep(seconds)
    if log:
        with open(log, "a") as out:
            out.write(f"end {n} {idempotency_key} {os.getpid()}\n")
    return {"n": n}
