"""Validate a workflow and compile it into a `Graph`, reporting every problem.

A user fixing a document wants the whole list at once, each problem located
(`blocks[3].with.prompt: unknown block 'serach' in {{serach.context}} - did
you mean 'search'?`), not the first one per attempt.  So every check appends
to one list and compiling stops only at the end.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from pydantic import ValidationError

from flowforge.errors import Problem, ValidationFailed
from flowforge.hints import did_you_mean
from flowforge.workflow import expressions, safe_regex, secret_sinks, templates
from flowforge.workflow.config_errors import config_problems, format_loc, placeholders
from flowforge.workflow.graph import (ALTERNATIVE, DATA, ERROR, NAMESPACES, ON_FAILURE,
                                      REQUIRED, Graph, Node)
from flowforge.workflow.model import BlockSpec, Join, Workflow
from flowforge.workflow.model_names import qualify_models
from flowforge.workflow.output_check import output_problems
from flowforge.workflow.seed_fields import canonical_fields

__all__ = ["compile_workflow", "format_loc"]


def compile_workflow(doc: Workflow, block_types: Mapping[str, Any],
                     source: str | None = None, *,
                     known_outputs: Mapping[str, set[str] | None] | None = None,
                     missing_outputs: str = "error") -> Graph:
    """Check `doc` against the known block types and compile it.

    Raises ValidationFailed listing every problem found. A reference to a
    field a block does not give is a problem, or with `missing_outputs=
    "warning"` (the seed formats: it reads None there) one of `graph.warnings`;
    `known_outputs` gives block ids' fields (nested workflows, see output_check)."""
    problems: list[Problem] = []
    qualified = qualify_models(doc)          # `gpt-4o` -> `openai/gpt-4o`, said as warnings
    all_ids: dict[str, str] = {}
    for where, spec in doc.iter_blocks():
        if spec.id in all_ids:
            problems.append(Problem(f"{where}.id", f"duplicate block id '{spec.id}' "
                                    f"(first used at {all_ids[spec.id]}); ids must be unique"))
        else:
            all_ids[spec.id] = where
        if spec.id in NAMESPACES and not (spec.id == "input" and spec.type == "input"):
            problems.append(Problem(f"{where}.id", f"'{spec.id}' is a reserved template "
                                    f"namespace; choose another block id"))
    problems.extend(_input_schema_problems(doc.inputs))
    if not problems:
        problems.extend(_trigger_input_problems(doc))
    compiler = _Compiler(doc, block_types, problems, set(all_ids))
    graph = compiler.compile_scope(doc.blocks, "", outer={}, in_container=False)
    problems.extend(secret_sinks.sink_problems(doc, block_types))     # secrets: sinks only
    problems.extend(_mirror_problems(doc, block_types))
    if not problems:
        compiler.check_cycles(graph, "")
    graph.warnings.extend(qualified)
    graph.warnings.extend(compiler.warnings)
    fields = output_problems(doc, graph, known_outputs)
    (graph.warnings if missing_outputs == "warning" else problems).extend(fields)
    if problems:
        raise ValidationFailed(problems, source=source)
    return graph


