"""Loading workflows: from a file, text or data, to a `CompiledWorkflow`,
and resolving the references of nested `workflow` blocks."""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Mapping, Sequence

import orjson

from flowforge.blocks.type_table import block_types
from flowforge.engine import preflight
from flowforge.errors import NotFound, Problem, ValidationFailed, WorkflowError
from flowforge.hints import closest, did_you_mean, suggestion
from flowforge.formats.base import Imported
from flowforge.model_strings import closest_known, parse_model
from flowforge.workflow.compile import compile_workflow
from flowforge.workflow.graph import CompiledWorkflow
from flowforge.workflow.loader import document_from_data, parse_text, read_data
from flowforge.workflow.model import ModelUse, Workflow, nested_input_problems
from flowforge.workflow.paths import document_root, resolve_path
from flowforge.workflow.policy import looks_like_path

__all__ = ["load", "imported_document", "AS_GIVEN", "load_stored", "load_text",
           "compile_document", "register_workflow", "resolve_workflow", "registered_workflow",
           "model_problem", "model_problems", "key_problems", "function_problems",
           "nested_problems"]

_REGISTERED: dict[str, CompiledWorkflow] = {}
_SUFFIXES = (".yaml", ".yml", ".json")


def compile_document(doc: Workflow, source: Any = None, *,
                     seed_format: bool = False) -> CompiledWorkflow:
    """Validate and compile `doc`, with its nested workflows and its models.

    `source` is the file it was read from: only then are files it names
    (nested workflows, `scripted/` rules, `local/` weights) looked for, so a
    document sent to a server never makes it read a file. `seed_format`: an
    imported Pipeline JSON or prompt-chain agent, where a block's missing
    output field reads None as the seed has it; it is a warning
    (`compiled.graph.warnings`) instead of a problem."""
    label = str(source) if source else None
    path = Path(source) if source else None
    nested, known = nested_problems(doc, path)
    try:
        graph = compile_workflow(doc, block_types(), label, known_outputs=known,
                                 missing_outputs="warning" if seed_format else "error")
    except ValidationFailed as exc:
        raise ValidationFailed([*exc.problems, *nested, *model_problems(doc, path)],
                               source=label) from None
    problems = [*nested, *model_problems(doc, path)]
    if problems:
        raise ValidationFailed(problems, source=label)
    return CompiledWorkflow(doc, graph, path)


def model_problem(model: Any, where: str) -> Problem | None:
    """A model string whose provider flowforge does not know (`lokal/smollm2`,
    `gpt-4o` without one), with a did-you-mean; None when it is fine or templated."""
    from flowforge.providers.resolve import known_prefixes

    if not isinstance(model, str) or "{{" in model:
        return None
    providers = known_prefixes()
    parsed = parse_model(model)
    prefix, name = parsed.provider, parsed.name
    if not name:
        known = closest_known(model) if not prefix else None
        if known is not None:              # a bare name of no known family (`gtp-4o`)
            return Problem(where, f"model '{model}' is not a model name flowforge knows "
                                  f"without its provider{suggestion(known)} (write "
                                  f"'<provider>/<model>'; providers: {', '.join(providers)})")
        close = closest(model, providers)
        example = f"{close}/{name or model}" if close else f"openai/{model}"
        return Problem(where, f"model '{model}' does not name a provider: write "
                              f"'<provider>/<model>', e.g. '{example}' (providers: "
                              f"{', '.join(providers)})")
    if prefix not in providers:
        hint = did_you_mean(prefix, providers, 0.5, suffix=f"/{name}")
        return Problem(where, f"unknown provider '{prefix}' in model '{model}'{hint} "
                              f"(providers: {', '.join(providers)})")
    return None


def model_problems(doc: Workflow, source: Path | None = None) -> list[Problem]:
    """Models naming no known provider; with `source` (a file), also model
    files (`scripted/<rules>`, `local/<file.gguf>`) that do not exist or do not
    parse. Keys are checked where a run's environment is known (`key_problems`)."""
    from flowforge.providers.resolve import ProviderOptions, check_models

    problems, fine = [], []
    for use in doc.models():
        problem = None if use.embedding else model_problem(use.model, use.where)
        if problem is None:
            fine.append(use)
        else:
            problems.append(problem)
    # An embedding model is checked by name wherever the document comes from;
    # a model file only where the document has a folder.
    options = ProviderOptions(env=dict(doc.env),
                              base_dir=source.parent if source is not None else None)
    return problems + check_models([use for use in fine if use.embedding or source is not None],
                                   options, keys=False)


