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

Names a user sends are a way in too, whatever carries them (a document, a
request body, a budget, a route's parameter): a model name can name a file
(`scripted/<rules>`), a loopback server (`openai-compatible/ollama/...`) or a
hosted provider paid with the server's keys; a knowledge-base id can be a
folder (`.`); a workflow reference can be a path.  `Policy.check_model`,
`check_kb_id`, `check_workflow_ref` and `check_file` are the one gate every
route, block, tool, budget and builder stage asks, so one rule decides them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Collection, Iterable

from flowforge.errors import CapabilityDenied, Problem
from flowforge.model_strings import COMPATIBLE, parse_model

__all__ = ["CAPABILITIES", "CapabilityProblem", "CapabilityUse", "Policy", "TRUSTED",
           "policy_problems", "check_policy", "looks_like_path", "ENDPOINT_OPTIONS",
           "is_provider_setting", "model_capability", "model_key_variables",
           "LOOPBACK_SERVERS"]

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


#: `openai-compatible/<server>` presets whose default URL is on this machine
#: (providers/openai_compatible.PRESETS; a test keeps the two in step)
LOOPBACK_SERVERS = frozenset({"ollama", "lmstudio", "lm-studio", "vllm", "llamacpp",
                              "llama-cpp"})
#: provider -> the variables its key is read from, first wins (openai-compatible: per server)
_KEY_VARIABLES = {"openai": ("OPENAI_API_KEY",), "anthropic": ("ANTHROPIC_API_KEY",),
                  "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
                  "replicate": ("REPLICATE_API_TOKEN",)}
#: openai-compatible servers that need a key, and the variable that may hold it
_COMPATIBLE_KEYS = {"openrouter": "OPENROUTER_API_KEY", "azure": "AZURE_OPENAI_API_KEY"}


def _compatible_prefix(server: str) -> str:
    return "OPENAI_COMPATIBLE_" + re.sub(r"[^A-Za-z0-9]", "_", server).upper() + "_"


def model_key_variables(model: str) -> tuple[str, ...]:
    """Where the provider of `model` looks for its API key (empty for
    providers without one: local, scripted)."""
    parsed = parse_model(model)
    prefix, server = parsed.provider, parsed.server
    if prefix == COMPATIBLE:
        own = _compatible_prefix(server) + "API_KEY"
        return (own, _COMPATIBLE_KEYS[server]) if server in _COMPATIBLE_KEYS else (own,)
    return _KEY_VARIABLES.get(prefix, ())


def model_capability(model: Any) -> tuple[str, str] | None:
    """What a model string reaches of the host, as (capability, description):
    `scripted/<rules file>` or `local/<path to a GGUF file>` read a server file
    (the bundled `local/smollm2` reads none); `openai-compatible/<preset>` of a
    server on loopback (Ollama, vLLM, LM Studio, llama.cpp) calls this machine's
    ports, unless the administrator configured that server's URL
    (`OPENAI_COMPATIBLE_<NAME>_BASE_URL` in the server's environment)."""
    if not isinstance(model, str) or "{{" in model:
        return None
    parsed = parse_model(model)
    prefix, name = parsed.provider, parsed.name
    if prefix == "scripted" and name:
        return "server_files", f"the scripted model '{model}' (a rules file on the server)"
    if prefix == "local" and ("/" in name or name.endswith(".gguf") or name.startswith(".")):
        return "server_files", f"the local model file '{name}'"
    if prefix == "openai-compatible":
        server = name.partition("/")[0].lower()
        if server in LOOPBACK_SERVERS and not os.environ.get(
                _compatible_prefix(server) + "BASE_URL"):
            return "private_network", (f"the model '{model}' (a server on this machine's "
                                       f"loopback port)")
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
    """The capabilities one run (or one save, or one request) has.  `subject`
    names the user in refusals; `shared_keys`: the server lets this user's
    calls use its own provider keys (`--share-provider-keys`); `own_keys`: the
    names of the user's secrets (their own provider keys among them)."""

    __slots__ = ("granted", "trusted", "subject", "shared_keys", "own_keys")

    def __init__(self, granted: Iterable[str] = (), *, trusted: bool = False,
                 subject: str = "", shared_keys: bool = False,
                 own_keys: Collection[str] = ()) -> None:
        self.trusted = trusted
        self.granted = frozenset(CAPABILITIES) if trusted else frozenset(granted)
        self.subject = subject
        self.shared_keys = trusted or shared_keys
        self.own_keys = frozenset(own_keys)

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

    # -- the gate: every name a user sends that could reach the host -------------------
    def model_problem(self, model: Any, where: str = "model", *, own_key: bool = False
                      ) -> CapabilityProblem | None:
        """Why this user may not use `model` here, or None: the one decision on
        model names, for documents (`policy_problems`) and requests alike.  A
        model that reads a server file or calls a loopback server needs its
        capability; a hosted provider would be paid with the server's keys, so
        it needs the server to share them or the user to hold a key of their own
        (`own_key`: the caller brings one, e.g. a block's `api_key`).  A
        templated name is checked when it is resolved."""
        if self.trusted or not isinstance(model, str) or "{{" in model:
            return None
        if (use := model_capability(model)) and not self.allows(use[0]):
            return self.refusal(use[0], where, f"using {use[1]}")
        if own_key or self.shared_keys:
            return None
        names = model_key_variables(model)
        if not names or any(name in self.own_keys for name in names) or (
                model.startswith("openai-compatible/") and len(names) == 1):
            return None               # no key, the user's own, or an administrator's server
        prefix = parse_model(model).provider
        return CapabilityProblem(
            where, f"the model '{model}' is paid with a {prefix} key, and this server does "
                   f"not share its own: store yours as the secret {names[-1]} (`flowforge "
                   f"secrets set {names[-1]}`, or POST /api/secrets), or an administrator "
                   f"starts the server with --share-provider-keys")

    def check_model(self, model: Any, where: str = "model", *, own_key: bool = False) -> None:
        """Raise CapabilityDenied when `model_problem` refuses `model`."""
        if (problem := self.model_problem(model, where, own_key=own_key)) is not None:
            raise CapabilityDenied([problem], self.subject)

    def check_kb_id(self, kb_id: Any, where: str = "kb_id") -> None:
        """Refuse a knowledge-base id that names a server folder (`.`, `..`,
        `docs/`, `~/x`) without `server_files`; a plain name is the user's own
        base (or a shared one), `shared/NAME` the shared one by name."""
        if not isinstance(kb_id, str):
            return
        name = kb_id[len("shared/"):] if kb_id.startswith("shared/") else kb_id
        if "/" in name or "\\" in name or name.startswith((".", "~")):
            self.require("server_files", where,
                         f"the knowledge base '{kb_id}' (a folder on the server)")

    def check_workflow_ref(self, reference: Any, where: str = "workflow") -> None:
        """Refuse a nested workflow reference that is a file path without
        `server_files`; an id names one of the user's stored workflows."""
        if isinstance(reference, str) and "{{" not in reference and \
                looks_like_path(reference):
            self.require("server_files", where, f"the workflow file '{reference}'")

    def check_file(self, path: Any, where: str = "path") -> None:
        """Refuse reading a file or folder of the server without `server_files`."""
        if path is not None and not self.trusted:
            self.require("server_files", where, f"reading the server's file '{path}'")


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

    def model(value: Any, where: str) -> None:
        # a document's keys are checked when it runs (it may bring its own `api_key`)
        if (problem := policy.model_problem(value, where, own_key=True)) is not None:
            problems.append(problem)

    doc = compiled.doc
    for key in ENDPOINT_OPTIONS:
        if key in (doc.defaults.get("provider_options") or {}):
            need("provider_endpoints", f"defaults.provider_options.{key}",
                 f"setting the model provider's `{key}`")
    # Every model the document names (`Workflow.models()`: blocks, tool blocks,
    # fallbacks, embedding models); `--model` replaces all but the budget's.
    for use in doc.models():
        if not model_override or use.where.startswith("budget."):
            model(use.model, use.where)
    _scan(compiled.graph, set(doc.env), need)
    return problems


def _scan(graph: Any, own_env: set[str], need: Any) -> None:
    for node in graph.nodes.values():
        with_ = node.spec.with_
        for field in ("azure_endpoint", "azure_api_version"):      # an LLM block's own endpoint
            if with_.get(field):
                need("provider_endpoints", f"{node.where}.with.{field}",
                     f"setting the model provider's `{field}`")
        for name in sorted(node.env_refs):
            if name not in own_env:
                need("server_env", f"{node.where}.with",
                     f"reading the server's environment variable {name} ({{{{env.{name}}}}})")
        for use in node.info.capabilities(node.spec):
            need(use.capability, f"{node.where}.with.{use.where}" if use.where
                 else f"{node.where}.with", use.what)
        if node.children is not None:
            _scan(node.children, own_env, need)


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
