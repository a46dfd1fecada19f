"""Build: what `flowforge build` and the server's `/api/create-agent` call.

`build_pipeline` is the thinker with the registry chosen and the events
wired; `provider_env_for` is where a build's model calls find keys.  Running
what was built is the service's (`service.pipeline`: `run_pipeline`, and
`automate`, which builds with `build_pipeline` and then runs).
"""

from __future__ import annotations

import os
from typing import Callable, Mapping

from flowforge.apps.thinker import BuildEvents, BuildResult, build
from flowforge.registry import Registry, get_registry
from flowforge.workflow.policy import Policy, is_provider_setting

__all__ = ["build_pipeline", "provider_env_for"]


async def build_pipeline(intent: str, *, model: str | None = None,
                         registry: Registry | None = None,
                         on_event: Callable[[dict], None] | None = None,
                         events: BuildEvents | None = None,
                         env: Mapping[str, str] | None = None,
                         owner: str | None = None) -> BuildResult:
    """`env`: where the build's model calls find keys (None: this process's
    environment); `owner`: whose the blocks it writes are (None: shared)."""
    events = events or BuildEvents()
    if on_event is not None:
        events.bus.observe(on_event)
    return await build(intent, model=model, registry=registry or get_registry(), events=events,
                       env=env, owner=owner)


def provider_env_for(policy: Policy, secrets: Mapping[str, str] | None = None,
                     provider_keys: Mapping[str, str] | None = None) -> dict[str, str]:
    """Where model calls made for a user outside a run (the builder's stages)
    find keys and settings, by the rule a run follows (`Run.provider_env`):
    trusted, this process's environment and the user's secrets; otherwise the
    host's provider *settings*, the keys the server shares (`provider_keys`),
    then the user's secrets (settings among them only with
    `provider_endpoints`), and never another key of the host."""
    if policy.trusted or policy.allows("server_env"):
        return {**os.environ, **(secrets or {})}
    env = {name: value for name, value in os.environ.items() if is_provider_setting(name)}
    env.update(provider_keys or {})
    may_choose = policy.allows("provider_endpoints")
    env.update({name: value for name, value in (secrets or {}).items()
                if may_choose or not is_provider_setting(name)})
    return env