async def key_problems(compiled: CompiledWorkflow, env: Mapping[str, str]) -> list[Problem]:
    """Models whose provider key is missing from `env` (what `flowforge
    validate` checks against the process environment over the document's
    `env:`), the document's own and those of the workflows it runs, resolved
    as its run resolves them (a nested run's providers read the parent's
    environment), located in both.  A reference found nowhere is left to the
    run, as in `nested_problems`."""
    def resolve(reference: str, base: Any) -> CompiledWorkflow | None:
        try:
            return resolve_workflow(reference, base)
        except NotFound:
            return None

    own = _key_problems(compiled, env, compiled.model_uses)
    return own + await preflight.nested_problems(
        compiled, resolve, lambda child: _key_problems(
            child, env, child.block_model_uses))


async def function_problems(compiled: CompiledWorkflow) -> list[Problem]:
    """Functions the workflow and the workflows it runs call that this process
    has not registered (`flowforge validate --import`, as `run --import`)."""
    from flowforge.blocks.function import function_problems as unregistered

    def resolve(reference: str, base: Any) -> CompiledWorkflow | None:
        try:
            return resolve_workflow(reference, base)
        except NotFound:
            return None

    return unregistered(compiled.doc) + await preflight.nested_problems(
        compiled, resolve, lambda child: unregistered(child.doc))


def _key_problems(compiled: CompiledWorkflow, env: Mapping[str, str], uses: Sequence[ModelUse]
                  ) -> list[Problem]:
    from flowforge.providers.resolve import ProviderOptions, check_models

    models = [use for use in uses if use.embedding or model_problem(use.model, use.where) is None]
    base = compiled.source.parent if compiled.source is not None else None
    return check_models(models, ProviderOptions(env=env, base_dir=base), files=False)


def nested_problems(doc: Workflow, source: Path | None
                    ) -> tuple[list[Problem], dict[str, set[str] | None]]:
    """Each nested `workflow` block's document, validated with its parent:
    its problems located in both, its inputs checked against what it
    declares, and its outputs (response blocks, else sinks), by block id, for
    checking `{{block.<output>}}`. Files are read only for a document read
    from a file (`source`); a reference found nowhere is left to the run (a
    program may register the workflow later, a server finds it in its store)."""
    problems: list[Problem] = []
    known: dict[str, set[str] | None] = {}
    parent = source.name if source is not None else "the workflow"
    for where, spec in doc.iter_blocks():
        reference = spec.with_.get("workflow")
        if spec.type != "workflow" or not isinstance(reference, str) or "{{" in reference:
            continue
        used_by = f"(used by {parent} {where} '{spec.id}')"
        child = _nested_document(reference, source, f"{where}.with.workflow", used_by,
                                 problems)
        if child is None:
            continue
        graph = child.graph
        known[spec.id] = set(graph.response_ids or graph.sink_ids)
        problems.extend(nested_input_problems(child.doc, spec.with_.get("inputs"),
                                               f"{where}.with.inputs", reference))
    return problems, known


_NESTING: ContextVar[tuple[Path, ...]] = ContextVar("flowforge_nesting", default=())


def _nested_document(reference: str, source: Path | None, where: str, used_by: str,
                     problems: list[Problem]) -> CompiledWorkflow | None:
    if not looks_like_path(reference):
        found = registered_workflow(reference)
        if found is not None or source is None:
            return found
    elif source is None:
        return None
    # A document that (through others) includes itself is checked once: the
    # run limits how deep it goes.
    stack = _NESTING.get()
    if source.resolve() in stack:
        return None
    token = _NESTING.set((*stack, source.resolve()))
    try:
        if not looks_like_path(reference):
            try:
                return resolve_workflow(reference, source)
            except NotFound:
                return None              # maybe registered by the program before it runs
        path = Path(reference)
        path = path if path.is_absolute() else source.parent / path
        if not path.is_file():
            problems.append(Problem(where, f"nested workflow file not found: {path} (a path "
                                           f"is relative to {source.name}'s folder)"))
            return None
        return load(path)
    except ValidationFailed as exc:
        problems.extend(Problem(f"{reference}: {p.where}" if p.where else reference,
                                f"{p.message} {used_by}") for p in exc.problems)
    except WorkflowError as exc:
        at = f"{exc.where}: " if exc.where else ""
        problems.append(Problem(reference, f"{at}{exc.message} {used_by}"))
    finally:
        _NESTING.reset(token)
    return None


def load(target: str | Path | dict | Workflow | CompiledWorkflow) -> CompiledWorkflow:
    """A workflow from a path, a dict, a Workflow model; validated and compiled.
    Raises WorkflowError / ValidationFailed with every located problem."""
    if isinstance(target, CompiledWorkflow):
        return target
    if isinstance(target, Workflow):
        return compile_document(target)
    if not isinstance(target, (str, Path, dict)):
        raise WorkflowError(f"cannot load a workflow from {type(target).__name__}: give a file "
                            f"path, a mapping (the document) or a Workflow")
    if isinstance(target, dict):
        imported = imported_document(target, "<document>", options=AS_GIVEN)
        if imported is None:
            return compile_document(document_from_data(target))
        return compile_document(document_from_data(
            imported.document, f"<{imported.report.format}>"), seed_format=True)
    path = Path(target)
    data = read_data(path)
    imported = imported_document(data, str(path), options=AS_GIVEN)
    if imported is None:
        return compile_document(document_from_data(data, str(path)), path)
    return compile_document(document_from_data(imported.document, str(path)), path,
                            seed_format=True)