class _Compiler:
    def __init__(self, doc: Workflow, block_types: Mapping[str, Any],
                 problems: list[Problem], all_ids: set[str]):
        self.doc = doc
        self.types = block_types
        self.problems = problems
        self.all_ids = all_ids
        self.warnings: list[Problem] = []        # a block type's own (`BlockType.warnings`)

    def add(self, where: str, message: str) -> None:
        self.problems.append(Problem(where, message))

    # -- scopes ---------------------------------------------------------------
    def compile_scope(self, specs: list[BlockSpec], prefix: str,
                      outer: dict[str, str], in_container: bool) -> Graph:
        """Compile sibling blocks. `outer` maps visible enclosing names to ids."""
        local: dict[str, str] = {}
        for spec in specs:
            local[spec.id] = spec.id
            if spec.name:
                local.setdefault(templates.normalize_name(spec.name), spec.id)
        visible = {**outer, **local}
        graph = Graph(nodes={}, names=local)
        for index, spec in enumerate(specs):
            where = f"{prefix}blocks[{index}]"
            node = self.compile_block(spec, where, visible, local, in_container, graph)
            if node is not None:
                graph.nodes[spec.id] = node
        self.link(graph, specs, prefix)
        return graph

    def compile_block(self, spec: BlockSpec, where: str, visible: dict[str, str],
                      local: dict[str, str], in_container: bool, graph: Graph) -> Node | None:
        type_name = spec.type or ("registry" if spec.uses else None)
        if type_name is None:
            self.add(f"{where}.type", "missing block type (e.g. `type: agent`)")
            return None
        info = self.types.get(type_name)
        if info is None:
            hint = did_you_mean(type_name, self.types)
            self.add(f"{where}.type", f"unknown block type '{type_name}'{hint}; known types: "
                     f"{', '.join(sorted(self.types))}")
            return None
        if spec.type is not None and info.type_name != type_name:
            spec.type = type_name = info.type_name    # another system's name (`trigger`)
        self.canonical_names(spec, info, where)
        node = Node(id=spec.id, type=type_name, spec=spec, where=where, info=info,
                    retry=spec.retry_policy(), timeout=spec.timeout,
                    alias=templates.normalize_name(spec.name) if spec.name else None)
        config_ok = self.compile_config(node, info)
        # A block type's own checks read `with` as its config describes it; when
        # the config is malformed they are not asked (its problems are listed).
        hook = self.hook if config_ok else (lambda *args, default: default)
        for problem in hook(info.check, spec, where, self.all_ids, default=[]):
            self.problems.append(problem)
        self.warnings.extend(hook(info.warnings, spec, where, default=[]))

        if spec.blocks is not None and not info.container:
            self.add(f"{where}.blocks", f"block type '{type_name}' cannot hold child blocks")
        children_names: dict[str, str] = {}
        if info.container:
            if not spec.blocks:
                inside = "blocks" in spec.with_      # a common slip: listed under `with:`
                self.add(f"{where}.blocks", f"a {type_name} block needs child `blocks:`"
                         + (" beside `with:`, not inside it" if inside else ""))
            else:
                inner_outer = {k: v for k, v in visible.items() if v != spec.id}
                node.children = self.compile_scope(spec.blocks, f"{where}.", inner_outer, True)
                children_names = node.children.names

        # Edges from template and expression references in `with`.
        own_scope = set(children_names) | set(info.scope_names(spec))
        env_refs: set[str] = set()
        try:
            refs = list(templates.references_in(
                {k: v for k, v in spec.with_.items() if k not in info.raw_fields},
                f"{where}.with"))
        except expressions.ExpressionError as exc:
            if config_ok:                    # else compiling the config reported it
                self.add(f"{where}.with", str(exc))
            refs = []
        node.config_ok = config_ok
        for location, source in hook(info.expressions, spec, default=[]):
            try:
                refs.extend(templates.Reference(f"{where}.with.{location}", path, source)
                            for path in expressions.names_in(source))
            except expressions.ExpressionError as exc:
                self.add(f"{where}.with.{location}", str(exc))
        for ref in refs:
            target = self.resolve_ref(ref, visible, own_scope, in_container or info.container,
                                      spec.id)
            if ref.root == "env" and len(ref.path) > 1:
                env_refs.add(ref.path[1])
            if target is not None:
                node.inputs[target] = DATA
        node.env_refs = frozenset(env_refs)
        node.reads = tuple(refs)
        if isinstance(spec.after, Join):
            both = sorted(set(spec.after.all) & set(spec.after.any))
            if both:
                self.add(f"{where}.after", f"'{both[0]}' is listed under both `all` and `any`: "
                         f"keep it in one (`all`: it must run; `any`: one of them must)")
        for dep in spec.after_ids():
            if dep not in visible:
                self.add(f"{where}.after", f"unknown block '{dep}' in after{self.hint(dep, visible)}")
            elif dep == spec.id:
                self.add(f"{where}.after", f"block '{dep}' cannot come after itself")
            else:
                node.inputs[visible[dep]] = DATA
        node.joins = frozenset(visible[dep] for dep in spec.join_ids()
                               if dep in visible and dep != spec.id)
        if node.children is not None:
            for ref_id in node.children.outer_refs:
                if ref_id in local:
                    node.inputs[ref_id] = DATA
                else:
                    graph.outer_refs.add(ref_id)
        for target in node.inputs:
            if target not in local:
                graph.outer_refs.add(target)
        node.inputs = {k: v for k, v in node.inputs.items() if k in local}
        node.joins = frozenset(j for j in node.joins if j in node.inputs)
        return node

    def canonical_names(self, spec: BlockSpec, info: Any, where: str) -> None:
        """Seed systems' field names (`systemPrompt`, `maxTokens`, ...) become
        the canonical ones in `spec.with_` before anything reads it."""
        fields = info.Config.model_fields
        if not fields or not spec.with_:
            return
        with_, problems = canonical_fields(spec.with_, fields, info.seed_fields)
        for key, message in problems:
            self.add(f"{where}.with.{key}", message)
        spec.with_ = with_

    def hook(self, method: Any, *args: Any, default: Any) -> Any:
        """Call a block type's check hook; a hook that trips on a document is a
        located problem, never a crash of `validate`."""
        try:
            return method(*args)
        except Exception as exc:  # noqa: BLE001 - user documents reach third-party hooks
            where = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
            self.add(where, f"cannot be checked: {type(exc).__name__}: {exc}")
            return default

    def compile_config(self, node: Node, info: Any) -> bool:
        """Validate `with` against the block's config; False when it is malformed."""
        before = len(self.problems)
        spec = node.spec
        config_model = info.Config
        templated = {k: v for k, v in spec.with_.items() if k not in info.raw_fields}
        try:
            if templates.has_templates(templated):
                raw = {k: v for k, v in spec.with_.items() if k in info.raw_fields}
                resolve_templated = templates.compile_value(templated)
                node.resolve = (lambda scope: {**resolve_templated(scope), **raw}) if raw \
                    else resolve_templated
                config_model.model_validate({**placeholders(templated), **raw})
            else:
                node.config = config_model.model_validate(spec.with_)
        except expressions.ExpressionError as exc:
            self.add(f"{node.where}.with", str(exc))
        except ValidationError as exc:
            for problem in config_problems(exc.errors(), spec.with_, config_model,
                                           f"{node.where}.with"):
                self.add(problem.where, problem.message)
        key = spec.with_.get("api_key")
        if "api_key" in config_model.model_fields and isinstance(key, str) and key and \
                not templates.has_templates(key):
            self.add(f"{node.where}.with.api_key",
                     "write the key as a template - {{env.TEAM_KEY}} or {{secrets.NAME}} - "
                     "not the key itself: a workflow document is stored and shown, so a key "
                     "written in it is not secret")
        return len(self.problems) == before

    def resolve_ref(self, ref: templates.Reference, visible: dict[str, str],
                    own_scope: set[str], in_container: bool, self_id: str) -> str | None:
        root = ref.root
        if not root:
            self.add(ref.where, f"empty template reference {ref.text}")
            return None
        if ref.problem:
            self.add(ref.where, ref.problem)
            return None
        if root in NAMESPACES:
            self.check_namespace(ref, in_container)
            return None
        if root in own_scope:
            return None
        normalized = templates.normalize_name(root)
        target = visible.get(root) or visible.get(normalized)
        if target is None:
            if root in self.all_ids:
                self.add(ref.where, f"block '{root}' in {ref.text} is inside a container and not "
                         f"visible here; read it through the container's output")
            else:
                # a misspelt namespace (`inptu`) is as likely as a misspelt block
                candidates = {**{ns: ns for ns in NAMESPACES}, **visible}
                hint = self.hint(root, candidates)
                if not hint and "-" in root and not ref.text.startswith("{{"):
                    hint = " (a subtraction is written with spaces: `a - b.c`)"
                self.add(ref.where, f"unknown block '{root}' in {ref.text}{hint}")
            return None
        if target == self_id:
            self.add(ref.where, f"block '{self_id}' cannot read its own output ({ref.text})")
            return None
        return target

    def check_namespace(self, ref: templates.Reference, in_container: bool) -> None:
        root, path = ref.root, ref.path
        if root in ("env", "secrets"):
            # A value read whole by a template can be recognised and redacted
            # wherever it lands; one computed by an expression (upper(env.X),
            # env['X']) or the whole namespace cannot.
            in_template = templates.TEMPLATE_RE.fullmatch(ref.text) is not None
            if not in_template:
                self.add(ref.where, f"`{root}` cannot be used in an expression ({ref.text}): a "
                         f"computed value could not be kept out of records; read it in a "
                         f"template, {{{{{root}.NAME}}}}, " + ("in a `set` block first"
                         if root == "env" else "in a credential field (`api_key`, `headers`)"))
            elif len(path) != 2:
                self.add(ref.where, f"{ref.text}: read one value, {{{{{root}.NAME}}}}; the "
                         f"whole `{root}` namespace (or a path inside a value) is not "
                         f"available")
            return
        if root == "loop" and not in_container:
            self.add(ref.where, f"{ref.text}: `loop` is only available inside a loop or "
                     f"parallel block")
        elif root == "input" and len(path) > 1 and self.doc.inputs and path[1] not in self.doc.inputs:
            self.add(ref.where, f"unknown input '{path[1]}' in {ref.text}; declared inputs: "
                     f"{', '.join(self.doc.inputs)}")
        elif root == "vars" and len(path) > 1 and path[1] not in self.doc.variables:
            self.add(ref.where, f"unknown variable '{path[1]}' in {ref.text}"
                     f"{did_you_mean(path[1], self.doc.variables)}; add it under `variables:`")
        elif root == "memory" and len(path) > 1 and path[1] not in self.doc.memory:
            self.add(ref.where, f"memory key '{path[1]}' in {ref.text} is not declared; "
                     f"add it to `memory:`")

    def hint(self, name: str, visible: dict[str, str]) -> str:
        return did_you_mean(name, visible)

    # -- edges ----------------------------------------------------------------
    def link(self, graph: Graph, specs: list[BlockSpec], prefix: str) -> None:
        for index, spec in enumerate(specs):
            node = graph.nodes.get(spec.id)
            if node is None:
                continue
            where = f"{prefix}blocks[{index}]"
            targets = self.hook(node.info.implied_targets, spec, default=[]) \
                if node.config_ok else []
            for target in targets:
                target_node = graph.nodes.get(target)
                at = _locate(spec.with_, target, f"{where}.with")
                if target_node is None:
                    if target in graph.nodes or target in self.all_ids:
                        self.add(at, f"target '{target}' must be a sibling block")
                    else:
                        self.add(at, f"unknown target block '{target}'"
                                 f"{did_you_mean(target, graph.nodes)}")
                elif target == spec.id:
                    self.add(f"{where}.with", f"block '{target}' cannot route to itself")
                else:
                    target_node.inputs.setdefault(spec.id, DATA)
            if spec.on_error is not None:
                handler = graph.nodes.get(spec.on_error)
                if handler is None:
                    self.add(f"{where}.on_error", f"unknown block '{spec.on_error}'"
                             f"{did_you_mean(spec.on_error, graph.nodes)}; on_error names a "
                             f"sibling block that runs if this one fails")
                elif spec.on_error == spec.id:
                    self.add(f"{where}.on_error", "a block cannot be its own on_error handler")
                else:
                    handler.inputs[spec.id] = ERROR
        for node_id, node in graph.nodes.items():
            for source, kind in node.inputs.items():
                if source in graph.nodes:
                    graph.nodes[source].dependants.append(node_id)
                    mode = (ON_FAILURE if kind == ERROR else REQUIRED) | \
                        (ALTERNATIVE if source in node.joins else REQUIRED)
                    graph.nodes[source].out.append((node_id, mode))

    def check_cycles(self, graph: Graph, prefix: str) -> None:
        # Iterative depth-first search (a chain of thousands of blocks must not
        # hit Python's recursion limit); state 1 = on the current path.
        state: dict[str, int] = {}
        for start in graph.nodes:
            if start in state:
                continue
            path: list[str] = [start]
            iterators = [iter(graph.nodes[start].dependants)]
            state[start] = 1
            while iterators:
                dep = next(iterators[-1], None)
                if dep is None:
                    state[path.pop()] = 2
                    iterators.pop()
                    continue
                if state.get(dep) == 1:
                    cycle = path[path.index(dep):] + [dep]
                    self.add(graph.nodes[dep].where, "cycle: " + " -> ".join(cycle))
                    return
                if dep not in state:
                    state[dep] = 1
                    path.append(dep)
                    iterators.append(iter(graph.nodes[dep].dependants))
        for node in graph.nodes.values():
            if node.children is not None:
                self.check_cycles(node.children, f"{node.where}.")


_JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")


def _mirror_problems(doc: Workflow, block_types: Mapping[str, Any]) -> list[Problem]:
    """Two blocks that make one store mirror different declarations (two
    knowledge blocks syncing one base from different `sources:`): at every run
    each sync would remove what the other stored, and a search would find
    only what the last sync left."""
    first: dict[tuple[str, str], tuple[str, tuple[str, ...]]] = {}
    problems: list[Problem] = []
    for where, spec in doc.iter_blocks():
        kind = block_types.get(spec.type or "")
        try:
            mirrored = kind.mirrors(spec) if kind is not None else None
        except Exception:  # noqa: BLE001 - a malformed config is located by its own check
            mirrored = None
        if mirrored is None:
            continue
        store, name, field, declared = mirrored
        seen = first.setdefault((store, name), (spec.id, declared))
        if seen[1] != declared:
            problems.append(Problem(
                f"{where}.with.{field}",
                f"blocks '{seen[0]}' and '{spec.id}' both make {store} '{name}' mirror "
                f"their `{field}:`, and they differ ({', '.join(seen[1])} against "
                f"{', '.join(declared)}): at every run each would remove what the other "
                f"stored; give both the same `{field}:`, or give each a {store} of its own"))
    return problems


def _trigger_input_problems(doc: Any) -> list[Problem]:
    """A schedule's inputs must be a valid run's inputs: known now, not at 7 a.m."""
    from flowforge.workflow.schema_check import schema_problems

    if not doc.triggers:
        return []
    # required as a run reads it (engine/inputs.py): no default and not `optional: true`
    schema = {"type": "object", "additionalProperties": False,
              "properties": {name: {k: v for k, v in spec.items() if k != "optional"}
                             if isinstance(spec, dict) else spec
                             for name, spec in doc.inputs.items()},
              "required": [name for name, spec in doc.inputs.items()
                           if not (isinstance(spec, dict) and ("default" in spec
                                                              or spec.get("optional")))]}
    return [Problem(f"triggers[{index}].inputs", message)
            for index, trigger in enumerate(doc.triggers)
            for message in schema_problems(schema, trigger.inputs)]


