"""Condition expressions (`grade.accuracy >= 8 and not review.flagged`).

Evaluated by simpleeval, never by Python's `eval`: no attribute starting with
an underscore, no imports, no calls beyond the function table
(`expression_ops`) and the allow-listed methods of texts, lists and numbers
(`expression_methods`).  Attribute access on a mapping reads its key first (so
a field called `count` or `items` is the field, not the dict method), and a
missing key is None, as in templates.  `{{x.y}}` written inside an expression
is accepted and read as `x.y`, because people write conditions the way they
write templates.  Expressions are parsed once, when the workflow is compiled.

Block ids that are not Python names (`evaluator-1`, a UUID such as
`3f2a9c1e-7b4d-4e8a-9f0c-1d2e3f4a5b6c`) are read as ids where they start a
path: `evaluator-1.accuracy >= 8` (hyphens with no space around them, then
`.field`) and `{{evaluator-1}}`.  A subtraction is written with spaces
(`a - b.c`).  Such an id is swapped for a private name before parsing and
read back under its own spelling (`Expression.aliases`).

Evaluation is synchronous, on the event loop, so each one has a budget
(`expression_limits`): integer size, the size of every text and container it
builds, and its total work are bounded, and an expression over its budget
raises ExpressionError within milliseconds, failing its block alone.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

import simpleeval

from flowforge.workflow import expression_format, expression_methods, expression_ops
from flowforge.workflow.expression_limits import (ITEM, MAX_INT_BITS, MAX_LENGTH, NODE, Budget,
                                                  OverBudget)

__all__ = ["Expression", "ExpressionError", "compile_expression", "names_in", "FUNCTIONS"]

_BRACES_RE = re.compile(r"\{\{([^{}]*+)\}\}")    # linear: see templates.TEMPLATE_RE
#: A quoted text (left alone), or a block id with hyphens that starts a path
#: (`evaluator-1.accuracy`, a UUID): not after a name character, a dot or a
#: hyphen (but `10-evaluator-1.x` is 10 minus it), and starting with a letter
#: (`3-loop.index` stays a subtraction) unless it is a UUID.  Possessive
#: quantifiers keep it linear on `a-a-a...`.
_ID_PATH_RE = re.compile(
    r"""("(?:\\.|[^"\\])*+"|'(?:\\.|[^'\\])*+')|(?<![\w.\-])(\d++-)?"""
    r"([A-Za-z_][A-Za-z0-9_]*+(?:-[A-Za-z0-9_]++)++"
    r"|[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})"
    r"(?=\.[A-Za-z_])")
#: The root of a `{{...}}` path when it is an id but not a Python name.
_BRACED_ROOT_RE = re.compile(r"\s*+([A-Za-z0-9_\-]++)")

FUNCTIONS = expression_ops.FUNCTIONS


class ExpressionError(ValueError):
    """The expression cannot be parsed or evaluated; the message says why."""


_CONSTANTS = {"true": True, "false": False, "null": None, "none": None,
              "True": True, "False": False, "None": None}