#: what `load` tells the formats: it runs the file as given, on the caller's own
#: machine, storing nothing (an Agent's keys written as text are run secrets)
AS_GIVEN = {"agent": {"literal_keys": True}}


def imported_document(data: Any, source: str, *,
                      options: Mapping[str, Mapping[str, Any]] | None = None
                      ) -> Imported | None:
    """The `Imported` (document and report) of data in a foreign format the
    formats room knows (Pipeline JSON, Agent JSON, ...), None for a flowforge
    document.  A mapping with `blocks:` is one, and then no format is asked
    (nor imported: loading a YAML file costs no converter).  `options` are
    the formats' settings (`formats.room.import_data`).  An imported document
    keeps the seed formats' reading of a missing output field (None, a
    warning).  A broken file, or one with nodes that have no counterpart, is a
    WorkflowError saying so (`flowforge import --partial` writes the rest)."""
    if not isinstance(data, dict) or "blocks" in data:
        return None
    from flowforge.formats import FormatError, ImportRefused, detect, import_data

    found = detect(data)
    if found is None:
        return None                  # the document loader says what is missing
    try:
        return import_data(data, source=source, format=found.name, options=options)
    except FormatError as exc:
        raise WorkflowError(exc.message, where=exc.where, source=exc.source) from None
    except ImportRefused as exc:
        raise WorkflowError(str(exc)) from None


#: Documents compiled for stored runs, by their canonical JSON (most recent last).
_STORED: "OrderedDict[bytes, CompiledWorkflow]" = OrderedDict()
_STORED_KEEP = 64
_STORED_LOCK = threading.Lock()


def load_stored(document: dict[str, Any]) -> CompiledWorkflow:
    """`load` for a stored run's document (a worker's or a resume's), compiled
    once per distinct document in this process: a worker pool runs the same
    few documents thousands of times, and compiling one again cost more than
    running a short run.  A compiled workflow is never changed by a run (the
    in-process engine shares one between runs at once), and compiling is a
    function of the document and of what this process registered (block types,
    functions, workflows: imported at start), so the copy is the same."""
    try:
        key = orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):     # (a value beyond JSON's: not kept)
        return load(document)
    with _STORED_LOCK:                 # (a server's threads may load too)
        found = _STORED.get(key)
        if found is not None:
            _STORED.move_to_end(key)
            return found
    compiled = load(document)          # a document that fails to load is not kept
    with _STORED_LOCK:
        _STORED[key] = compiled
        while len(_STORED) > _STORED_KEEP:
            _STORED.popitem(last=False)
    return compiled


def load_text(text: str, source: str = "<text>") -> CompiledWorkflow:
    return compile_document(document_from_data(parse_text(text, source), source))


def register_workflow(workflow: CompiledWorkflow | str | Path | dict) -> CompiledWorkflow:
    """Make a workflow reachable by id from nested `workflow` blocks."""
    compiled = load(workflow)
    _REGISTERED[compiled.id] = compiled
    return compiled


def registered_workflow(reference: str) -> CompiledWorkflow | None:
    """A workflow the host program registered under this id, or None."""
    return _REGISTERED.get(reference)


def resolve_workflow(reference: str, base: Path | None,
                     services: dict[str, Any] | None = None) -> CompiledWorkflow:
    """A nested workflow: a path (relative ones as `workflow.paths` says: the
    referring document's folder, or a server's files root), else an id
    registered in this process, else a file in that folder whose `id` matches."""
    looks_like_path = reference.endswith(_SUFFIXES) or "/" in reference
    folder = document_root(base, services)
    if looks_like_path:
        path = resolve_path(reference, folder, "nested workflow")
        if not path.exists():
            raise WorkflowError(f"nested workflow file not found: {path}")
        return load(path)
    if reference in _REGISTERED:
        return _REGISTERED[reference]
    if folder is None:
        raise NotFound(f"no workflow with id '{reference}': register it with "
                       f"flowforge.register_workflow(...) or give its path")
    for suffix in _SUFFIXES:
        candidate = folder / f"{reference}{suffix}"
        if candidate.exists():
            compiled = load(candidate)
            if compiled.id == reference:
                return compiled
    for candidate in sorted(folder.glob("*")):
        if candidate.suffix in _SUFFIXES:
            try:
                compiled = load(candidate)
            except WorkflowError:
                continue
            if compiled.id == reference:
                return compiled
    raise NotFound(f"no workflow with id '{reference}': register it with "
                   f"flowforge.register_workflow(...) or give a path such as './{reference}.yaml'")
