"""A calculator over an ``ast`` whitelist: numbers and + - * / ( ); no names, calls or eval."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any, ClassVar

from eva_agent.tools.base import bad_args
from eva_agent.types import Observation

_BIN: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_UN: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def evaluate(expr: str) -> float:
    """Value of an arithmetic expression (``"12 + 7*3"``); commas inside numbers are dropped.

    Raises:
        ValueError: On anything but numbers, + - * / and parentheses (names, attributes,
            calls, subscripts, powers), on a syntax error and on division by zero.
    """
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError(f"expr must be a non-empty string, got {expr!r}")
    try:
        tree = ast.parse(expr.replace(",", ""), mode="eval")
    except SyntaxError as e:
        raise ValueError(f"expr {expr!r} is not an arithmetic expression: {e.msg}") from None

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            assert isinstance(node.value, int | float)  # the type test above, for mypy
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            try:
                return _BIN[type(node.op)](ev(node.left), ev(node.right))
            except ZeroDivisionError:
                raise ValueError(f"division by zero in {expr!r}") from None
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UN:
            return _UN[type(node.op)](ev(node.operand))
        raise ValueError(f"{type(node).__name__} is not allowed in a calculator expression")

    return ev(tree)


class Calculator:
    """The calculator as a tool: ``expr`` -> one item ``{"value", "expr", "conf": 1}``.

    Example:
        >>> Calculator()(None, expr="17 + 42").items[0]["value"]
        59.0
    """

    name = "calc"
    kind = "calc"
    schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"expr": {"type": "string"}},
        "required": ["expr"],
    }

    def __call__(self, image: Any, **args: Any) -> Observation:
        """Evaluate ``expr``; an unsafe or malformed one gives an ``error`` observation."""
        err = bad_args(self.name, args, {"expr"})
        if err:
            return err
        try:
            value = evaluate(args.get("expr", ""))
        except ValueError as e:
            return Observation("error", [], str(e))
        return Observation("ok", [{"value": value, "expr": args["expr"], "conf": 1.0}])
