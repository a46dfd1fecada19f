"""How the thinker asks its model: JSON-Schema answers, recorded, and one
chance to fix a malformed answer.

Every request carries the answer's JSON Schema as `response_format`, so a
local model decodes under that grammar and a hosted one is told the shape.
A stage may also give a `grammar`: a narrower schema sent instead to a
`local/` model, whose answer is decoded under it, so that a small model cannot
write what the stage would refuse (a missing input, code without `execute`);
hosted models get the stage's schema as before.  The exact messages go out as
an `llm_prompt` event (with the `response_format` sent) and the exact text
comes back as `llm_response` (with `elapsed` seconds): the user sees what the
model saw.  An answer that is not JSON, breaks the schema or fails the
stage's own check is shown to the model with the located error, once; a
second bad answer raises `ThinkerError` naming the stage and the problems.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Mapping

from flowforge.errors import FlowforgeError
from flowforge.model_strings import parse_model
from flowforge.providers.base import LLMRequest, Message
from flowforge.providers.call import call_model
from flowforge.providers.resolve import ProviderOptions, default_model
from flowforge.providers.structured import extract_json
from flowforge.registry import schema_problems
from flowforge.apps.thinker.events import BuildEvents

__all__ = ["ThinkerError", "ThinkerLLM", "default_build_model"]


class ThinkerError(FlowforgeError):
    """A build stage could not get a usable answer or result."""

    def __init__(self, stage: str, message: str) -> None:
        self.stage = stage
        super().__init__(f"{stage}: {message}")


def default_build_model() -> str:
    """`FLOWFORGE_BUILD_MODEL`, else the default model."""
    return os.environ.get("FLOWFORGE_BUILD_MODEL") or default_model()


Check = Callable[[Any], list[str]]

#: The longest answer each stage may take, in tokens: its JSON never needs more,
#: and a small model that loses its way stops here instead of writing 4,096
#: tokens for minutes.
STAGE_MAX_TOKENS = {"clarify": 300, "decompose": 1200, "create": 2000, "wire": 1200}

#: Seconds between two `llm_progress` events of one answer.
PROGRESS_EVERY = 0.5


class ThinkerLLM:
    def __init__(self, model: str, events: BuildEvents, *, temperature: float = 0.0,
                 max_tokens: int | None = 4096, env: Mapping[str, str] | None = None) -> None:
        self.model = model
        # Where the providers find keys and settings: the caller's (a server gives
        # the user's own keys, and its own only when it shares them), else this
        # process's environment (the CLI's user owns it).
        self.env = env
        self.events = events
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.usage = {"prompt": 0, "completion": 0, "total": 0}
        self.cost = 0.0
        #: Whether answers are decoded under a grammar made from the schema sent
        #: (the embedded llama.cpp model): then a stage's `grammar` is sent.
        self.local = parse_model(model).provider == "local"

    def response_format(self, schema: dict[str, Any],
                        grammar: dict[str, Any] | None = None) -> dict[str, Any]:
        """What the model is sent: a stage's `grammar` for a local model, else its schema."""
        return grammar if grammar is not None and self.local else schema

    def retry_temperature(self, attempt: int) -> float | None:
        """The temperature of a local model's `attempt`-th try at one thing (None: the
        usual one): at 0 the 0.5B model wrote the same failing block four times over,
        whatever the error it was shown, so each retry samples a little wider."""
        return None if not self.local or attempt <= 1 else min(1.0, 0.3 * (attempt - 1))

    async def send(self, stage: str, messages: list[Message], schema: dict[str, Any],
                   temperature: float | None = None) -> str:
        limit = STAGE_MAX_TOKENS.get(stage, self.max_tokens)
        if self.max_tokens is not None and limit is not None:
            limit = min(limit, self.max_tokens)
        request = LLMRequest(model="", messages=list(messages), response_format=schema,
                             temperature=self.temperature if temperature is None
                             else temperature, max_tokens=limit, stream=True)
        sent = [m.to_dict() for m in messages]
        self.events.emit("llm_prompt", stage=stage, model=self.model, prompts=sent,
                         messages=sent, response_format=schema)
        started = time.monotonic()
        env = dict(os.environ if self.env is None else self.env)
        try:
            response = await call_model(self.model, request, options=ProviderOptions(env=env),
                                        on_delta=self._progress(stage))
        except FlowforgeError as exc:
            self.events.emit("llm_response", stage=stage, model=self.model, response=None,
                             elapsed=round(time.monotonic() - started, 3), error=str(exc))
            raise ThinkerError(stage, f"the model {self.model} failed: {exc}") from None
        for key, value in response.usage.to_dict().items():
            self.usage[key] += value
        self.cost += float(response.cost or 0.0)
        self.events.emit("llm_response", stage=stage, model=self.model, response=response.text,
                         text=response.text, elapsed=round(time.monotonic() - started, 3),
                         usage=response.usage.to_dict())
        return response.text

    def _progress(self, stage: str) -> Callable[[str], None]:
        """Counts the answer's pieces as they stream (about one per token) and says how
        many so far, at most twice a second: a slow model is seen to be writing."""
        state = {"tokens": 0, "said": time.monotonic()}   # nothing to say for a quick answer

        def on_delta(piece: str) -> None:
            state["tokens"] += 1
            now = time.monotonic()
            if now - state["said"] >= PROGRESS_EVERY:
                state["said"] = now
                self.events.emit("llm_progress", stage=stage, tokens=state["tokens"])

        return on_delta

    async def ask(self, stage: str, system: str, user: str, schema: dict[str, Any], *,
                  check: Check | None = None, repairs: int = 1,
                  prepare: Callable[[Any], Any] | None = None,
                  grammar: dict[str, Any] | None = None,
                  temperature: float | None = None) -> Any:
        """A value that parses, fits `schema` and passes `check`; `prepare` may
        first fill in what the stage accepts under another name; `grammar`: the
        narrower schema a local model writes under (module docstring)."""
        messages = [Message("system", system), Message("user", user)]
        sent = self.response_format(schema, grammar)
        for attempt in range(repairs + 1):
            text = await self.send(stage, messages, sent, temperature)
            try:
                value = extract_json(text)
                if prepare is not None:
                    value = prepare(value)
                problems = schema_problems(schema, value)
                if not problems and check is not None:
                    problems = check(value)
            except ValueError as exc:
                problems = [f"the answer is not JSON: {exc}"]
            if not problems:
                return value
            error = "; ".join(problems[:12])
            if attempt == repairs:
                raise ThinkerError(stage, f"the model's answer is still invalid after "
                                   f"{repairs} correction(s): {error}")
            messages += [Message("assistant", text),
                         Message("user", f"Your previous answer could not be used: {error}. "
                                 f"Answer again with only JSON matching the schema: "
                                 f"{json.dumps(sent)}")]
        raise AssertionError("unreachable")