class _Evaluator(simpleeval.EvalWithCompoundTypes):
    """simpleeval's evaluator with every node evaluated exactly once, every
    operation charged to the evaluation's `Budget`, and calls limited to the
    function table (`expression_ops`) and the allow-listed methods
    (`expression_methods`)."""

    def __init__(self) -> None:
        super().__init__(operators=expression_ops.OPERATORS, functions=dict(FUNCTIONS),
                         names={})
        self.functions.update(FUNCTIONS)      # ours replace the compound-type builtins
        self.budget = Budget()
        self.aliases: dict[str, str] = {}     # private name -> block id (`evaluator-1`)

    def _eval(self, node: ast.AST) -> Any:
        # simpleeval's _eval also walks every result for forbidden functions and
        # modules, visiting a shared sub-list once per reference (exponential on
        # `[[1]*99999]*99999`); nothing here can produce one (allow-listed calls and
        # attributes only), so the walk is left out.
        self.budget.charge(NODE)
        handler = self.nodes.get(type(node))
        if handler is None:
            raise simpleeval.FeatureNotAvailable(
                f"{type(node).__name__} is not available in expressions")
        try:
            return handler(node)
        except OverBudget as exc:
            if not exc.located:
                exc.located = True
                exc.part = ast.get_source_segment(self.expr, node)
            raise

    def _eval_attribute(self, node: ast.Attribute) -> Any:
        if node.attr.startswith("_"):
            raise simpleeval.FeatureNotAvailable(f"access to '{node.attr}' is not allowed")
        value = self._eval(node.value)           # once: the parent never evaluates it again
        if isinstance(value, dict):
            return value.get(node.attr)
        if isinstance(value, (list, tuple)) and node.attr == "length":
            return len(value)
        if value is None:
            return None
        return expression_methods.read_attribute(value, node.attr)

    def _eval_call(self, node: ast.Call) -> Any:
        function = node.func
        if isinstance(function, ast.Attribute):
            if function.attr.startswith("_"):
                raise simpleeval.FeatureNotAvailable(
                    f"access to '{function.attr}' is not allowed")
            target = self._eval(function.value)
            args, keywords = self._arguments(node)
            if isinstance(target, dict) and callable(target.get(function.attr)):
                raise simpleeval.FeatureNotAvailable(
                    "a value read from the scope cannot be called")
            return expression_methods.call_method(target, function.attr, args, keywords)
        if not isinstance(function, ast.Name):
            raise simpleeval.FeatureNotAvailable(
                "only the expression functions and methods of values can be called")
        try:
            callee = self.functions[function.id]
        except KeyError:
            raise simpleeval.FunctionNotDefined(function.id, self.expr) from None
        args, keywords = self._arguments(node)
        return callee(*args, **keywords)

    def _arguments(self, node: ast.Call) -> tuple[list, dict]:
        if any(isinstance(arg, ast.Starred) for arg in node.args) or \
                any(keyword.arg is None for keyword in node.keywords):
            raise simpleeval.FeatureNotAvailable("*args and **kwargs are not available "
                                                 "in expressions")
        return ([self._eval(arg) for arg in node.args],
                {keyword.arg: self._eval(keyword.value) for keyword in node.keywords})

    def _eval_subscript(self, node: ast.Subscript) -> Any:
        container = self._eval(node.value)
        key = self._eval(node.slice)
        if container is None:
            return None
        if type(key) is tuple:
            expression_ops.deep_cost(key)        # hashing a tuple key visits all of it
        if isinstance(container, dict):
            return container.get(key)
        try:
            if isinstance(key, slice):
                self.budget.charge(len(range(*key.indices(len(container)))) * ITEM)
            return container[key]
        except (IndexError, KeyError, TypeError):
            return None

    def _eval_name(self, node: ast.Name) -> Any:
        name = self.aliases.get(node.id, node.id) if self.aliases else node.id
        if name in self.names:
            return self.names[name]
        if name in _CONSTANTS:
            return _CONSTANTS[name]
        if name in self.functions:
            return self.functions[name]
        raise simpleeval.NameNotDefined(name, "")

    # -- containers an expression builds: at most MAX_ITEMS items through nesting --------

    def _built(self, result: Any) -> Any:
        # Measured as a whole: C-speed for flat items, the parts' remembered sizes
        # otherwise, so a spread `[*x]` costs no Python step per item.
        self.budget.items(self.budget.size(result))
        return result

    def _eval_list(self, node: ast.List) -> list:
        result: list = []
        for item in node.elts:
            if isinstance(item, ast.Starred):
                spread = self._eval(item.value)
                self.budget.items(len(result) + len(spread))
                result.extend(spread)
            else:
                result.append(self._eval(item))
        return self._built(result)

    def _eval_tuple(self, node: ast.Tuple) -> tuple:
        if any(isinstance(item, ast.Starred) for item in node.elts):
            raise simpleeval.FeatureNotAvailable("* in a tuple is not available in expressions")
        result = tuple(self._eval(item) for item in node.elts)
        return self._built(result)

    def _eval_set(self, node: ast.Set) -> set:
        items = [self._eval(item) for item in node.elts]
        self._built(items)                       # also bounds hashing tuple members
        return set(items)

    def _eval_dict(self, node: ast.Dict) -> dict:
        result: dict = {}
        for key, value in zip(node.keys, node.values):
            if key is None:                      # {**mapping}
                spread = self._eval(value)
                self.budget.items(len(result) + len(spread))
                result.update(spread)
            else:
                item_key = self._eval(key)
                self.budget.size(item_key)       # hashing a tuple key visits all of it
                result[item_key] = self._eval(value)
        return self._built(result)

    # -- f-strings ------------------------------------------------------------------------

    def _eval_joinedstr(self, node: ast.JoinedStr) -> str:
        pieces: list[str] = []
        length = 0
        for value in node.values:
            piece = self._eval(value)
            if not isinstance(piece, str):
                piece = str(piece)
            length += len(piece)
            self.budget.string(length)
            pieces.append(piece)
        return "".join(pieces)

    def _eval_formattedvalue(self, node: ast.FormattedValue) -> str:
        value = self._eval(node.value)
        spec = self._eval(node.format_spec) if node.format_spec is not None else ""
        return expression_format.format_value(value, node.conversion, spec)


