"""Every error flowforge raises, drawn in one tree, so callers can catch by meaning.

Two families are kept apart on purpose: a *workflow* error is a mistake in
what the user wrote (fix the document or the command line), a *run* error is
something that went wrong while a valid workflow ran (a block raised, a
provider answered 500, a key is missing).  Cancellation and retry signals are
not errors and do not appear here.

    FlowforgeError
    ├── WorkflowError             the document or the command line is invalid
    │   └── ValidationFailed      several located problems, all reported at once
    ├── InputError                run inputs do not match the workflow's `inputs`
    ├── InvalidValue              a value given to a command or a route (a filter, a
    │   │                         name, a capability, an id prefix) is not accepted
    │   └── BlockTestRefused      [service/block_test.py] a block cannot run alone, or
    │                             values it reads are missing (each located)
    ├── RunError                  something failed while running
    │   ├── BlockError            names the block id and type
    │   │   └── BlockTimeout      the block exceeded its `timeout`
    │   ├── ValueTooLarge         a rendered value, a block's output or a run's total
    │   │                         passed its size limit (located, names the setting)
    │   ├── ProviderError         an LLM back end failed (status, retryable)
    │   │   └── MissingCredentials  says which environment variable to set
    │   ├── ToolError             a tool call failed or was rejected
    │   ├── BudgetExceeded        [engine/budget.py] an LLM call would pass a run's budget
    │   ├── SandboxError          [sandbox/process.py] a sandboxed block was stopped (`kind`)
    │   └── MemoryBudgetError     [sandbox/memory.py] a sandboxed block got no memory
    ├── CapabilityDenied          a document asks for what its user was not granted
    ├── StorageError              the database could not be read or written
    │   ├── BadDatabaseURL        the database URL itself is malformed (a usage error)
    │   ├── AlreadyExists         [storage/base.py] a unique name or id is already stored
    │   │   └── IdempotencyKeyTaken  [storage/base.py] an earlier run holds the key
    │   ├── LeaseLost             [storage/base.py] another process holds the run's lease
    │   └── StoreUnreachable      [service/recorder.py] a run's writes were refused too long
    ├── NotFound                  a run, workflow or record id that does not exist
    ├── RunStateError             [service/runs.py] the run's state does not allow this
    │   └── RunDiedTooOften       [service/resuming.py] failed, not resumed: died too often
    ├── SecretKeyError            [service/secrets.py] the secrets' key is missing or wrong
    ├── QueueError                [service/pool/broker.py] the worker pool cannot be used
    ├── ChatError                 [apps/chat/session.py] the chat could not answer (`run_id`)
    ├── ThinkerError              [apps/thinker/llm.py] a build stage got no usable answer
    ├── IngestError               [knowledge/ingest.py] a document could not be read
    ├── SharedBlock               [registry/owned.py] a user asked to delete a shared block
    ├── FormatError               [formats/base.py] a foreign workflow file is broken (where)
    ├── ImportRefused             [formats/base.py] nodes without a counterpart, no partial
    ├── ExportRefused             [formats/base.py] blocks without a counterpart in that format
    └── BlockRunError             [blocks/registry_block.py] a registry block failed (`stage`)

The errors in [brackets] live beside the code that raises them (a caller
catching one imports it from there); the tree is the one place to see them
all (tests/test_error_tree.py keeps it whole).  Outside the tree:
`blocks.base.Suspend` is a signal (a block waits), `server.errors.ApiError`
an HTTP answer, and the parsers' ValueErrors (expressions, notation, regular
expressions, structured answers) are their callers' to turn into one of these.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FlowforgeError",
    "WorkflowError",
    "Problem",
    "ValidationFailed",
    "InputError",
    "InvalidValue",
    "RunError",
    "BlockError",
    "BlockTimeout",
    "ValueTooLarge",
    "ProviderError",
    "MissingCredentials",
    "ToolError",
    "CapabilityDenied",
    "StorageError",
    "BadDatabaseURL",
    "NotFound",
]


class FlowforgeError(Exception):
    """Base of every error flowforge raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One located problem in a workflow document: `where` is a path such as
    `blocks[3].with.prompt`, `message` says what is wrong and how to fix it."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class WorkflowError(FlowforgeError):
    """The workflow document (or the command line) is invalid."""

    def __init__(self, message: str, where: str = "", source: str | None = None):
        self.where = where
        self.source = source
        text = f"{where}: {message}" if where else message
        if source:
            text = f"{source}: {text}"
        super().__init__(text)
        self.message = message


