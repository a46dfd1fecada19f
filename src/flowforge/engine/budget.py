"""What a run may spend on models, checked before each LLM call.

A run carries one `BudgetMeter` (`context.budget`): the limits that apply to
it (the document's or the request's `budget:`, a server's per-user daily
limits) and what the run has used so far (blocks restored from checkpoints
included).  Before every call, `ModelCalls` asks `check()` with the request
about to go out: the call's tokens are estimated (about four characters a
token for the messages and tool specs, `max_tokens` - else
`DEFAULT_ANSWER_TOKENS` - for the answer) and priced with the provider's
table (`providers.pricing`).  A limit that fails (`on_exceed: fail`) first
shrinks the call to fit: its `max_tokens` is capped at what the budget has
left after the prompt (a `budget_capped` event says from what to what), so a
budget of 150 tokens still answers a two-word prompt; only when even the prompt
does not fit does the call fail with `BudgetExceeded` naming the budget, the
usage and the limit (its block fails, and so the run).  A limit with
`on_exceed: {downgrade: <model>}` sends the call that would pass it to the
cheaper model, as it does every later call of the run; the run says so with a
`budget_downgrade` event.  Once a run is downgraded, that limit no longer
stops it: the downgrade *is* what the author chose to happen.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from pydantic import ValidationError

from flowforge.errors import RunError, WorkflowError
from flowforge.providers.base import Usage
from flowforge.providers.pricing import cost_of
from flowforge.workflow.model import Budget

__all__ = ["BudgetLimit", "BudgetMeter", "BudgetExceeded", "Allowance", "estimate_tokens",
           "usage_of_output", "DEFAULT_ANSWER_TOKENS", "limit_from"]

#: Answer tokens assumed for a call that sets no `max_tokens`.
DEFAULT_ANSWER_TOKENS = 1024


class BudgetExceeded(RunError):
    """An LLM call would take the run past one of its budgets."""


@dataclass
class BudgetLimit:
    """One limit: `name` says whose it is in messages ("the run's budget",
    "the daily limit of user ann"); `used_before` is spending that counts
    against it from outside the run (the user's other runs of the day)."""

    name: str
    tokens: int | None = None
    cost: float | None = None
    downgrade: str | None = None
    used_tokens_before: int = 0
    used_cost_before: float = 0.0


def limit_from(budget: Any, name: str = "the run's budget") -> BudgetLimit | None:
    """A `BudgetLimit` from a document's `budget:` (a `workflow.model.Budget`)
    or the same thing as a dict (a request's `budget`); None for None."""
    if budget is None:
        return None
    if not isinstance(budget, Mapping):
        budget = budget.model_dump()
    try:
        checked = Budget.model_validate(budget)
    except ValidationError as exc:
        details = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'budget'}: {e['msg']}"
                            for e in exc.errors())
        raise WorkflowError(f"invalid budget: {details}", "budget") from None
    on_exceed = checked.on_exceed
    return BudgetLimit(name, checked.tokens, checked.cost,
                       None if on_exceed == "fail" else on_exceed.downgrade)


def estimate_tokens(messages: Iterable[Any], tools: Iterable[Any] = ()) -> int:
    """A rough count of the prompt tokens: about four characters a token."""
    chars = 0
    for message in messages:
        data = message.to_dict() if hasattr(message, "to_dict") else message
        chars += len(json.dumps(data, default=str, ensure_ascii=False))
    for tool in tools:
        chars += len(tool.name) + len(tool.description or "") + \
            len(json.dumps(tool.parameters, default=str))
    return math.ceil(chars / 4)


def usage_of_output(output: Any) -> tuple[int, float]:
    """(tokens, cost) a block's output reports (LLM blocks report `tokens`
    and `cost`), for blocks restored from checkpoints."""
    if not isinstance(output, dict):
        return 0, 0.0
    tokens, cost = output.get("tokens"), output.get("cost")
    total = tokens.get("total") if isinstance(tokens, dict) else None
    if isinstance(cost, dict):
        cost = cost.get("total")
    return (int(total) if isinstance(total, (int, float)) else 0,
            float(cost) if isinstance(cost, (int, float)) else 0.0)


@dataclass(frozen=True)
class Allowance:
    """What `BudgetMeter.check` lets a call do: the model to use, the
    `max_tokens` to send (None: as asked), and the estimate held until release."""

    model: str
    max_tokens: int | None
    held: tuple[int, float]