def _strip_braces(text: str) -> str:
    return _BRACES_RE.sub(lambda m: m.group(1), text)


def _name_ids(text: str) -> tuple[str, dict[str, str]]:
    """`text` with each block id that is not a Python name (see the module
    docstring) swapped for a private name, and those names -> the ids."""
    aliases: dict[str, str] = {}
    names: dict[str, str] = {}

    def private(block_id: str) -> str:
        if block_id not in names:
            name = f"_id{len(names)}_"
            while name in text:
                name = f"_{name}"
            names[block_id] = name
            aliases[name] = block_id
        return names[block_id]

    def braced(match: re.Match) -> str:
        inner = match.group(1)
        root = _BRACED_ROOT_RE.match(inner)
        if root is None or root.group(1).isidentifier():
            return inner
        return inner[:root.start(1)] + private(root.group(1)) + inner[root.end(1):]

    def bare(match: re.Match) -> str:
        if match.group(1):
            return match.group(0)
        return (match.group(2) or "") + private(match.group(3))

    if "-" not in text and "{{" not in text:
        return text, aliases
    return _ID_PATH_RE.sub(bare, _BRACES_RE.sub(braced, text)), aliases


@dataclass
class Expression:
    """A parsed expression, ready to evaluate against a scope mapping."""

    source: str
    tree: ast.AST
    parsed: str = ""
    """The text that was parsed: `source` with ids such as `evaluator-1` named privately."""
    aliases: dict[str, str] = field(default_factory=dict)
    """Those private names -> the block ids they stand for."""

    def __post_init__(self) -> None:
        # One evaluator per expression: evaluation is synchronous, so asyncio
        # tasks never interleave inside it, and building one costs more than
        # evaluating a typical condition.
        self._evaluator = _Evaluator()
        self._evaluator.aliases = self.aliases
        self.parsed = self.parsed or self.source

    def _spelled(self, text: str) -> str:
        """`text` with the private names read back as the ids they stand for."""
        for name, block_id in self.aliases.items():
            text = text.replace(name, block_id)
        return text

    def evaluate(self, scope: dict) -> Any:
        """The value of the expression in `scope`.  Raises ExpressionError when it
        cannot be evaluated or goes over the limits of `expression_limits` (then
        quickly: an evaluation never runs much longer than MAX_SECONDS)."""
        evaluator = self._evaluator
        evaluator.names = scope
        source = self.source
        try:
            with Budget() as budget:
                evaluator.budget = budget
                return evaluator.eval(self.parsed, previously_parsed=self.tree)
        except OverBudget as exc:
            part = self._spelled(exc.part or "")
            part = f"`{part}` goes over a limit: " if part and part != source else ""
            raise ExpressionError(f"`{source}`: {part}{exc.message}") from None
        except simpleeval.NameNotDefined as exc:
            raise ExpressionError(f"unknown name '{exc.name}' in `{source}`") from None
        except simpleeval.InvalidExpression as exc:
            raise ExpressionError(f"`{source}`: {exc}") from None
        except TypeError as exc:
            raise ExpressionError(
                f"`{source}` cannot be evaluated: {exc} "
                f"(a value it reads may be missing, i.e. None)") from None
        except ZeroDivisionError:
            raise ExpressionError(f"`{source}`: division by zero") from None
        except OverflowError as exc:
            raise ExpressionError(f"`{source}`: a number is too large ({exc})") from None
        except (ValueError, ArithmeticError) as exc:
            raise ExpressionError(f"`{source}` cannot be evaluated: {exc}") from None
        except LookupError as exc:
            raise ExpressionError(f"`{source}` cannot be evaluated: no item {exc} "
                                  f"({type(exc).__name__})") from None
        except RecursionError:
            raise ExpressionError(f"`{source}` is nested too deeply to evaluate") from None
        finally:
            evaluator.names = {}     # a cached expression must not keep a run's scope alive


