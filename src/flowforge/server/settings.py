"""Server settings: command-line options first, then `FLOWFORGE_*` variables."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from flowforge.providers.resolve import provider_keys_in

__all__ = ["ServerSettings"]


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "true", "yes")


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value and value.isdigit() else default


def _env_number(name: str) -> float | None:
    value = os.environ.get(name)
    try:
        return float(value) if value else None
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a number (write e.g. {name}=0.5)") from None


def _machine_memory_mb() -> int:
    from flowforge.sandbox.memory import machine_memory_mb
    return machine_memory_mb()


def _resume_cut_off() -> bool:
    from flowforge.service.resuming import resume_cut_off
    return resume_cut_off()


@dataclass
class ServerSettings:
    database_url: str | None = None
    """None: FLOWFORGE_DATABASE_URL, else the SQLite file in the user's data folder."""
    max_body_bytes: int = field(default_factory=lambda: _env_int("FLOWFORGE_MAX_BODY_BYTES",
                                                                 1024 * 1024))
    """Larger request bodies are refused with 413."""
    webhook_attempts: int = 5
    """Deliveries tried per run before giving up (each attempt is recorded)."""
    webhook_backoff: float = 1.0
    """Seconds before the first retry; doubles after each failed attempt."""
    webhook_timeout: float = 10.0
    """Seconds one delivery attempt may take."""
    allow_private_webhooks: bool = field(
        default_factory=lambda: _env_flag("FLOWFORGE_ALLOW_PRIVATE_WEBHOOKS"))
    """Let webhooks go to loopback, private and link-local addresses (a server
    whose receivers are on its own network).  Off: any user could otherwise make
    the server POST to `http://169.254.169.254/...` or an intranet service."""
    sse_ping_seconds: float = 15.0
    """Comment lines keep idle event streams open through proxies."""
    cancel_wait_seconds: float = 10.0
    """How long `POST .../cancel` waits for the run to settle before answering."""
    model: str | None = None
    """Model for every LLM block of every run (like `flowforge run --model`)."""
    files_root: str | None = field(
        default_factory=lambda: os.environ.get("FLOWFORGE_FILES_ROOT") or None)
    """The one folder that relative paths in documents run here resolve
    against (`workflow.paths`): nested workflows, knowledge `sources:
    [policies]` -> `<files_root>/policies`, web-search folders, `scripted/`
    rules, `local/` model files; for users granted `server_files`.  None: a
    document's own file's folder when it has one, else such paths are refused
    (never the server's working directory)."""
    allow_process_sandbox: bool = field(
        default_factory=lambda: _env_flag("FLOWFORGE_ALLOW_PROCESS_SANDBOX"))
    """Run users' Python blocks in the plain-process confinement when bubblewrap
    is missing (seccomp and rlimits only). Off: such blocks fail, saying so."""
    workers: str = field(default_factory=lambda: os.environ.get("FLOWFORGE_WORKERS") or "none")
    """`celery`: runs go to the worker pool (FLOWFORGE_BROKER_URL; `flowforge worker`)
    instead of this process; `none` (default): they run here."""
    share_provider_keys: bool = field(
        default_factory=lambda: _env_flag("FLOWFORGE_SHARE_PROVIDER_KEYS"))
    """Let every user's runs use the provider keys in the server's environment
    (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...), sent only to the provider's
    configured URL.  Off: each user brings their own keys as secrets."""

    agent_webhook_url: str | None = field(
        default_factory=lambda: os.environ.get("FLOWFORGE_AGENT_WEBHOOK_URL") or None)
    """The frontend that receives a signed POST (the task: id, status, logs,
    output) for every prompt-chain task (`POST /api/agent`) that completes or
    fails; `{task_id}` in it is replaced by the task's id."""
    chain_base_url: str | None = field(
        default_factory=lambda: os.environ.get("FLOWFORGE_CHAIN_BASE_URL") or None)
    """Where the relative `endPoint`s of prompt-chain event nodes point."""
    daily_user_tokens: int | None = field(
        default_factory=lambda: (lambda v: int(v) if v is not None else None)(
            _env_number("FLOWFORGE_DAILY_USER_TOKENS")))
    """Most model tokens one user's runs may use per day (UTC), all runs
    together; an LLM call that would pass it fails its block.  None: no limit."""
    daily_user_cost: float | None = field(
        default_factory=lambda: _env_number("FLOWFORGE_DAILY_USER_COST"))
    """Most USD one user's runs may spend on models per day (UTC).  None: no limit."""

    max_user_runs: int = field(default_factory=lambda: _env_int("FLOWFORGE_MAX_USER_RUNS", 16))
    """Runs one user may have in progress on this server at once (started here
    and not ended; a run waiting for a person or a time does not count); one
    more is refused with 429 until one ends.  0: no limit."""
    max_run_events: int = field(
        default_factory=lambda: _env_int("FLOWFORGE_MAX_RUN_EVENTS", 20_000))
    """Events one run may publish (each block start and end, streamed tokens,
    progress); past it no block of the run starts and the run fails, naming
    the block.  0: no limit."""
    max_loop_passes: int = field(
        default_factory=lambda: _env_int("FLOWFORGE_MAX_LOOP_PASSES", 1_000))
    """Passes one `loop` block may run, and items one `parallel` block may map,
    in a run on this server; more fails that block, saying so.  0: no limit."""

    max_value_mb: float = field(default_factory=lambda: _env_number(
        "FLOWFORGE_MAX_VALUE_MB") or 4.0)
    """Text (MB) one block of a run on this server may render from its templates;
    more fails the block, located, before the text is made.  A process without a
    server's settings (the CLI) allows 16: a server shares its memory and its
    event loop among its users."""
    max_output_mb: float = field(default_factory=lambda: _env_number(
        "FLOWFORGE_MAX_OUTPUT_MB") or 16.0)
    """Output (MB) one block of a run on this server may give (the CLI: 64)."""
    max_run_mb: float = field(default_factory=lambda: _env_number(
        "FLOWFORGE_MAX_RUN_MB") or 128.0)
    """What (MB) the blocks of one run on this server may output together (the
    CLI: 512)."""

    max_user_rate: float = field(
        default_factory=lambda: (lambda v: 50.0 if v is None else v)(
            _env_number("FLOWFORGE_MAX_USER_RATE")))
    """API requests one user may make per second, steadily (their key's user; a
    request without a valid key counts against its client address); over it,
    and once the burst is spent, a request is answered 429 with Retry-After
    before any work.  `/health`, pages and assets are not counted.  The default,
    50 with bursts of 100, is above what a client polling every 20 ms sends and
    far below a flood.  0: no limit."""
    max_user_burst: int = field(default_factory=lambda: _env_int("FLOWFORGE_MAX_USER_BURST",
                                                                 100))
    """Requests one user may make at once, above the steady rate, before it applies."""

    sandbox_memory_mb: int = field(default_factory=lambda: _env_int(
        "FLOWFORGE_SANDBOX_MEMORY_MB", _machine_memory_mb() // 2))
    """Memory (MB) all sandboxed Python blocks of this server may hold at once:
    each block's `memory_mb` is charged before its process starts and given
    back when it ends.  Default: half the machine's memory (or its cgroup's)."""
    user_sandbox_memory_mb: int | None = field(default_factory=lambda: _env_int(
        "FLOWFORGE_USER_SANDBOX_MEMORY_MB", 0) or None)
    """Memory (MB) one user's sandboxed blocks may hold at once.  None: a
    quarter of `sandbox_memory_mb`."""
    sandbox_memory_wait: float = field(default_factory=lambda: _env_number(
        "FLOWFORGE_SANDBOX_MEMORY_WAIT") or 30.0)
    """Seconds a sandboxed block waits for memory within those budgets; then it
    fails, naming the budget and the setting that raises it."""
    max_document_blocks: int = field(default_factory=lambda: _env_int(
        "FLOWFORGE_MAX_DOCUMENT_BLOCKS", 2_000))
    """Blocks one workflow document may hold (counting those inside containers),
    checked when it is saved or validated; more is a located validation error.
    Big documents are compiled in a separate process.  0: no limit."""

    def memory_budget(self) -> Any:
        """The sandbox memory budget these settings describe (`sandbox.memory`)."""
        from flowforge.sandbox.memory import MemoryBudget

        return MemoryBudget(
            total_mb=self.sandbox_memory_mb,
            per_user_mb=self.user_sandbox_memory_mb or max(1, self.sandbox_memory_mb // 4),
            wait_seconds=self.sandbox_memory_wait,
            total_setting=f"FLOWFORGE_SANDBOX_MEMORY_MB, `flowforge serve "
                          f"--sandbox-memory-mb`",
            user_setting=f"FLOWFORGE_USER_SANDBOX_MEMORY_MB, `flowforge serve "
                         f"--user-sandbox-memory-mb`")

    def run_limits(self) -> dict[str, float]:
        """The per-run limits, as the services a run on this server is given."""
        return {name: value for name, value in (("max_run_events", self.max_run_events),
                                                ("max_loop_passes", self.max_loop_passes),
                                                ("max_value_mb", self.max_value_mb),
                                                ("max_output_mb", self.max_output_mb),
                                                ("max_run_mb", self.max_run_mb))
                if value}

    resume_interval: float = field(
        default_factory=lambda: _env_number("FLOWFORGE_RESUME_INTERVAL") or 5.0)
    """Seconds between looks for `waiting` runs that are due (a `wait` block's
    end, an approval's timeout), which this server then resumes; 0: never."""

    resume_cut_off: bool = field(default_factory=lambda: _resume_cut_off())
    """Runs a dead process left `running` are resumed here (default), or marked
    failed with the reason and how to resume them (FLOWFORGE_RESUME_CUT_OFF=0,
    `flowforge serve --no-resume`)."""

    def shared_provider_keys(self) -> dict[str, str]:
        """The provider key variables of this process, when the administrator shares them."""
        if not self.share_provider_keys:
            return {}
        return provider_keys_in(os.environ)
