"""Who may make a workflow reach the host: the capability policy.

On one's own machine the person running a workflow is its author and the
machine's owner, so the CLI and the Python API trust the document (`TRUSTED`).
A server runs documents written by its users, and a document is then a way
into the host: a stdio MCP server is a command, a nested workflow path or a
knowledge `sources:` folder is a file read, `{{env.X}}` reads the server's
environment, a provider `base_url` with `api_key_env` sends a server key to a
URL of the author's choosing, `allow_private_network: true` lifts the SSRF
guard.  Each of those is a *capability*, granted by an administrator per user
or per role; everything else a document does stays inside the run.

The same `Policy` is checked twice: statically, when a document is saved and
when a run starts (`policy_problems`, from what each block type declares it
uses), and again by the code that does the thing at run time
(`Policy.require`), so a document that slips past the first check, a grant
revoked between save and run, or a nested workflow loaded later still meets
the second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from flowforge.errors import CapabilityDenied, Problem

__all__ = ["CAPABILITIES", "CapabilityProblem", "CapabilityUse", "Policy", "TRUSTED",
           "policy_problems", "check_policy", "looks_like_path", "ENDPOINT_OPTIONS",
           "is_provider_setting", "model_capability"]

#: capability -> what it lets a document do (shown in refusals and `users grants`)
CAPABILITIES: dict[str, str] = {
    "local_commands": "start commands on the server (MCP servers over stdio: `mcp: {command: ...}`)",
    "server_files": "read the server's files and folders (nested workflows and workflow tools "
                    "by path, knowledge `sources:`)",
    "server_env": "read the server's environment variables (`{{env.NAME}}` of a variable the "
                  "document does not define under `env:`)",
    "provider_endpoints": "choose where model requests go and which variable holds the key "
                          "(`base_url`, `api_key_env` in `provider_options`)",
    "private_network": "call loopback, private and link-local addresses "
                       "(`allow_private_network: true`)",
}

#: provider options that choose an endpoint or a key source
ENDPOINT_OPTIONS = ("base_url", "api_key_env", "api_key", "azure_endpoint", "api_version",
                    "organization", "project", "default_headers")

_PATH_SUFFIXES = (".yaml", ".yml", ".json")
_SETTING_SUFFIXES = ("_BASE_URL", "_ENDPOINT", "_API_BASE", "_API_VERSION", "_ORG_ID",
                     "_PROJECT_ID")


def is_provider_setting(name: str) -> bool:
    """An environment variable that tells a provider *where* to send requests
    (or how the local model uses the machine), as opposed to a key."""
    return name.endswith(_SETTING_SUFFIXES) or name.startswith("FLOWFORGE_")


def model_capability(model: Any) -> tuple[str, str] | None:
    """A model string that reads a server file: `scripted/<rules file>`, or
    `local/<path to a GGUF file>` (the bundled `local/smollm2` reads none)."""
    if not isinstance(model, str) or "{{" in model:
        return None
    prefix, _, name = model.partition("/")
    if prefix == "scripted" and name:
        return "server_files", f"the scripted model '{model}' (a rules file on the server)"
    if prefix == "local" and ("/" in name or name.endswith(".gguf")):
        return "server_files", f"the local model file '{name}'"
    return None


@dataclass(frozen=True)
class CapabilityProblem(Problem):
    """A located refusal naming the capability it needs."""

    capability: str = ""


@dataclass(frozen=True)
class CapabilityUse:
    """What a block type declares it will do: `where` is relative to the
    block's `with` (e.g. `tools[2].mcp.command`), `what` a short description."""

    capability: str
    where: str
    what: str


def looks_like_path(reference: str) -> bool:
    """A nested workflow reference that names a file rather than an id."""
    return reference.endswith(_PATH_SUFFIXES) or "/" in reference or "\\" in reference \
        or reference.startswith((".", "~"))


