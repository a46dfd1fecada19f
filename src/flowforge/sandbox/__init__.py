"""Untrusted Python blocks run here: in another process, confined.

`await run_python(source, inputs, limits=Limits(...), network=False)` runs
`async def execute(inputs, context) -> dict` and returns a SandboxResult, or
raises SandboxError naming the rule or limit that stopped the block."""

from flowforge.sandbox.limits import MAX_LIMITS, Limits
from flowforge.sandbox.process import SandboxError, SandboxResult, run_python, sandbox_mode
from flowforge.sandbox.source_check import ALLOWED_MODULES, NETWORK_MODULES, check_source

__all__ = ["ALLOWED_MODULES", "Limits", "MAX_LIMITS", "NETWORK_MODULES", "SandboxError",
           "SandboxResult", "check_source", "run_python", "sandbox_mode"]