class ValidationFailed(WorkflowError):
    """Validation found one or more problems; all of them are listed."""

    def __init__(self, problems: list[Problem], source: str | None = None):
        self.problems = list(problems)
        head = f"{len(self.problems)} problem(s) in the workflow"
        body = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{head}:\n{body}", source=source)


class InputError(FlowforgeError):
    """Run inputs do not match the workflow's declared `inputs`."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("invalid run inputs:\n" + "\n".join(f"  - {p}" for p in problems))


class InvalidValue(FlowforgeError):
    """A value given to a command or a route is not accepted: a filter, a
    name, a capability, an ambiguous id prefix.  Kept apart from InputError,
    whose message is about a run's inputs, so neither is headed wrongly."""

    def __init__(self, message: str, where: str = ""):
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)


class RunError(FlowforgeError):
    """Something failed while a valid workflow was running."""


class BlockError(RunError):
    """A block failed; names the block so the user can find it."""

    def __init__(self, block_id: str, block_type: str, message: str):
        self.block_id = block_id
        self.block_type = block_type
        self.message = message
        super().__init__(f"block '{block_id}' ({block_type}): {message}")


class BlockTimeout(BlockError):
    """The block ran longer than its `timeout`."""


class ValueTooLarge(RunError):
    """A value a run makes passed a size limit: a rendered template, a block's
    output, the run's total.  Raised before the memory is spent, where the
    size is known first; `where` grows as it travels up a `with:` mapping."""

    def __init__(self, what: str, size: int, limit: int, setting: str,
                 where: str = "") -> None:
        self.what, self.size, self.limit, self.setting = what, size, limit, setting
        self.where = where
        super().__init__(self.message)

    @property
    def message(self) -> str:
        place = f"{self.where}: " if self.where else ""
        return (f"{place}{self.what} would be {_mb(self.size)}, more than the limit of "
                f"{_mb(self.limit)} ({self.setting}): a template that repeats a value (or "
                f"a loop that grows one) makes it; cut the value, or raise the setting")

    def located(self, key: str) -> "ValueTooLarge":
        return ValueTooLarge(self.what, self.size, self.limit, self.setting,
                             f"{key}.{self.where}" if self.where else key)

    def __str__(self) -> str:
        return self.message


def _mb(size: int) -> str:
    return f"{size / 1_000_000:,.1f} MB" if size >= 1_000_000 else f"{size:,} characters"


class ProviderError(RunError):
    """An LLM provider failed. `retryable` is true for 429, 5xx, timeouts and
    connection errors; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, *, provider: str = "", status: int | None = None,
                 retryable: bool = False, retry_after: float | None = None):
        self.provider = provider
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        prefix = f"{provider}: " if provider else ""
        suffix = f" (HTTP {status})" if status else ""
        super().__init__(f"{prefix}{message}{suffix}")


class MissingCredentials(ProviderError):
    """A provider needs a key that is not set; the message names the variable."""

    def __init__(self, provider: str, variable: str):
        self.variable = variable
        super().__init__(
            f"no API key found - set the {variable} environment variable "
            f"(or `env: {{{variable}: ...}}` in the workflow)",
            provider=provider,
        )


class ToolError(RunError):
    """A tool call failed or its arguments were rejected."""


class CapabilityDenied(FlowforgeError):
    """A workflow asks for something that reaches the host (a local command, a
    server file, the server's environment, a provider URL of its choosing, a
    private address) and its user was not granted that capability.  Each
    problem is located and names the capability; `capabilities` lists them."""

    def __init__(self, problems: list[Problem], subject: str = "", source: str | None = None):
        self.problems = list(problems)
        self.subject = subject
        self.source = source
        head = f"{source}: " if source else ""
        body = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{head}not allowed on this server:\n{body}")

    @property
    def capabilities(self) -> list[str]:
        return sorted({getattr(p, "capability", "") for p in self.problems} - {""})


class StorageError(FlowforgeError):
    """The database could not be opened, read or written."""


class BadDatabaseURL(StorageError):
    """The database URL is malformed (no database was tried): the user wrote
    it wrong, so commands treat it as bad usage, not as an unreachable database."""


class NotFound(FlowforgeError):
    """An id that names nothing: a run, a workflow, a registered function."""