def compile_expression(source: str) -> Expression:
    """Parse `source` once; raises ExpressionError naming the syntax problem."""
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError("an expression must be a non-empty string")
    parsed, aliases = _name_ids(source.strip())
    text = _strip_braces(source.strip())
    try:
        tree = simpleeval.SimpleEval.parse(parsed)
    except SyntaxError as exc:
        raise ExpressionError(f"`{source}` is not a valid expression: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ExpressionError(f"`{source}` is not a valid expression: "
                              f"{exc or 'it is nested too deeply'}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.DictComp, ast.SetComp,
                             ast.GeneratorExp, ast.NamedExpr, ast.Await, ast.Yield)):
            hint = (": to take a field of each item use pluck(items, 'field')"
                    if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.Lambda)) else "")
            raise ExpressionError(f"`{source}`: {type(node).__name__} is not allowed in "
                                  f"expressions{hint}")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ExpressionError(f"`{source}`: access to '{node.attr}' is not allowed")
        if isinstance(node, ast.Constant) and type(node.value) is int \
                and node.value.bit_length() > MAX_INT_BITS:
            raise ExpressionError(f"`{source}`: a number of {node.value.bit_length()} bits; "
                                  f"expressions allow at most {MAX_INT_BITS}")
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) \
                and len(node.value) > MAX_LENGTH:
            raise ExpressionError(f"`{source}`: a text of {len(node.value)} characters; "
                                  f"expressions allow at most {MAX_LENGTH}")
    return Expression(text, tree, parsed, aliases)


def names_in(source: str) -> list[tuple[str, ...]]:
    """The dotted paths an expression reads (`grade.accuracy` -> ("grade", "accuracy")),
    leaving out function names and constants. Raises ExpressionError on bad syntax."""
    compiled = compile_expression(source)
    tree, aliases = compiled.tree, compiled.aliases
    paths: list[tuple[str, ...]] = []
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            parts: list[str] = []
            current: ast.AST = node
            while isinstance(current, ast.Attribute):
                parts.append(current.attr)
                inner.add(id(current.value))
                current = current.value
            if isinstance(current, ast.Name):
                inner.add(id(current))
                paths.append((aliases.get(current.id, current.id), *reversed(parts)))
        elif isinstance(node, ast.Name) and id(node) not in inner:
            if node.id in aliases:
                paths.append((aliases[node.id],))
            elif node.id not in FUNCTIONS and node.id not in _CONSTANTS:
                paths.append((node.id,))
    return paths