def _input_schema_problems(inputs: dict[str, Any]) -> list[Problem]:
    """Each input must be a JSON Schema that a validator can use, checked now
    against the 2020-12 meta-schema, not when the first run trips on it."""
    if not inputs:
        return []
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    problems = []
    for name, schema in inputs.items():
        where = f"inputs.{name}"
        if "$ref" in json.dumps(schema, default=str):
            problems.append(Problem(where, "`$ref` is not supported in input schemas: write "
                                           "the schema out"))
            continue
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
            message = exc.message
            if exc.validator in ("anyOf", "enum") and "type" in list(exc.path)[-1:]:
                given = exc.instance if isinstance(exc.instance, str) else str(exc.instance)
                message = (f"unknown type {given!r}{did_you_mean(given, _JSON_TYPES)}; "
                           f"JSON Schema types: {', '.join(_JSON_TYPES)}")
            problems.append(Problem(where + path, message))
        except (RecursionError, ValueError, TypeError) as exc:
            problems.append(Problem(where, f"not a usable JSON Schema: {exc}"))
        else:
            problems.extend(safe_regex.pattern_problems(schema, where))
    return problems


def _locate(value: Any, wanted: str, where: str) -> str:
    """Where in `with` a target id is written (`cases[0].goto`), for the problem's place."""
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, at = stack.pop(0)
        if item == wanted:
            return at
        if isinstance(item, dict):
            stack.extend((v, f"{at}.{k}") for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(item))
    return where
