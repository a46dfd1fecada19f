"""The workflow document as Pydantic models: the one source of truth for the
format. `flowforge schema` exports their JSON Schema so editors autocomplete,
and the field docstrings become the schema's descriptions."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, \
    model_validator

from flowforge.errors import Problem
from flowforge.hints import did_you_mean

__all__ = ["RetryPolicy", "Join", "BlockSpec", "Budget", "Downgrade", "Trigger", "Workflow",
           "ModelUse", "nested_input_problems", "MAX_ID_LENGTH"]

_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]*$"
#: A block id may also start with a digit: editors that number blocks by UUID
#: (`3f2a9c1e-7b4d-...`) write them so; templates and expressions read them.
_BLOCK_ID_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$"
#: Ids are names people write and read (in URLs, logs, `{{id.field}}`): a
#: longer one is a mistake or an attack on every place that stores or shows it.
MAX_ID_LENGTH = 128


class ModelUse(NamedTuple):
    """One place a document names a model (`Workflow.models()`)."""

    where: str
    """Its location: `blocks[2].with.tools[0].block.with.model`."""
    model: str
    own_key: bool = False
    """The block brings its own `api_key`: its provider's usual key is not needed."""
    embedding: bool = False
    """An embedding model (a router's `embedding_model`), not a chat model."""


class RetryPolicy(BaseModel):
    """How a failing block is tried again before it counts as failed."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    attempts: int = Field(2, ge=1, le=100, examples=[3])
    """Total tries, the first included (`attempts: 3` = up to two retries)."""
    backoff: float = Field(0.5, ge=0, examples=[1.0])
    """Seconds before the first retry; doubles at each further retry."""
    max_backoff: float = Field(30.0, ge=0, examples=[10.0])
    """Upper bound of one wait between tries, in seconds."""
    jitter: float = Field(0.1, ge=0, le=1, examples=[0.0])
    """Random fraction added to each wait, so retries of many runs spread out."""


class Downgrade(BaseModel):
    """Continue on a cheaper model once the budget would be exceeded."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    downgrade: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.\-]*/.+$",
                           examples=["openai/gpt-4o-mini"])
    """The model every later LLM call of the run uses (`provider/name`, e.g. `openai/gpt-4o-mini`)."""


class Budget(BaseModel):
    """What one run may spend on models; checked before each LLM call against
    the run's usage so far plus an estimate of the call."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    tokens: int | None = Field(None, ge=1, examples=[20000])
    """Most tokens (prompt + completion, every LLM call of the run) the run may use."""
    cost: float | None = Field(None, gt=0, examples=[0.5])
    """Most USD the run may spend, from the provider's price table."""
    on_exceed: Literal["fail"] | Downgrade = Field(
        "fail", examples=["fail", {"downgrade": "openai/gpt-4o-mini"}])
    """`fail`: the LLM call that would exceed fails its block (and so the run);
    `{downgrade: <model>}`: that call and every later one use the cheaper model."""

    @field_validator("on_exceed", mode="before")
    @classmethod
    def _explain_on_exceed(cls, value: Any) -> Any:
        if value == "fail" or isinstance(value, Downgrade):
            return value
        if isinstance(value, dict):
            try:
                return Downgrade.model_validate(value)
            except ValidationError:
                pass
        raise ValueError(f"{value!r} is not a choice: write `on_exceed: fail` or "
                         f"`on_exceed: {{downgrade: <provider/model>}}` "
                         f"(e.g. `{{downgrade: openai/gpt-4o-mini}}`)")

    @model_validator(mode="after")
    def _some_limit(self) -> "Budget":
        if self.tokens is None and self.cost is None:
            raise ValueError("a budget needs `tokens`, `cost` or both "
                             "(e.g. `budget: {tokens: 20000, cost: 0.5}`)")
        return self


