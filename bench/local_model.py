"""The embedded models, measured the way a user meets them (issue 47).

    flock /work/heavy.lock .venv/bin/python bench/local_model.py                  # all parts
    .venv/bin/python bench/local_model.py --part speed --threads 1,2
    .venv/bin/python bench/local_model.py --part chat --models qwen2.5-0.5b
    .venv/bin/python bench/local_model.py --part cache
    .venv/bin/python bench/local_model.py --part support --models qwen2.5-0.5b
    .venv/bin/python bench/local_model.py --part router
    .venv/bin/python bench/local_model.py --part build --models qwen2.5-0.5b
    .venv/bin/python bench/local_model.py --part research --models qwen2.5-0.5b --questions 0

Part `speed`, per model and thread count (`LocalProvider` itself, greedy):
  load_s       loading the GGUF (its hash check included)
  ttft_s       time to the first token of a cold ~600-token prompt (nothing cached)
  prompt_tps   that prompt's tokens / ttft_s
  gen_tps      generated tokens per second after the first one
Part `chat`: the RAG chat (`flowforge.service.chat.ask`, the shipped workflow) on
  five plain questions over examples/policies, each with a fact a person can check
  and the document it comes from; `correct` = the fact is in the answer AND that
  document among its sources.  Seconds per question, and the prompt tokens sent
  against those llama.cpp actually evaluated (the rest came from its KV cache).
Part `support`: the main demo (examples/support.yaml) on six refund questions, three
  inside the 30-day window (the answer must grant it) and three outside (it must refuse
  it); `routed` = a right answer went to the standard response, a wrong one to review.
  Seconds each (in one process: the first includes loading the model).
Part `router`: a router over two branches (billing listed first, then technical support,
  then the same swapped) sends each of a few customer messages; `correct` counts the
  messages sent to the right team in both orders ("The app crashes when I open settings"
  must go to technical support).
Part `build`: `flowforge build`'s thinker on two plain intents (issue 47), each in a
  fresh registry (the starter library, nothing an earlier build wrote): built = the
  pipeline validates; ran = run with a sample input (a number for a number, else a
  sentence), it succeeded; seconds to build and to run, and the stage that failed.
Part `research`: `flowforge research` (`flowforge.service.research.research`) with
  examples/policies as its knowledge base and examples/web as its offline web, one
  session per question (`--questions 0,2` picks them; one at a time keeps a locked
  run short); `correct` = the fact is in the answer AND the document that says it is
  among its sources; `grounded` = every source is a passage the searches returned;
  `--mode full` runs every phase's loop instead of the default (brief on the
  embedded models).
Part `cache`: two different system prompts interleaved (two blocks of one
  workflow taking turns), each asked twice: seconds and tokens evaluated with the
  saved-state cache (`FLOWFORGE_LOCAL_STATES`, default 4) and without it (0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

#: (question, a regex the answer must match, the title of the document that says it)
QUESTIONS: list[tuple[str, str, str]] = [
    ("How many days do I have to ask for a refund?", r"\b30\b|thirty", "Refund Policy"),
    ("How long is the warranty on Acme products?", r"\b(two|2)[ -]years?\b", "Warranty"),
    ("How much does express shipping cost within the country?", r"(?<![\d.,])9[.,]95",
     "Shipping Policy"),
    ("How many points do Summit Club members earn per euro?", r"\b(1|one) point",
     "Loyalty Programme and Gift Cards"),
    ("When do loyalty points expire?", r"24 months|two years|2 years",
     "Loyalty Programme and Gift Cards"),
]

TEXT = (ROOT / "examples" / "policies" / "refunds.md").read_text(encoding="utf-8")


def _provider(model: str, threads: int | None, states: int | None = None) -> Any:
    from flowforge.providers.resolve import ProviderOptions, clear_provider_cache, resolve_model

    clear_provider_cache()
    env = {k: v for k, v in os.environ.items()}
    if threads:
        env["FLOWFORGE_LOCAL_THREADS"] = str(threads)
    if states is not None:
        env["FLOWFORGE_LOCAL_STATES"] = str(states)
    provider, _ = resolve_model(f"local/{model}", ProviderOptions(env=env))
    return provider


async def _ask(provider: Any, system: str, text: str, max_tokens: int) -> Any:
    from flowforge.providers.base import LLMRequest, Message

    return await provider.complete(LLMRequest(
        model="m", messages=[Message("system", system), Message("user", text)],
        max_tokens=max_tokens, temperature=0, stream=True), lambda _: None)


async def speed(model: str, threads: int | None) -> dict[str, Any]:
    provider = _provider(model, threads)
    tick = time.perf_counter()
    provider.loaded()
    load = time.perf_counter() - tick
    # a nonce first, so no earlier call's KV cache covers any of the prompt
    cold = await _ask(provider, f"Session {uuid.uuid4().hex}. You summarise documents.",
                      f"{TEXT}\n\nSummarise this policy in one sentence.", 1)
    ttft = cold.timing.first_token - cold.timing.start
    gen = await _ask(provider, "You are a helpful assistant.",
                     "Count from 1 to 200, separated by commas.", 96)
    generated = gen.usage.completion_tokens - 1
    return {"part": "speed", "model": model, "threads": provider.threads or "llama.cpp",
            "load_s": round(load, 2), "prompt_tokens": cold.usage.prompt_tokens,
            "ttft_s": round(ttft, 2), "prompt_tps": round(cold.usage.prompt_tokens / ttft, 1),
            "gen_tps": round(generated / (gen.timing.end - gen.timing.first_token), 1)}


async def chat(model: str) -> dict[str, Any]:
    from flowforge.knowledge.api import Knowledge
    from flowforge.providers.local import counters
    from flowforge.service.chat import ChatError, ask

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        knowledge = await Knowledge.open(f"sqlite:///{folder}/knowledge.db")
        for name in ("policies", "web"):
            await knowledge.create(name, exist_ok=True)
            await knowledge.add_paths(name, [ROOT / "examples" / name])
        session = None
        for question, fact, title in QUESTIONS:
            before = counters()
            tick = time.perf_counter()
            try:
                answer = await ask(question, kb="policies", web_source="web", model=f"local/{model}",
                                   session_id=session, storage=f"sqlite:///{folder}/runs.db",
                                   services={"knowledge": knowledge})
                text, sources, error = answer.answer, [s.get("title") for s in answer.sources], None
                session = answer.session_id
            except ChatError as exc:
                text, sources, error = "", [], str(exc)
            after = counters()
            row = {"question": question, "seconds": round(time.perf_counter() - tick, 1),
                   "fact": bool(re.search(fact, text, re.I)), "cited": title in sources,
                   "sent": after["sent"] - before["sent"],
                   "evaluated": after["evaluated"] - before["evaluated"],
                   "answer": text[:160], "sources": sources, "error": error}
            row["correct"] = row["fact"] and row["cited"]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        await knowledge.close()
    seconds = [r["seconds"] for r in rows]
    return {"part": "chat", "model": model, "correct": sum(r["correct"] for r in rows),
            "fact": sum(r["fact"] for r in rows), "cited": sum(r["cited"] for r in rows),
            "of": len(rows), "seconds_median": statistics.median(seconds),
            "seconds_max": max(seconds), "tokens_sent": sum(r["sent"] for r in rows),
            "tokens_evaluated": sum(r["evaluated"] for r in rows)}


#: (question, whether a refund is allowed): six ages, inside and outside the window
REFUNDS: list[tuple[str, bool]] = [
    ("Can I get a refund on an order I placed three weeks ago?", True),
    ("Can I get a refund on an order I placed two months ago?", False),
    ("My order was delivered two months ago. Can I still get a refund?", False),
    ("I bought a jacket 10 days ago and it doesn't fit. Can I return it for a refund?", True),
    ("My order arrived 45 days ago. Can I get my money back?", False),
    ("I ordered a tent yesterday. Can I get a refund?", True),
]
#: what an answer granting a refund says, and what one refusing it says
GRANTS = r"\byes\b|\bcan (get|receive|request|ask|return)|\bare eligible|\bis eligible"
REFUSES = r"\bnot eligible|\bcannot|\bcan't|\bcan not\b|\bno\b|\bunfortunately|\bonly within"


def _answers_right(text: str, allowed: bool) -> bool:
    if allowed:
        return bool(re.search(GRANTS, text, re.I)) and not re.search(REFUSES, text, re.I)
    return bool(re.search(REFUSES, text, re.I)) and not re.search(r"\byes\b", text, re.I)


async def support(model: str) -> dict[str, Any]:
    import flowforge
    from flowforge.knowledge.api import Knowledge

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        knowledge = await Knowledge.open(f"sqlite:///{folder}/knowledge.db")
        for question, allowed in REFUNDS:
            tick = time.perf_counter()
            result = await flowforge.run(ROOT / "examples" / "support.yaml", {"query": question},
                                         model=f"local/{model}", storage=False,
                                         services={"knowledge": knowledge})
            text = str((result.results.get("answer") or {}).get("content") or "")
            correct = _answers_right(text, allowed)
            # a right answer goes to the customer, a wrong one to review
            routed = list(result.outputs) == (["standard"] if correct else ["review"])
            row = {"question": question, "seconds": round(time.perf_counter() - tick, 1),
                   "correct": correct, "routed": routed, "route": list(result.outputs),
                   "answer": text[:200], "facts": (result.results.get("window") or {}).get("note"),
                   "claim": (result.results.get("claim") or {}).get("refund"),
                   "scores": {k: (result.results.get("grade") or {}).get(k)
                              for k in ("completeness", "clarity")}}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        await knowledge.close()
    return {"part": "support", "model": model, "correct": sum(r["correct"] for r in rows),
            "routed": sum(r["routed"] for r in rows), "of": len(rows),
            "seconds": [r["seconds"] for r in rows]}


#: (a customer's message, the team that handles it)
MESSAGES: list[tuple[str, str]] = [
    ("The app crashes when I open settings", "technical"),
    ("I was charged twice for my order", "billing"),
    ("I cannot log in, the page shows error 500", "technical"),
    ("Please send me an invoice for last month", "billing"),
]
_BRANCHES = {
    "billing": {"id": "billing", "type": "response", "name": "Billing", "after": ["route"],
                "description": "Payments, invoices, charges and refunds",
                "with": {"message": "billing"}},
    "technical": {"id": "technical", "type": "response", "name": "Technical Support",
                  "after": ["route"],
                  "description": "Bugs, crashes, error messages and problems using the app",
                  "with": {"message": "technical"}},
}


async def router(model: str) -> dict[str, Any]:
    import flowforge

    rows = []
    for order in (["billing", "technical"], ["technical", "billing"]):
        doc = {"version": 1, "id": "router-bench", "inputs": {"q": {"type": "string"}},
               "blocks": [{"id": "route", "type": "router",
                           "with": {"prompt": "Send the customer's message to the team that "
                                              "handles it. Message: {{input.q}}"}},
                          *[_BRANCHES[name] for name in order]]}
        for message, team in MESSAGES:
            tick = time.perf_counter()
            result = await flowforge.run(doc, {"q": message}, model=f"local/{model}",
                                         storage=False)
            chosen = (result.results.get("route") or {}).get("selectedRoute")
            row = {"order": order, "message": message, "chosen": chosen,
                   "correct": chosen == team, "seconds": round(time.perf_counter() - tick, 1)}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    crash = [r for r in rows if r["message"] == MESSAGES[0][0]]
    return {"part": "router", "model": model, "correct": sum(r["correct"] for r in rows),
            "of": len(rows), "crash_to_technical": sum(r["correct"] for r in crash),
            "crash_of": len(crash), "seconds_median": statistics.median(
                r["seconds"] for r in rows)}


#: (intent, a sample value for a number input, one for a text input)
INTENTS: list[str] = ["Count the words of a text and summarise it",
                      "Convert a temperature from Celsius to Fahrenheit"]
SAMPLE_TEXT = ("The quick brown fox jumps over the lazy dog. The dog sleeps in the sun "
               "while the fox runs into the forest.")


def _sample_inputs(pipeline: dict[str, Any], registry: Any) -> dict[str, Any]:
    """A value for every run input the pipeline reads: 100 for a number, else text."""
    from flowforge.formats.pipeline_json import pipeline_to_workflow

    inputs = pipeline_to_workflow(pipeline, registry).get("inputs") or {}
    return {name: 100 if (schema or {}).get("type") in ("number", "integer") else SAMPLE_TEXT
            for name, schema in inputs.items()}


async def build(model: str) -> list[dict[str, Any]]:
    from flowforge.apps.thinker.builder import build_pipeline
    from flowforge.errors import FlowforgeError
    from flowforge.registry import Registry
    from flowforge.service.pipeline import run_pipeline

    rows = []
    for intent in INTENTS:
        registry = Registry.open(":memory:")
        plan: list[str] = []
        tick = time.perf_counter()
        built = await build_pipeline(intent, model=f"local/{model}", registry=registry,
                                     on_event=lambda e: plan.extend(
                                         f"{b['name']} ({b['execution_type']})"
                                         for b in e["blocks"])
                                     if e["type"] == "decompose_blocks" else None)
        row: dict[str, Any] = {"part": "build", "model": model, "intent": intent,
                               "built": built.ok, "build_s": round(time.perf_counter() - tick, 1),
                               "failed_stage": None if built.ok else
                               (built.error or "").split(":")[0],
                               "error": None if built.ok else (built.error or "")[:300],
                               "plan": plan,
                               "blocks": [n["block_id"] for n in (built.pipeline or {})
                                          .get("nodes", [])],
                               "created": built.created, "ran": False, "run_s": None}
        if built.ok:
            inputs = _sample_inputs(built.pipeline, registry)
            tick = time.perf_counter()
            try:
                ran = await run_pipeline(built.pipeline, inputs, model=f"local/{model}",
                                         registry=registry, storage=False)
                row["ran"] = ran.status == "succeeded"
                row["outputs"] = json.dumps(ran.outputs, default=str)[:300]
                if not row["ran"]:
                    row["error"] = json.dumps({k: v.get("error") for k, v in
                                               ran.to_dict()["blocks"].items()
                                               if v.get("error")}, default=str)[:300]
            except FlowforgeError as exc:
                row["error"] = str(exc)[:300]
            row["run_s"] = round(time.perf_counter() - tick, 1)
            row["inputs"] = inputs
        row["passed"] = row["built"] and row["ran"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


#: (question, a regex the answer must match, the document that says it), over
#: examples/policies (the knowledge base) and examples/web (the offline web)
RESEARCH: list[tuple[str, str, str]] = [
    ("How long is the warranty on a tent from the Summit line?", r"lifetime", "Warranty"),
    ("How long is the warranty on Acme products?", r"\b(two|2)[ -]years?\b", "Warranty"),
    ("When do loyalty points expire?", r"24 months|two years|2 years",
     "Loyalty Programme and Gift Cards"),
    ("Which end of a tent should face the wind?", r"narrow|lowest",
     "https://trail-guide.example.net/pitching-a-tent-in-wind"),
]


async def research(model: str, picked: list[int], mode: str) -> dict[str, Any]:
    from flowforge.knowledge.api import Knowledge
    from flowforge.service.research import research as research_session

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        knowledge = await Knowledge.open(f"sqlite:///{folder}/knowledge.db")
        for name in ("policies", "web"):
            await knowledge.create(name, exist_ok=True)
            await knowledge.add_paths(name, [ROOT / "examples" / name])
        for index in picked:
            question, fact, source = RESEARCH[index]
            load = os.getloadavg()[0]
            tick = time.perf_counter()
            result = await research_session(
                question, kb="policies", web_source="web", model=f"local/{model}",
                brief={"auto": None, "brief": True, "full": False}[mode],
                storage=f"sqlite:///{folder}/runs.db", services={"knowledge": knowledge})
            answer = result.phases.get("answer") or {}
            gathered = {p["source"] for p in answer.get("passages") or []}
            text = result.answer or ""
            row = {"question": question, "mode": mode, "status": result.status,
                   "seconds": round(time.perf_counter() - tick, 1), "load": round(load, 2),
                   "fact": bool(re.search(fact, text, re.I)), "cited": source in result.sources,
                   "grounded": all(s in gathered for s in result.sources),
                   "answer": text[:200], "sources": result.sources,
                   "unverified": result.unverified_sources, "error": result.error}
            row["correct"] = row["fact"] and row["cited"] and row["grounded"]
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        await knowledge.close()
    return {"part": "research", "model": model, "mode": mode,
            "correct": sum(r["correct"] for r in rows), "of": len(rows),
            "seconds": [r["seconds"] for r in rows]}


async def cache(model: str, states: int) -> dict[str, Any]:
    from flowforge.providers.local import counters

    provider = _provider(model, None, states)
    provider.loaded()
    nonce = uuid.uuid4().hex
    systems = [f"Session {nonce}. You answer refund questions from this policy.\n\n{TEXT}",
               f"Session {nonce}. You grade answers from 0 to 10 against this policy.\n\n{TEXT}"]
    before = counters()
    tick = time.perf_counter()
    for turn in ("Can I get a refund after 3 weeks?", "Are gift cards refunded?"):
        for system in systems:          # block A, block B, block A, block B
            await _ask(provider, system, turn, 1)
    after = counters()
    return {"part": "cache", "model": model, "states": states,
            "seconds": round(time.perf_counter() - tick, 1),
            "sent": after["sent"] - before["sent"],
            "evaluated": after["evaluated"] - before["evaluated"]}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["speed", "chat", "cache", "support", "router",
                                           "build", "research", "all"], default="all")
    parser.add_argument("--questions", default="",
                        help="comma-separated indexes of RESEARCH for `research` (default: all)")
    parser.add_argument("--mode", choices=["auto", "brief", "full"], default="auto",
                        help="`research`: brief / full, or auto (brief on the embedded models)")
    parser.add_argument("--models", default="smollm2,qwen2.5-0.5b")
    parser.add_argument("--threads", default="",
                        help="comma-separated thread counts for `speed` (default: flowforge's)")
    args = parser.parse_args()
    os.environ.pop("FLOWFORGE_DEFAULT_MODEL", None)
    for model in args.models.split(","):
        if args.part in ("speed", "all"):
            for threads in [int(t) for t in args.threads.split(",") if t] or [None]:
                print(json.dumps(await speed(model, threads)), flush=True)
        if args.part in ("cache", "all"):
            for states in (0, 4):
                print(json.dumps(await cache(model, states)), flush=True)
        if args.part in ("chat", "all"):
            print(json.dumps(await chat(model)), flush=True)
        if args.part in ("support", "all"):
            print(json.dumps(await support(model)), flush=True)
        if args.part in ("router", "all"):
            print(json.dumps(await router(model)), flush=True)
        if args.part in ("research", "all"):
            picked = [int(i) for i in args.questions.split(",") if i] or \
                list(range(len(RESEARCH)))
            print(json.dumps(await research(model, picked, args.mode)), flush=True)
        if args.part in ("build", "all"):
            rows = await build(model)
            print(json.dumps({"part": "build", "model": model,
                              "passed": sum(r["passed"] for r in rows), "of": len(rows)}),
                  flush=True)


if __name__ == "__main__":
    asyncio.run(main())
