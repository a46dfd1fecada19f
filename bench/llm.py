"""LLM layer speed, measured in one process on this machine.

    .venv/bin/python bench/llm.py [--repeat 5] [--tokens 128] [--iterations 50]

L1  local provider generation speed: `call_model("local/smollm2", ...)` against
    llama-cpp-python's `create_chat_completion` called directly on the same
    loaded model, same prompt, greedy decoding, runs interleaved (target: ratio
    provider/direct >= 0.95).
L2  the agent block's tool loop overhead per iteration with a scripted model
    (no latency) and a no-op function tool: (T(N iterations) - T(1)) / (N - 1),
    so run set-up is excluded (target: < 1 ms).  Measured with an async tool
    and with a sync one (which the executor runs in a worker thread).

Prints one JSON line per measurement; each figure is the median of `--repeat`
measurements after a warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import flowforge  # noqa: E402
from flowforge.providers.base import LLMRequest, Message  # noqa: E402
from flowforge.providers.call import call_model  # noqa: E402
from flowforge.providers.resolve import resolve_model  # noqa: E402

PROMPT = [{"role": "system", "content": "You are a helpful assistant."},
          {"role": "user", "content": "Write a short story about a robot who learns to paint."}]


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


async def local_generation(repeat: int, tokens: int) -> None:
    provider, _ = resolve_model("local/smollm2")
    llama = provider.loaded().llama
    request = LLMRequest(model="smollm2", messages=[Message(m["role"], m["content"])
                                                    for m in PROMPT],
                         max_tokens=tokens, temperature=0)

    def direct() -> tuple[int, float]:
        start = time.perf_counter()
        answer = llama.create_chat_completion(PROMPT, max_tokens=tokens, temperature=0)
        return answer["usage"]["completion_tokens"], time.perf_counter() - start

    async def ours() -> tuple[int, float]:
        start = time.perf_counter()
        response = await call_model("local/smollm2", request)
        return response.usage.completion_tokens, time.perf_counter() - start

    direct(), await ours()                      # warm-up: load, caches
    rates: dict[str, list[float]] = {"direct": [], "provider": []}
    counts: dict[str, int] = {}
    for _ in range(repeat):                     # interleaved, so drift hits both alike
        for name in ("direct", "provider"):
            count, seconds = direct() if name == "direct" else await ours()
            counts[name] = count
            rates[name].append(count / seconds)
    direct_rate = statistics.median(rates["direct"])
    ours_rate = statistics.median(rates["provider"])
    emit(bench="L1 local generation", model="local/smollm2 (SmolLM2-135M Q4_1)",
         threads=provider.threads, completion_tokens=counts,
         direct_tokens_per_s=round(direct_rate, 2), provider_tokens_per_s=round(ours_rate, 2),
         ratio=round(ours_rate / direct_rate, 3), target=">= 0.95")


@flowforge.function("bench_llm_async_noop")
async def bench_llm_async_noop(step: int = 0) -> dict:
    return {"ok": step}


@flowforge.function("bench_llm_sync_noop")
def bench_llm_sync_noop(step: int = 0) -> dict:
    return {"ok": step}


def _agent_workflow(iterations: int, model: str, tool: str) -> dict:
    return {"id": "bench-agent", "blocks": [{
        "id": "agent", "type": "agent",
        "with": {"prompt": "go", "model": model, "tools": [tool],
                 "max_iterations": iterations + 1, "stream": False}}]}


async def agent_loop(repeat: int, iterations: int, tool: str) -> None:
    try:
        import flowforge.blocks.agent  # noqa: F401
    except ImportError:
        emit(bench="L2 agent tool loop", error="the agent block is not available")
        return
    from flowforge.providers.scripted import register_script

    def script(messages, tools):
        # the last message tells where we are: O(1), so the script costs nothing per turn
        step = json.loads(messages[-1].content)["ok"] if messages[-1].role == "tool" else -1
        if step + 1 < script.turns:
            return {"tool_calls": [{"name": tool, "arguments": {"step": step + 1}}]}
        return "done"

    register_script(f"bench_loop_{tool}", script)   # one name per tool: providers are cached
    model = f"scripted/bench_loop_{tool}"

    async def timed(turns: int) -> float:
        script.turns = turns
        start = time.perf_counter()
        result = await flowforge.run(_agent_workflow(turns, model, tool), {}, storage=False)
        elapsed = time.perf_counter() - start
        agent = result.results["agent"]
        if result.status != "succeeded" or agent["toolCalls"]["count"] != turns:
            raise RuntimeError(f"agent run did not loop {turns} times: {result.status} "
                               f"{result.blocks['agent'].error}")
        return elapsed

    await timed(1), await timed(iterations)     # warm-up
    per_iteration = []
    for _ in range(repeat):
        long, short = await timed(iterations), await timed(1)
        per_iteration.append((long - short) / (iterations - 1))
    value = statistics.median(per_iteration)
    emit(bench="L2 agent tool loop", model=model, tool=tool, iterations=iterations,
         overhead_per_iteration_ms=round(value * 1000, 4), target="< 1 ms")


async def main() -> None:
    parser = argparse.ArgumentParser(description="LLM layer benchmarks")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--only", choices=["L1", "L2"])
    args = parser.parse_args()
    emit(bench="machine", python=platform.python_version(), cpus=os.cpu_count(),
         platform=platform.platform())
    if args.only in (None, "L1"):
        await local_generation(args.repeat, args.tokens)
    if args.only in (None, "L2"):
        await agent_loop(args.repeat, args.iterations, "bench_llm_async_noop")
        await agent_loop(args.repeat, args.iterations, "bench_llm_sync_noop")


if __name__ == "__main__":
    asyncio.run(main())
