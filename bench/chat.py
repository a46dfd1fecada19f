"""The RAG chat on 30 questions of our own over examples/policies: half answerable
from the knowledge base, half only from the offline web stand-in (examples/web).

    .venv/bin/python bench/chat.py                 # both parts
    .venv/bin/python bench/chat.py --part overhead # only the scripted-model part (seconds)
    .venv/bin/python bench/chat.py --part local --limit 6

Part `local` (the embedded SmolLM2-135M, what a fresh machine runs):
  compliance   the knowledge base searched first AND the answer given through
               generate_response, of all questions (the KB call is forced on the
               first turn, generate_response on the re-ask)
  choice       KB questions answered without web_search, web questions with it
  citations    answers with at least one source
  seconds      per answer (p50, p90), and the model's share of it

Part `overhead` (a scripted model that answers instantly, the same tools and
knowledge bases): what the chat adds per question beyond the model and the tools'
own work - the workflow run, argument validation, events, the run record and the
session - against the same loop written with LangGraph's `create_react_agent`
(tools doing the same search), measured in the same process.  Target: < 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

QUESTIONS: list[tuple[str, str]] = [
    # answerable from the knowledge base (examples/policies)
    ("How many days do I have to ask for a refund?", "kb"),
    ("Are sale items refunded in cash?", "kb"),
    ("How long is the warranty on a backpack from the Summit line?", "kb"),
    ("Does the warranty cover accidental damage?", "kb"),
    ("How much does express shipping cost within the country?", "kb"),
    ("When does an order placed at 3 pm leave the warehouse?", "kb"),
    ("How many points do Summit Club members earn per euro?", "kb"),
    ("When do loyalty points expire?", "kb"),
    ("Can a voucher be exchanged for cash?", "kb"),
    ("How long is a return label valid after printing?", "kb"),
    ("Do you store my payment card number?", "kb"),
    ("When is the contract formed after I order?", "kb"),
    ("Which countries can pay by invoice?", "kb"),
    ("How much extra time do personalised items need?", "kb"),
    ("Can I exchange an item instead of getting a refund?", "kb"),
    # only the offline web stand-in (examples/web) has the answer
    ("What does EU law say about the right of withdrawal for online purchases?", "web"),
    ("How much CO2 does a standard parcel delivery cause?", "web"),
    ("At what temperature should I wash a waterproof jacket?", "web"),
    ("How do I pitch a tent in strong wind?", "web"),
    ("How long do I have to open a PayPal dispute?", "web"),
    ("What does the comfort rating of a sleeping bag mean?", "web"),
    ("At what altitude does altitude sickness start?", "web"),
    ("What is the standard VAT rate in Austria?", "web"),
    ("Can spare lithium batteries be sent by air mail?", "web"),
    ("How should I dry a merino base layer?", "web"),
    ("How much space should there be in front of the toes in a hiking boot?", "web"),
    ("Does a hollow-fibre water filter remove viruses?", "web"),
    ("On which frequency do avalanche transceivers transmit?", "web"),
    ("How long should trekking poles be on a descent?", "web"),
    ("How quickly must a company answer a GDPR access request?", "web"),
]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _setup(folder: str) -> tuple[Any, str]:
    from flowforge.knowledge.api import Knowledge

    knowledge = await Knowledge.open(f"sqlite:///{folder}/knowledge.db")
    for name in ("policies", "web"):
        await knowledge.create(name, exist_ok=True)
        await knowledge.add_paths(name, [ROOT / "examples" / name])
    return knowledge, f"sqlite:///{folder}/runs.db"


async def local_part(limit: int | None) -> dict[str, Any]:
    from flowforge.service.chat import ChatError, ask

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        knowledge, storage = await _setup(folder)
        for question, kind in QUESTIONS[:limit] if limit else QUESTIONS:
            model_ms: list[float] = []
            events: list[dict] = []

            def on_event(event: dict) -> None:
                events.append(event)
                if event["type"] == "llm_response":
                    answered = event.get("response") or {}
                    model_ms.append(float(answered.get("duration_ms") or 0))

            started = time.perf_counter()
            try:
                answer = await ask(question, kb="policies", web_source="web", storage=storage,
                                   services={"knowledge": knowledge}, on_event=on_event)
                tools, sources, error = answer.tool_calls, answer.sources, None
            except ChatError as exc:
                tools = [e["name"] for e in events if e["type"] == "tool_called"]
                sources, error = [], str(exc)
            seconds = time.perf_counter() - started
            ok_tools = [t for t, e in zip(tools, [e for e in events
                                                  if e["type"] == "tool_called"])
                        if e.get("status") == "ok"] if error else tools
            rows.append({"question": question, "kind": kind, "seconds": seconds,
                         "model_seconds": sum(model_ms) / 1000, "tools": tools,
                         "compliant": error is None and bool(tools)
                         and tools[0] == "knowledge_base_search"
                         and tools[-1] == "generate_response",
                         "used_web": "web_search" in ok_tools, "cited": bool(sources),
                         "error": error})
            print(json.dumps({k: rows[-1][k] for k in ("kind", "seconds", "compliant",
                                                        "used_web", "cited", "error")},
                             default=str), file=sys.stderr)
        await knowledge.close()
    n = len(rows)
    choice = sum(1 for r in rows if r["used_web"] == (r["kind"] == "web"))
    return {"part": "local", "model": "local/smollm2", "questions": n,
            "compliance": round(sum(r["compliant"] for r in rows) / n, 3),
            "choice_accuracy": round(choice / n, 3),
            "choice_kb_questions": round(sum(not r["used_web"] for r in rows
                                             if r["kind"] == "kb") /
                                         max(1, sum(r["kind"] == "kb" for r in rows)), 3),
            "choice_web_questions": round(sum(r["used_web"] for r in rows
                                              if r["kind"] == "web") /
                                          max(1, sum(r["kind"] == "web" for r in rows)), 3),
            "citation_presence": round(sum(r["cited"] for r in rows) / n, 3),
            "seconds_p50": round(_pct([r["seconds"] for r in rows], 0.5), 2),
            "seconds_p90": round(_pct([r["seconds"] for r in rows], 0.9), 2),
            "model_share": round(sum(r["model_seconds"] for r in rows) /
                                 sum(r["seconds"] for r in rows), 3),
            "errors": [r["error"][:160] for r in rows if r["error"]][:5]}


def _scripted_plan() -> Any:
    """kb search -> generate_response, citing the first title found."""
    from flowforge.providers.base import LLMResponse, ToolCall, Usage

    def script(messages, tools):
        results = [m for m in messages if m.role == "tool"]
        if not results:
            question = messages[-1].content.rsplit("Question:", 1)[-1].strip()
            return LLMResponse(text="", tool_calls=[ToolCall("c1", "knowledge_base_search",
                                                             {"query": question[:200]})],
                               usage=Usage(1, 1), finish_reason="tool_calls")
        found = json.loads(results[-1].content)
        title = (found.get("metadata") or [{}])[0].get("title") or "Refund Policy"
        return LLMResponse(text="", tool_calls=[ToolCall("c2", "generate_response", {
            "answer": "From the policies.", "sources": [title], "confidence_score": 0.8,
            "used_internal_kb": True, "used_external_kb": False})],
            usage=Usage(1, 1), finish_reason="tool_calls")
    return script


async def overhead_part(rounds: int) -> dict[str, Any]:
    from flowforge.providers.scripted import register_script
    from flowforge.service.chat import ask

    register_script("bench_chat", _scripted_plan())
    questions = [q for q, _ in QUESTIONS]
    with tempfile.TemporaryDirectory() as folder:
        knowledge, storage = await _setup(folder)
        from flowforge.storage import storage_from_url
        store = storage_from_url(storage)
        await store.open()
        for question in questions[:3]:           # warm-up: models, caches, connections
            await ask(question, kb="policies", model="scripted/bench_chat", storage=store,
                      services={"knowledge": knowledge})
        ours: list[float] = []
        ours_in_memory: list[float] = []
        for _ in range(rounds):
            for question in questions:
                tool_ms: list[float] = []

                def on_event(event: dict) -> None:
                    if event["type"] == "tool_called":
                        tool_ms.append(float(event.get("duration_ms") or 0))

                started = time.perf_counter()
                await ask(question, kb="policies", model="scripted/bench_chat", storage=store,
                          services={"knowledge": knowledge}, on_event=on_event)
                ours.append((time.perf_counter() - started) * 1000 - sum(tool_ms))
        # the same workflow without a run record or session: the engine's share
        import flowforge
        from flowforge.apps.chat import CHAT_WORKFLOW
        compiled = flowforge.load(CHAT_WORKFLOW)
        for _ in range(rounds):
            for question in questions:
                tool_ms = []

                def on_tool(event: dict) -> None:
                    if event["type"] == "tool_called":
                        tool_ms.append(float(event.get("duration_ms") or 0))

                started = time.perf_counter()
                await flowforge.run(compiled, {"query": question, "kb": "policies"},
                                    model="scripted/bench_chat", storage=False,
                                    services={"knowledge": knowledge}, on_event=on_tool)
                ours_in_memory.append((time.perf_counter() - started) * 1000 - sum(tool_ms))
        peer = await _langgraph_overhead(knowledge, questions, rounds)
        await store.close()
        await knowledge.close()
    result = {"part": "overhead", "questions": len(questions) * rounds,
              "flowforge_ms_p50": round(statistics.median(ours), 2),
              "flowforge_ms_p90": round(_pct(ours, 0.9), 2),
              "flowforge_no_record_ms_p50": round(statistics.median(ours_in_memory), 2)}
    if peer:
        result["langgraph_ms_p50"] = round(statistics.median(peer), 2)
        result["ratio_langgraph_over_flowforge_no_record"] = round(
            statistics.median(peer) / statistics.median(ours_in_memory), 2)
        result["ratio_langgraph_over_flowforge_recorded"] = round(
            statistics.median(peer) / statistics.median(ours), 2)
    return result


async def _langgraph_overhead(knowledge: Any, questions: list[str], rounds: int
                              ) -> list[float] | None:
    """The same two-tool loop with LangGraph's prebuilt ReAct agent and a fake model."""
    import warnings

    warnings.filterwarnings("ignore", message=".*create_react_agent has been moved.*")
    try:
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.tools import tool
        from langgraph.prebuilt import create_react_agent
    except ImportError:
        return None
    spent: list[float] = []

    @tool
    async def knowledge_base_search(query: str, kb_id: str = "policies", top_k: int = 3) -> str:
        """Search the knowledge base."""
        started = time.perf_counter()
        found = await knowledge.search(kb_id, query, top_k=top_k)
        spent.append((time.perf_counter() - started) * 1000)
        return json.dumps({"chunks": [r["content"] for r in found["results"]]})

    @tool
    def generate_response(answer: str, sources: list[str], used_internal_kb: bool,
                          used_external_kb: bool, confidence_score: float = 0.5) -> str:
        """Give the final answer."""
        return answer

    class Model(GenericFakeChatModel):
        def bind_tools(self, tools, **kwargs):           # the fake model ignores tools
            return self

    timings = []
    for _ in range(rounds):
        for question in questions:
            messages = iter([
                AIMessage(content="", tool_calls=[{"name": "knowledge_base_search", "id": "1",
                                                   "args": {"query": question[:200]}}]),
                AIMessage(content="", tool_calls=[{"name": "generate_response", "id": "2",
                                                   "args": {"answer": "From the policies.",
                                                            "sources": ["Refunds"],
                                                            "used_internal_kb": True,
                                                            "used_external_kb": False}}]),
                AIMessage(content="From the policies.")])
            agent = create_react_agent(Model(messages=messages),
                                       [knowledge_base_search, generate_response])
            spent.clear()
            started = time.perf_counter()
            await agent.ainvoke({"messages": [("user", question)]})
            timings.append((time.perf_counter() - started) * 1000 - sum(spent))
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["local", "overhead", "both"], default="both")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N questions.")
    parser.add_argument("--rounds", type=int, default=3, help="Overhead rounds of 30.")
    args = parser.parse_args()
    os.environ.setdefault("FLOWFORGE_KNOWLEDGE_URL", "sqlite:///:memory:")
    if args.part in ("overhead", "both"):
        print(json.dumps(asyncio.run(overhead_part(args.rounds))))
    if args.part in ("local", "both"):
        print(json.dumps(asyncio.run(local_part(args.limit))))


if __name__ == "__main__":
    main()