class Policy:
    """The capabilities one run (or one save) has.  `subject` names the user
    in refusals; `grant_hint` is how an administrator grants a capability."""

    __slots__ = ("granted", "trusted", "subject")

    def __init__(self, granted: Iterable[str] = (), *, trusted: bool = False,
                 subject: str = "") -> None:
        self.trusted = trusted
        self.granted = frozenset(CAPABILITIES) if trusted else frozenset(granted)
        self.subject = subject

    def __repr__(self) -> str:
        return "Policy(trusted)" if self.trusted else \
            f"Policy({sorted(self.granted)}, subject={self.subject!r})"

    def allows(self, capability: str) -> bool:
        return self.trusted or capability in self.granted

    def refusal(self, capability: str, where: str, what: str) -> CapabilityProblem:
        who = f"user '{self.subject}'" if self.subject else "this user"
        name = self.subject or "NAME"
        return CapabilityProblem(
            where, f"{what} needs the capability '{capability}' ({CAPABILITIES[capability]}), "
                   f"which {who} has not been granted; an administrator grants it with "
                   f"`flowforge users grant {name} {capability}`", capability)

    def require(self, capability: str, where: str, what: str) -> None:
        """Raise CapabilityDenied unless `capability` is granted (the run-time check)."""
        if not self.allows(capability):
            raise CapabilityDenied([self.refusal(capability, where, what)], self.subject)


TRUSTED = Policy(trusted=True)


def policy_problems(compiled: Any, policy: Policy, model_override: str | None = None
                    ) -> list[CapabilityProblem]:
    """Every capability the document uses that `policy` does not grant, located.

    `compiled` is a CompiledWorkflow; block types declare their uses through
    `capabilities(spec)` (duck-typed: the workflow layer does not import blocks).
    With `model_override` (a server's `--model`) the document's models are not used."""
    if policy.trusted:
        return []
    problems: list[CapabilityProblem] = []

    def need(capability: str, where: str, what: str) -> None:
        if not policy.allows(capability):
            problems.append(policy.refusal(capability, where, what))

    doc = compiled.doc
    for key in ENDPOINT_OPTIONS:
        if key in (doc.defaults.get("provider_options") or {}):
            need("provider_endpoints", f"defaults.provider_options.{key}",
                 f"setting the model provider's `{key}`")
    models = not model_override
    if models and (use := model_capability(doc.defaults.get("model"))):
        need(use[0], "defaults.model", f"using {use[1]}")
    _scan(compiled.graph, set(doc.env), need, models)
    return problems


def _scan(graph: Any, own_env: set[str], need: Any, models: bool) -> None:
    for node in graph.nodes.values():
        with_ = node.spec.with_
        if models:
            for key, value in [("model", with_.get("model")),
                               *((f"fallback[{i}]", m) for i, m in enumerate(
                                   with_.get("fallback") or [] if isinstance(
                                       with_.get("fallback"), list) else []))]:
                if use := model_capability(value):
                    need(use[0], f"{node.where}.with.{key}", f"using {use[1]}")
        for name in sorted(node.env_refs):
            if name not in own_env:
                need("server_env", f"{node.where}.with",
                     f"reading the server's environment variable {name} ({{{{env.{name}}}}})")
        declared = getattr(node.info, "capabilities", None)
        for use in (declared(node.spec) if declared is not None else ()):
            need(use.capability, f"{node.where}.with.{use.where}" if use.where
                 else f"{node.where}.with", use.what)
        if node.children is not None:
            _scan(node.children, own_env, need, models)


def check_policy(compiled: Any, policy: Policy, source: str | None = None,
                 model_override: str | None = None) -> None:
    """Raise CapabilityDenied listing every refused use (the save/run-time check);
    ValidationFailed when a value of the server's environment, read with
    `server_env`, goes anywhere but a credential field."""
    problems = policy_problems(compiled, policy, model_override)
    if problems:
        raise CapabilityDenied(problems, policy.subject, source)
    if not policy.trusted and policy.allows("server_env"):
        from flowforge.errors import ValidationFailed
        from flowforge.workflow.secret_sinks import env_sink_problems

        sinks = env_sink_problems(compiled)
        if sinks:
            raise ValidationFailed(sinks, source=source)
