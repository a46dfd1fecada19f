"""Condition expressions (`grade.accuracy >= 8 and not review.flagged`).

Evaluated by simpleeval, never by Python's `eval`: no attribute starting with
an underscore, no imports, no calls beyond the small function table below.
Attribute access on a mapping reads its key first (so a field called `count`
or `items` is the field, not the dict method), and a missing key is None, as
in templates.  `{{x.y}}` written inside an expression is accepted and read as
`x.y`, because people write conditions the way they write templates.
Expressions are parsed once, when the workflow is compiled.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

import simpleeval

__all__ = ["Expression", "ExpressionError", "compile_expression", "names_in", "FUNCTIONS"]

_BRACES_RE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")


class ExpressionError(ValueError):
    """The expression cannot be parsed or evaluated; the message says why."""


def _contains(container: Any, item: Any) -> bool:
    return container is not None and item in container


FUNCTIONS: dict[str, Any] = {
    "len": lambda value: 0 if value is None else len(value),
    "str": str,
    "int": int,
    "float": float,
    "bool": bool,
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
    "sum": sum,
    "any": any,
    "all": all,
    "sorted": sorted,
    "lower": lambda value: str(value).lower(),
    "upper": lambda value: str(value).upper(),
    "contains": _contains,
}

_CONSTANTS = {"true": True, "false": False, "null": None, "none": None,
              "True": True, "False": False, "None": None}


class _Evaluator(simpleeval.EvalWithCompoundTypes):
    def _eval_attribute(self, node: ast.Attribute) -> Any:
        if node.attr.startswith("_"):
            raise simpleeval.FeatureNotAvailable(f"access to '{node.attr}' is not allowed")
        value = self._eval(node.value)
        if isinstance(value, dict):
            return value.get(node.attr)
        if isinstance(value, (list, tuple)) and node.attr == "length":
            return len(value)
        if value is None:
            return None
        return super()._eval_attribute(node)

    def _eval_subscript(self, node: ast.Subscript) -> Any:
        container = self._eval(node.value)
        key = self._eval(node.slice)
        if container is None:
            return None
        if isinstance(container, dict):
            return container.get(key)
        try:
            return container[key]
        except (IndexError, KeyError, TypeError):
            return None

    def _eval_name(self, node: ast.Name) -> Any:
        if node.id in self.names:
            return self.names[node.id]
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if node.id in self.functions:
            return self.functions[node.id]
        raise simpleeval.NameNotDefined(node.id, "")


def _strip_braces(text: str) -> str:
    return _BRACES_RE.sub(lambda m: m.group(1), text)


@dataclass
class Expression:
    """A parsed expression, ready to evaluate against a scope mapping."""

    source: str
    tree: ast.AST

    def __post_init__(self) -> None:
        # One evaluator per expression: evaluation is synchronous, so asyncio
        # tasks never interleave inside it, and building one costs more than
        # evaluating a typical condition.
        self._evaluator = _Evaluator(names={}, functions=FUNCTIONS)

    def evaluate(self, scope: dict) -> Any:
        evaluator = self._evaluator
        evaluator.names = scope
        try:
            return evaluator.eval(self.source, previously_parsed=self.tree)
        except simpleeval.NameNotDefined as exc:
            raise ExpressionError(f"unknown name '{exc.name}' in `{self.source}`") from None
        except simpleeval.InvalidExpression as exc:
            raise ExpressionError(f"`{self.source}`: {exc}") from None
        except TypeError as exc:
            raise ExpressionError(
                f"`{self.source}` cannot be evaluated: {exc} "
                f"(a value it reads may be missing, i.e. None)") from None
        except ZeroDivisionError:
            raise ExpressionError(f"`{self.source}`: division by zero") from None


def compile_expression(source: str) -> Expression:
    """Parse `source` once; raises ExpressionError naming the syntax problem."""
    if not isinstance(source, str) or not source.strip():
        raise ExpressionError("an expression must be a non-empty string")
    text = _strip_braces(source.strip())
    try:
        tree = simpleeval.SimpleEval.parse(text)
    except SyntaxError as exc:
        raise ExpressionError(f"`{source}` is not a valid expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.DictComp, ast.SetComp,
                             ast.GeneratorExp, ast.NamedExpr, ast.Await, ast.Yield)):
            raise ExpressionError(f"`{source}`: {type(node).__name__} is not allowed in expressions")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ExpressionError(f"`{source}`: access to '{node.attr}' is not allowed")
    return Expression(text, tree)


def names_in(source: str) -> list[tuple[str, ...]]:
    """The dotted paths an expression reads (`grade.accuracy` -> ("grade", "accuracy")),
    leaving out function names and constants. Raises ExpressionError on bad syntax."""
    tree = compile_expression(source).tree
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
                paths.append((current.id, *reversed(parts)))
        elif isinstance(node, ast.Name) and id(node) not in inner:
            if node.id in FUNCTIONS or node.id in _CONSTANTS:
                continue
            paths.append((node.id,))
    return paths
