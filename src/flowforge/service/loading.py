"""Loading workflows: from a file, text or data, to a `CompiledWorkflow`,
and resolving the references of nested `workflow` blocks."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from flowforge.blocks.registry import block_types
from flowforge.errors import NotFound, Problem, ValidationFailed, WorkflowError
from flowforge.workflow.compile import compile_workflow
from flowforge.workflow.graph import CompiledWorkflow
from flowforge.workflow.loader import document_from_data, parse_text, read_document
from flowforge.workflow.model import Workflow
from flowforge.workflow.paths import document_root, resolve_path

__all__ = ["load", "load_text", "compile_document", "register_workflow", "resolve_workflow",
           "registered_workflow", "model_problem"]

_REGISTERED: dict[str, CompiledWorkflow] = {}
_SUFFIXES = (".yaml", ".yml", ".json")


def compile_document(doc: Workflow, source: Any = None) -> CompiledWorkflow:
    label = str(source) if source else None
    try:
        graph = compile_workflow(doc, block_types(), label)
    except ValidationFailed as exc:
        raise ValidationFailed([*exc.problems, *model_problems(doc)], source=label) from None
    problems = model_problems(doc)
    if problems:
        raise ValidationFailed(problems, source=label)
    return CompiledWorkflow(doc, graph, Path(source) if source else None)


def model_problem(model: Any, where: str) -> Problem | None:
    """A model string whose provider flowforge does not know (`lokal/smollm2`,
    `gpt-4o` without one), with a did-you-mean; None when it is fine or templated."""
    from flowforge.providers.registry import known_prefixes

    if not isinstance(model, str) or "{{" in model:
        return None
    providers = known_prefixes()
    prefix, slash, name = model.partition("/")
    if not slash or not name:
        close = difflib.get_close_matches(model.split("/")[0], providers, n=1, cutoff=0.6)
        example = f"{close[0]}/{name or model}" if close else f"openai/{model}"
        return Problem(where, f"model '{model}' does not name a provider: write "
                              f"'<provider>/<model>', e.g. '{example}' (providers: "
                              f"{', '.join(providers)})")
    if prefix not in providers:
        close = difflib.get_close_matches(prefix, providers, n=1, cutoff=0.5)
        hint = f" - did you mean '{close[0]}/{name}'?" if close else ""
        return Problem(where, f"unknown provider '{prefix}' in model '{model}'{hint} "
                              f"(providers: {', '.join(providers)})")
    return None


def model_problems(doc: Workflow) -> list[Problem]:
    found = [model_problem(doc.defaults.get("model"), "defaults.model")]
    for where, spec in doc.iter_blocks():
        found.append(model_problem(spec.with_.get("model"), f"{where}.with.model"))
        fallback = spec.with_.get("fallback")
        for index, model in enumerate(fallback if isinstance(fallback, list) else []):
            found.append(model_problem(model, f"{where}.with.fallback[{index}]"))
    return [problem for problem in found if problem is not None]


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
    from flowforge.thinker.pipeline import workflow_data_if_pipeline
    converted = workflow_data_if_pipeline(target)      # Pipeline JSON (the thinker's) too
    if converted is not None:
        return compile_document(document_from_data(
            converted, str(target) if isinstance(target, (str, Path)) else "<pipeline>"))
    from flowforge.apps.chains import workflow_data_if_agent
    agent = workflow_data_if_agent(target)             # a prompt-chain Agent too
    if agent is not None:
        return compile_document(document_from_data(
            agent, str(target) if isinstance(target, (str, Path)) else "<agent>"),
            target if isinstance(target, (str, Path)) else None)
    if isinstance(target, dict):
        return compile_document(document_from_data(target))
    path = Path(target)
    return compile_document(read_document(path), path)


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