@dataclass
class BudgetMeter:
    """A run's limits and what it has spent."""

    limits: list[BudgetLimit]
    tokens: int = 0
    cost: float = 0.0
    downgraded_to: str | None = None
    spent_limits: set[str] = field(default_factory=set)   # downgraded: no longer stop
    # Estimates of the calls in flight: parallel blocks checking at once must
    # not each see the whole remaining budget.
    held_tokens: int = 0
    held_cost: float = 0.0

    def add(self, tokens: int, cost: float) -> None:
        self.tokens += tokens
        self.cost += cost

    def release(self, held: tuple[int, float]) -> None:
        """A call `check` let through has ended: its estimate is no longer held."""
        self.held_tokens -= held[0]
        self.held_cost -= held[1]

    def check(self, model: str, messages: list[Any], tools: list[Any] | None,
              max_tokens: int | None, emit: Callable[..., None]) -> Allowance:
        """The model the call may use (`model`, or the downgrade), its
        `max_tokens` (capped to what a failing limit has left) and the estimate
        held for it until `release`; raises `BudgetExceeded` when even the
        prompt does not fit a limit that fails."""
        if self.downgraded_to is not None:
            model = self.downgraded_to
        prompt = estimate_tokens(messages, tools or ())
        asked = max_tokens or DEFAULT_ANSWER_TOKENS
        answer = asked
        capped_by: BudgetLimit | None = None
        for limit in self.limits:
            if limit.name in self.spent_limits:
                continue
            if limit.downgrade is not None:
                over = self._over(limit, model, prompt, answer)
                if over is None:
                    continue
                what, used, estimate, most = over
                emit("budget_downgrade", budget=limit.name, model=model,
                     downgrade=limit.downgrade, measure=what, used=used, estimate=estimate,
                     limit=most)
                self.spent_limits.add(limit.name)
                self.downgraded_to = model = limit.downgrade
                continue
            room = self._room(limit, model, prompt)
            if isinstance(room, tuple):          # not even the prompt fits
                what, used, estimate, most = room
                message = (f"budget exceeded: {limit.name} allows {_shown(what, most)}; "
                           f"{_shown(what, used)} used so far and the prompt of this call to "
                           f"{model} alone needs about {_shown(what, estimate)}, leaving no "
                           f"room for an answer (a call is capped to what the budget has "
                           f"left, but cannot be capped below one answer token)")
                emit("budget_exceeded", budget=limit.name, model=model, measure=what,
                     used=used, estimate=estimate, limit=most, error=message)
                raise BudgetExceeded(message)
            if room is not None and room < answer:
                answer, capped_by = room, limit
        if capped_by is not None:
            emit("budget_capped", budget=capped_by.name, model=model, max_tokens=asked,
                 capped_to=answer, prompt_estimate=prompt)
        held = (prompt + answer, cost_of(model, Usage(prompt, answer)).total)
        self.held_tokens += held[0]
        self.held_cost += held[1]
        return Allowance(model, answer if capped_by is not None else max_tokens, held)

    def _used(self, limit: BudgetLimit) -> tuple[int, float]:
        """What counts against `limit` now: spent before the run, by the run, and
        held for the calls in flight."""
        return (limit.used_tokens_before + self.tokens + self.held_tokens,
                limit.used_cost_before + self.cost + self.held_cost)

    def _room(self, limit: BudgetLimit, model: str, prompt: int
              ) -> int | None | tuple[str, float, float, float]:
        """How many answer tokens `limit` leaves this call after its prompt
        (None: no bound), or (measure, used, prompt estimate, limit) when the
        prompt alone leaves no room."""
        room: int | None = None
        if limit.tokens is not None:
            used = self._used(limit)[0]
            left = limit.tokens - used - prompt
            if left < 1:
                return "tokens", used, prompt, limit.tokens
            room = left
        if limit.cost is not None:
            used_cost = self._used(limit)[1]
            prompt_cost = cost_of(model, Usage(prompt, 0)).total
            left_cost = limit.cost - used_cost - prompt_cost
            per_token = cost_of(model, Usage(0, 1_000_000)).total / 1_000_000
            if left_cost <= 0 or (per_token > 0 and left_cost < per_token):
                return "cost", round(used_cost, 6), round(prompt_cost, 6), limit.cost
            if per_token > 0:
                affordable = int(left_cost / per_token)
                room = affordable if room is None else min(room, affordable)
        return room

    def _over(self, limit: BudgetLimit, model: str, prompt: int, answer: int
              ) -> tuple[str, float, float, float] | None:
        if limit.tokens is not None:
            used = self._used(limit)[0]
            if used + prompt + answer > limit.tokens:
                return "tokens", used, prompt + answer, limit.tokens
        if limit.cost is not None:
            used_cost = self._used(limit)[1]
            estimate = cost_of(model, Usage(prompt, answer)).total
            if used_cost + estimate > limit.cost:
                return "cost", round(used_cost, 6), round(estimate, 6), limit.cost
        return None


def _shown(what: str, amount: float) -> str:
    return f"{int(amount)} tokens" if what == "tokens" else f"${amount:.4f}"
