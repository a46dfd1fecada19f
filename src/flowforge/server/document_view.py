"""What an editor needs of a workflow document: its problems at their lines,
and its compiled graph as plain nodes and edges.

The web app draws the graph from these and never parses templates itself:
edges come from the engine's compiler (template references, `after:`,
`on_error:`, a condition's `goto`s), so the picture is the graph that runs.
A problem's `where` (`blocks[3].with.prompt`) is mapped back to the line of
the text that holds it, so an editor can underline it as the user types.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from flowforge.errors import CapabilityDenied, Problem, ValidationFailed, WorkflowError
from flowforge.workflow.graph import ERROR, CompiledWorkflow, Graph
from flowforge.workflow.output_check import declared_outputs

__all__ = ["locate", "located", "graph_view", "check_text"]

_TOKEN = re.compile(r"\[(\d+)\]|([^.\[\]]+)")
_AT_LINE = re.compile(r"at line (\d+)")
_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)    # libyaml: lines at C speed


def locate(text: str, where: str) -> int | None:
    """The 1-based line of `text` holding the value at `where`, as near as the
    text allows (the deepest part of the path that exists); None if unparsable."""
    try:
        node = yaml.compose(text, Loader=_FAST_LOADER)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    line = node.start_mark.line + 1
    for index, key in _TOKEN.findall(where):
        found = None
        if index and isinstance(node, yaml.SequenceNode) and int(index) < len(node.value):
            found = node.value[int(index)]
            line = found.start_mark.line + 1
        elif key and isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                    found = value_node
                    line = key_node.start_mark.line + 1
                    break
        if found is None:
            break
        node = found
    return line


def located(text: str, problem: Problem) -> dict[str, Any]:
    """`{where, message, line}`: a problem (or warning) at its line of `text`."""
    line = locate(text, problem.where) if problem.where else None
    if line is None:
        match = _AT_LINE.search(problem.message)
        line = int(match.group(1)) if match else 1
    return {"where": problem.where, "message": problem.message, "line": line}


def check_text(text: str, *, policy: Any = None, model_override: str | None = None,
               chain_base_url: str | None = None, max_blocks: int = 0
               ) -> tuple[list[dict[str, Any]], CompiledWorkflow | None]:
    """Every located problem of a YAML/JSON document (the same messages as
    `flowforge validate`, plus what the saver's policy refuses), and the
    compiled workflow when there are none.  A document of a foreign format
    (a prompt-chain Agent, a Pipeline: the formats room's) is checked as the
    workflow it is saved as (`chain_base_url` as when saving); more
    than `max_blocks` blocks (0: any number) is a problem at `blocks`."""
    from flowforge.service.compiling import check_block_count
    from flowforge.service.loading import compile_document, imported_document
    from flowforge.workflow.loader import document_from_data, parse_text
    from flowforge.workflow.policy import check_policy

    try:
        data = parse_text(text, "<document>")
        imported = imported_document(data, "<document>",
                                     options={"agent": {"base_url": chain_base_url}})
        seed = imported is not None
        if imported is not None:
            data = imported.document
        check_block_count(data, max_blocks)
        compiled = compile_document(document_from_data(data, "<document>"), seed_format=seed)
        if policy is not None:
            check_policy(compiled, policy, model_override=model_override)
    except (ValidationFailed, CapabilityDenied) as exc:
        return [located(text, p) for p in exc.problems], None
    except WorkflowError as exc:
        return [located(text, Problem(exc.where, exc.message))], None
    return [], compiled


def check_text_view(text: str, policy: Any, model_override: str | None,
                    chain_base_url: str | None, max_blocks: int
                    ) -> tuple[list[dict[str, Any]], Any, dict[str, Any] | None, list]:
    """`check_text` as a compile pool's job (`service.compiling`): the located
    problems and, when there are none, what crosses back between processes
    (a compiled workflow cannot): a `Checked`, the graph, the located join
    warnings."""
    from flowforge.service.compiling import Checked
    from flowforge.workflow.joins import join_warnings

    problems, compiled = check_text(text, policy=policy, model_override=model_override,
                                    chain_base_url=chain_base_url, max_blocks=max_blocks)
    if compiled is None:
        return problems, None, None, []
    checked = Checked(compiled.id, {}, tuple(compiled.workflow_references))
    return [], checked, graph_view(compiled), [located(text, warning) for warning
                                               in join_warnings(compiled.graph)]


def graph_view(compiled: CompiledWorkflow) -> dict[str, Any]:
    """`{nodes, edges}`: every block (children carry their container's id in
    `parent`) and every dependency; a router's or condition's outgoing edges
    are `branch` edges labelled with the case that takes them."""
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    _add_scope(compiled.graph, None, nodes, edges, compiled.doc)
    return {"id": compiled.id, "name": compiled.doc.name or compiled.id,
            "nodes": nodes, "edges": edges}


def _add_scope(graph: Graph, parent: str | None, nodes: list, edges: list, doc: Any) -> None:
    for node in graph.nodes.values():
        spec = node.spec
        entry: dict[str, Any] = {"id": node.id, "type": node.type, "name": node.name,
                                 "parent": parent, "where": node.where,
                                 "container": node.children is not None}
        if spec.description:
            entry["description"] = spec.description
        if node.type == "workflow" and isinstance(spec.with_.get("workflow"), str):
            entry["workflow"] = spec.with_["workflow"]
        outputs = _outputs(node, doc)
        if outputs is not None:
            entry["outputs"] = outputs
        nodes.append(entry)
        if node.children is not None:
            _add_scope(node.children, node.id, nodes, edges, doc)
    for node in graph.nodes.values():
        for source, kind in node.inputs.items():
            origin = graph.nodes.get(source)
            edge: dict[str, Any] = {"id": f"{source}->{node.id}", "source": source,
                                    "target": node.id, "kind": "error" if kind == ERROR
                                    else "data"}
            if kind == ERROR:
                edge["label"] = "on error"
            elif origin is not None and origin.info.routes:
                edge["kind"] = "branch"
                edge["label"] = _branch_label(origin, node)
            edges.append(edge)


def _outputs(node: Any, doc: Any) -> list[str] | None:
    """The output fields the document tells of (what an editor offers after
    `{{block.`), None when they are open."""
    fields = declared_outputs(node, doc)
    return sorted(fields) if fields is not None else None


def _branch_label(router: Any, target: Any) -> str:
    """A condition's cases (`when`) and/or `default` that go to `target`, an
    approval's `approve` or `reject`, a router's candidate name."""
    with_ = router.spec.with_
    if router.type == "condition":
        labels = [str(case.get("when", "")) for case in with_.get("cases") or []
                  if isinstance(case, dict) and case.get("goto") == target.id]
        if with_.get("default") == target.id:
            labels.append("default")
        return " | ".join(labels) or target.name
    if router.type == "approval":
        return "reject" if with_.get("on_reject") == target.id else "approve"
    return target.name