class Join(BaseModel):
    """`after:` written as a mapping: says which dependencies a block needs.

    Every dependency (each `after:` entry and each block the templates read)
    is required unless it is listed under `any`: the block then runs once
    every required one ran and at least one of `any` ran (a join of
    alternatives; reading a member that did not run gives None)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    all: list[str] = Field(default_factory=list, examples=[["search", "fetch"]])
    """Blocks that must all have run (the default for every dependency)."""
    any: list[str] = Field(default_factory=list, examples=[["approved", "edited"]])
    """Alternatives: at least one must have run; the others may have been skipped."""

    @field_validator("all", "any", mode="before")
    @classmethod
    def _one_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _something(self) -> "Join":
        if not self.all and not self.any:
            raise ValueError("write `after: {any: [a, b]}` (runs once one of them ran) or "
                             "`after: {all: [a, b]}` (runs once every one ran)")
        if len(self.any) == 1:
            raise ValueError(f"`any` needs two or more alternatives; a single one is a "
                             f"requirement: write `after: {{all: [{self.any[0]}]}}`")
        return self


class BlockSpec(BaseModel):
    """One block of a workflow, as written."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True,
                              use_attribute_docstrings=True)

    id: str = Field(pattern=_BLOCK_ID_PATTERN, max_length=MAX_ID_LENGTH, examples=["answer"])
    """Unique id in the whole document; templates read its output as `{{id.field}}`
    (letters, digits, `_` and `-`: a UUID is an id too)."""
    type: str | None = Field(None, examples=["agent"])
    """Block type: agent, router, condition, set, function, loop, parallel, ..."""
    name: str | None = Field(None, examples=["Customer Agent"])
    """Display name; templates may also use its normalised form (`Customer Agent` -> `customeragent`)."""
    description: str | None = Field(None, examples=["Questions about invoices and refunds"])
    """What the block is for; routers show it to the model when choosing a branch."""
    with_: dict[str, Any] = Field(default_factory=dict, alias="with",
                                  examples=[{"prompt": "Answer: {{input.query}}"}])
    """The block's configuration; values may hold `{{templates}}` and `{expr: ...}`."""
    after: list[str] | Join = Field(default_factory=list,
                                    examples=["triage", {"any": ["approved", "edited"]}])
    """Blocks that must run first, beyond those the templates reference: one id or a
    list of one (a requirement); a list of two or more is a join of alternatives (runs
    once one of them ran, like `{any: [...]}`); `{all: [...], any: [...]}` says it
    explicitly."""
    on_error: str | None = Field(None, examples=["apologise"])
    """Id of a block that runs instead of this block's dependants if this block fails;
    it reads the failure's message as `{{<this block's id>.error}}`."""
    timeout: float | None = Field(None, gt=0, examples=[30])
    """Seconds the block may run (every retry included in one try's budget)."""
    retry: RetryPolicy | Annotated[int, Field(ge=1, le=100)] | None = Field(
        None, examples=[3, {"attempts": 3, "backoff": 1.0}])
    """Retry policy, or just the number of attempts (1 to 100)."""
    uses: str | None = Field(None, examples=["summarize-text"])
    """Run a block from the block registry by its id (its schemas are checked)."""
    blocks: list[BlockSpec] | None = Field(
        None, examples=[[{"id": "step", "type": "set", "with": {"i": "{{loop.index}}"}}]])
    """Child blocks of a container (loop, parallel)."""

    @field_validator("after", mode="before")
    @classmethod
    def _after_as_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def after_ids(self) -> list[str]:
        """Every block named in `after:`, in the order written."""
        if isinstance(self.after, Join):
            return list(dict.fromkeys(self.after.all + self.after.any))
        return list(self.after)

    def join_ids(self) -> list[str]:
        """The alternatives of `after:` (at least one must run): `any`, or a plain
        list of two or more entries (its meaning before joins were explicit)."""
        if isinstance(self.after, Join):
            return list(self.after.any)
        return list(dict.fromkeys(self.after)) if len(set(self.after)) >= 2 else []

    @field_validator("with_", mode="before")
    @classmethod
    def _with_none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value

    def retry_policy(self) -> RetryPolicy | None:
        if self.retry is None:
            return None
        if isinstance(self.retry, int):
            return RetryPolicy(attempts=max(1, self.retry))
        return self.retry


