"""Record the build transcripts in this folder: sentence -> clarifier ->
thinker -> Pipeline JSON -> run, for three intents, with the scripted rules
files beside this script (so they are reproducible offline).

    .venv/bin/python examples/build/record.py        # rewrites *.transcript.md

`tests/thinker/test_transcripts.py` checks the committed transcripts match
a fresh recording, so they never drift from what the code does.  With a
real model the same commands work unchanged: replace the `--model`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

INTENTS: dict[str, dict[str, Any]] = {
    "word-summary": {
        "intent": "Count the words of a text and summarise it",
        "answers": [],
        "inputs": {"text": "Cats purr. Cats sleep. Dogs bark."},
    },
    "temperature-average": {
        "intent": "Average some Fahrenheit temperatures",
        "answers": ["A list I give when it runs; the average in Celsius"],
        "inputs": {"temps_f": [32, 50, 212]},
    },
    "review-reply": {
        "intent": "Write a polite reply to a customer review",
        "answers": [],
        "inputs": {"review": "The pizza arrived cold."},
        "user": "ana",
    },
}


def _block(text: str, lang: str = "") -> str:
    return f"```{lang}\n{text.rstrip()}\n```"


def _event(event: dict[str, Any]) -> str:
    kind = event["type"]
    # Times vary and `prompts`/`response` repeat `messages`/`text`: left out.
    data = {k: v for k, v in event.items()
            if k not in ("seq", "type", "run_id", "time", "ts", "elapsed", "prompts", "response")}
    if kind == "llm_prompt":
        parts = [f"**{event['seq']}. llm_prompt** ({event['stage']}, {event['model']})"]
        for message in event["messages"]:
            parts.append(f"{message['role']}:\n" + _block(message["content"] or ""))
        return "\n\n".join(parts)
    if kind == "llm_response":
        text = event.get("text")
        try:
            text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except (TypeError, ValueError):
            pass
        return f"**{event['seq']}. llm_response** ({event['stage']})\n\n" + \
            _block(text or event.get("error", ""), "json")
    if kind == "block_created":
        data = {k: v for k, v in data.items() if k not in ("definition", "block")}
    if kind == "stage_result" and "pipeline_json" in data:
        data = {k: v for k, v in data.items() if k != "pipeline_json"}
    if kind == "complete":
        data = {k: v for k, v in data.items() if k != "pipeline"}
        data["result"] = {**data["result"], "pipeline_json": "(the Pipeline JSON below)"}
    return f"**{event['seq']}. {kind}** `{json.dumps(data, ensure_ascii=False, default=str)}`"


async def record(name: str) -> str:
    """The transcript of one intent, as Markdown (no times, no random ids).
    Run from the repository root."""
    from flowforge.apps.thinker import BuildEvents, build, clarify
    from flowforge.registry import Registry, set_registry
    from flowforge.service.pipeline import run_pipeline

    spec = INTENTS[name]
    # Relative to the repository root (the current directory), so transcripts
    # read the same on every machine.
    model = shown_model = f"scripted/examples/build/{name}.rules.yaml"
    with tempfile.TemporaryDirectory() as folder:
        registry = Registry.open(f"sqlite:///{folder}/registry.db", search="text")
        set_registry(registry)
        try:
            lines = [f"# Build transcript: {spec['intent']}", "",
                     "Recorded by `examples/build/record.py` with the scripted model "
                     f"`{shown_model}`; the same command takes a real model with `--model`.",
                     "", "```sh", f"flowforge build {json.dumps(spec['intent'])} \\",
                     f"    --model {shown_model} --run \\"]
            lines += [f"    -i {k}={json.dumps(json.dumps(v))}" for k, v in spec["inputs"].items()]
            lines += ["```", "", "## Clarifier", ""]
            conversation = [{"role": "user", "content": spec["intent"]}]
            answers = list(spec["answers"])
            while True:
                turn = await clarify(conversation, model=model)
                lines.append(f"- user: {conversation[-1]['content']}")
                if turn.ready:
                    lines += ["- ready; refined intent:", "", _block(turn.refined_intent or ""),
                              ""]
                    break
                lines.append(f"- clarifier asks: {turn.question}")
                conversation += [{"role": "assistant", "content": turn.question},
                                 {"role": "user", "content": answers.pop(0)}]
            events = BuildEvents(build_id=f"build-{name}")
            result = await build(turn.refined_intent or spec["intent"], model=model,
                                 registry=registry, events=events)
            lines += ["## Build events", ""]
            lines += [_event(e) + "\n" for e in result.events
                      if e["type"] != "llm_progress"]     # timing, not content
            lines += ["## Pipeline JSON", "",
                      _block(json.dumps(result.pipeline, indent=2, ensure_ascii=False), "json"),
                      ""]
            for block_id in result.created:
                block = await registry.get(block_id)
                lines += [f"## Block written by the thinker: `{block_id}`", "",
                          _block(json.dumps(block.model_dump(mode="json", exclude={"version"}),
                                            indent=2, ensure_ascii=False), "json"), ""]
            run = await run_pipeline(result.pipeline, spec["inputs"], model=model,
                                     registry=registry, storage=False,
                                     user=spec.get("user", "default"))
            results = {k: {f: v for f, v in out.items() if f not in ("tokens", "cost", "model")}
                       for k, out in run.results.items()}
            lines += ["## Run", "", f"inputs: `{json.dumps(spec['inputs'])}` - status: "
                      f"**{run.status}**", "",
                      _block(json.dumps({"results": results, "memory": run.memory}, indent=2,
                                        ensure_ascii=False), "json"), ""]
        finally:
            set_registry(None)
            registry.close()
    return "\n".join(lines)


async def main() -> None:
    for name in INTENTS:
        text = await record(name)
        (HERE / f"{name}.transcript.md").write_text(text, encoding="utf-8")
        print(f"wrote {name}.transcript.md")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    os.chdir(ROOT)
    os.environ.setdefault("FLOWFORGE_DATABASE_URL", "sqlite:///" + tempfile.mkdtemp() + "/x.db")
    asyncio.run(main())