class Trigger(BaseModel):
    """When a stored workflow runs by itself, and with which inputs."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    cron: str = Field(examples=["0 7 * * 1-5"])
    """Five-field cron: minute hour day-of-month month day-of-week (`0 7 * * 1-5`)."""
    timezone: str = Field("UTC", examples=["Europe/Paris"])
    """IANA time zone the cron is read in (`Europe/Paris`)."""
    inputs: dict[str, Any] = Field(default_factory=dict, examples=[{"topic": "news"}])
    """The run's inputs."""
    enabled: bool = Field(True, examples=[False])
    """`false` keeps the trigger written down but never fires it."""

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        from croniter import croniter

        if len(value.split()) != 5 or not croniter.is_valid(value):
            raise ValueError(f"{value!r} is not a five-field cron expression (minute hour "
                             f"day-of-month month day-of-week), e.g. '0 7 * * *'")
        return value

    @field_validator("timezone")
    @classmethod
    def _valid_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}: use an IANA name such as UTC or "
                             f"Europe/Paris") from None
        return value


class Workflow(BaseModel):
    """A workflow document (version 1)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    version: Literal[1] = Field(1, examples=[1])
    """Format version; only 1 exists."""
    id: str = Field(pattern=_ID_PATTERN, max_length=MAX_ID_LENGTH, examples=["support-desk"])
    """Stable id: runs, versions and nested `workflow` blocks refer to it."""
    name: str | None = Field(None, examples=["Support desk"])
    """Display name (the web app's list, `flowforge workflows list`)."""
    description: str | None = Field(None, examples=["Answers customers from the policies"])
    """What the workflow does, for people and for a parent agent calling it as a tool."""
    inputs: dict[str, dict[str, Any]] = Field(default_factory=dict, examples=[
        {"query": {"type": "string"}, "top_k": {"type": "integer", "default": 3}}])
    """Run inputs as JSON Schema properties; an input without `default` is required
    unless it says `optional: true`."""
    variables: dict[str, Any] = Field(default_factory=dict, examples=[{"company": "Acme"}])
    """Constants for templates: `{{vars.company}}`."""
    defaults: dict[str, Any] = Field(default_factory=dict, examples=[
        {"model": "openai/gpt-4o-mini", "temperature": 0.2}])
    """Defaults for every LLM block (model, temperature, max_tokens, ...)."""
    memory: list[str] = Field(default_factory=list, examples=[["last_topic"]])
    """Per-user keys loaded before a run and saved after it (from block outputs of that name)."""
    env: dict[str, str] = Field(default_factory=dict, examples=[{"REGION": "eu"}])
    """Values for `{{env.X}}` and provider credentials; the process environment wins."""
    concurrency: int = Field(32, ge=1, le=10_000, examples=[4])
    """How many blocks may run at once in one run."""
    webhook: str | None = Field(None, examples=["https://hooks.example.com/flowforge"])
    """URL that receives a signed JSON POST when a run ends."""
    triggers: list[Trigger] = Field(default_factory=list, examples=[
        [{"cron": "0 7 * * *", "timezone": "Europe/Paris", "inputs": {"topic": "news"}}]])
    """Schedules: `[{cron: "0 7 * * *", timezone: Europe/Paris, inputs: {...}}]`; a stored
    workflow's triggers are fired by the worker pool (`flowforge schedules list`)."""
    budget: Budget | None = Field(None, examples=[{"tokens": 20000, "cost": 0.5}])
    """What one run may spend on models: `{tokens: N, cost: 0.50, on_exceed: fail | {downgrade: <model>}}`."""
    blocks: list[BlockSpec] = Field(default_factory=list, examples=[
        [{"id": "answer", "type": "agent", "with": {"prompt": "{{input.query}}"}}]])
    """The graph: edges come from template references and `after`."""
    metadata: dict[str, Any] = Field(default_factory=dict, examples=[
        {"layout": {"answer": {"x": 120, "y": 40}}}])
    """Free-form data for editors and tools; the engine never reads it.  The web
    editor keeps each block's place on the canvas here, as
    `layout: {<block id>: {x: 120, y: 40}}`."""

    def iter_blocks(self) -> list[tuple[str, BlockSpec]]:
        """Every block with its location, children included, depth first."""
        # A stack, not a recursive closure: a run calls this (its models), and a
        # closure that calls itself is a reference cycle left to the collector.
        found: list[tuple[str, BlockSpec]] = []
        stack = [(f"blocks[{index}]", block) for index, block in enumerate(self.blocks)][::-1]
        while stack:
            where, block = stack.pop()
            found.append((where, block))
            stack.extend((f"{where}.blocks[{index}]", child)
                         for index, child in reversed(list(enumerate(block.blocks or []))))
        return found

    def models(self) -> list[ModelUse]:
        """Every model string the document names, as `ModelUse`s (place, model,
        own key, embedding): defaults, budget downgrade, each block's model,
        fallbacks and embedding model, and the same fields of the blocks an
        agent calls as tools (`with.tools[i].block.with`), however deep; `own
        key` when that block gives its `api_key` (its provider's usual key is
        then not needed).  Templated strings are left out: known at run time.
        `flowforge validate` and a run's check before its first block both read
        this list, so what one finds the other finds."""
        found: list[ModelUse] = []

        def add(where: str, value: Any, own_key: bool = False, embedding: bool = False) -> None:
            if isinstance(value, str) and "{{" not in value:
                found.append(ModelUse(where, value, own_key, embedding))

        def add_all(where: str, values: Any, own_key: bool = False) -> None:
            for index, value in enumerate(values if isinstance(values, list) else []):
                add(f"{where}[{index}]", value, own_key)

        add("defaults.model", self.defaults.get("model"))
        add_all("defaults.fallback", self.defaults.get("fallback"))
        if self.budget is not None and isinstance(self.budget.on_exceed, Downgrade):
            add("budget.on_exceed.downgrade", self.budget.on_exceed.downgrade)
        # (place of a `with:` mapping, the mapping): blocks, then tool blocks inside them
        stack: list[tuple[str, Any]] = [(f"{where}.with", spec.with_)
                                        for where, spec in self.iter_blocks()][::-1]
        while stack:
            where, with_ = stack.pop()
            if not isinstance(with_, dict):
                continue
            own_key = with_.get("api_key") is not None
            add(f"{where}.model", with_.get("model"), own_key)
            add_all(f"{where}.fallback", with_.get("fallback"), own_key)
            add(f"{where}.embedding_model", with_.get("embedding_model"), embedding=True)
            tools = with_.get("tools")
            stack.extend((f"{where}.tools[{index}].block.with", entry["block"].get("with"))
                         for index, entry in reversed(list(enumerate(
                             tools if isinstance(tools, list) else [])))
                         if isinstance(entry, dict) and isinstance(entry.get("block"), dict))
        return found

    def workflow_references(self) -> list[tuple[str, BlockSpec, str]]:
        """Every other workflow the document runs, as (place, block, reference):
        `type: workflow` blocks (`with.workflow`) and workflows an agent calls
        as tools (`with.tools[i].workflow`); templated ones are left out (known
        at run time)."""
        found: list[tuple[str, BlockSpec, str]] = []
        for where, spec in self.iter_blocks():
            reference = spec.with_.get("workflow")
            if spec.type == "workflow" and isinstance(reference, str) and "{{" not in reference:
                found.append((f"{where}.with.workflow", spec, reference))
            tools = spec.with_.get("tools")
            for index, entry in enumerate(tools if isinstance(tools, list) else []):
                reference = entry.get("workflow") if isinstance(entry, dict) else None
                if isinstance(reference, str) and "{{" not in reference:
                    found.append((f"{where}.with.tools[{index}].workflow", spec, reference))
        return found


def nested_input_problems(child: Workflow, given: Any, where: str,
                          reference: str) -> list[Problem]:
    """A nested run's inputs (`given`, a `workflow` block's `with.inputs` at
    `where`) as the child document declares them: what the run would refuse
    (an unknown input, a required one missing)."""
    if not child.inputs or not isinstance(given, dict):
        return []
    problems = [Problem(f"{where}.{name}", f"'{reference}' declares no input '{name}'"
                        f"{did_you_mean(name, child.inputs)}; its inputs: "
                        f"{', '.join(child.inputs)}")
                for name in given if name not in child.inputs]
    problems += [Problem(where, f"'{reference}' needs input '{name}' (no default in its "
                                f"`inputs:`)")
                 for name, schema in child.inputs.items()
                 if name not in given and not (isinstance(schema, dict) and "default" in schema)]
    return problems


