"""The small expression language of triggers: which events start work, and the values a
trigger takes from them (docs/events.md).

A filter is parsed once, when the trigger is saved, into a tree of the nodes below; it is
then only ever *evaluated* against an event's document (``{"name", "source", "payload"}``)
— there is no name lookup, no call, no attribute access and no loop, so a filter can read
its event's document and nothing else, and its cost is bounded by its size and the
payload's. Grammar (keywords are lower case; precedence lowest first):

    expression := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | comparison
    comparison := operand [ ("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in"
                             | "starts_with" | "ends_with") operand ]
    operand    := path | string | number | "true" | "false" | "null"
                | "[" [literal ("," literal)*] "]" | "(" expression ")"
    path       := name ("." name | "[" integer "]" | "[" string "]")*

Semantics, chosen so that a filter never fails on an event, it only does not match: a path
that leads nowhere is ``null``; ``==``/``!=`` compare JSON values (``1 == 1.0``, ``true !=
1``); an ordering holds only between two numbers or two strings; ``in`` looks for an
element in a list or a substring in a string; a lone operand holds when it is ``true``.

Cost (docs/events.md#what-an-event-may-cost): an evaluation counts its **steps** — one per
part evaluated, per JSON value a comparison visits (``payload.a == payload.b`` over two lists
of 60,000 items visits 60,001 pairs) and per ``STRING_CHARS_PER_STEP`` characters a string
operation reads — against a ``Budget``, and stops with ``OverBudget`` past it, so no filter
costs more than its budget whatever the payload. When saved, a trigger's filter may hold
at most ``MAX_PAYLOAD_COMPARISONS`` comparisons whose work grows with the payload
(``check_cost``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

MAX_SOURCE_CHARS = 2048
MAX_NODES = 256
MAX_DEPTH = 24  # nesting of parentheses, not and operators
MAX_PATH_SEGMENTS = 32
MAX_LIST_ITEMS = 256
MAX_PAYLOAD_COMPARISONS = 16  # comparisons whose work grows with the payload, in one filter
MAX_FILTER_STEPS = 100_000  # one filter (or a trigger's parameters) on one event
MAX_EVENT_STEPS = 200_000  # all of one event's filters and parameters: triggers' and waits'
STRING_CHARS_PER_STEP = 64  # characters a string operation reads for one step

Comparator = Literal["==", "!=", "<", "<=", ">", ">=", "in", "not in", "starts_with", "ends_with"]
COMPARATORS: frozenset[str] = frozenset(Comparator.__args__)  # type: ignore[attr-defined]
T = TypeVar("T")
KEYWORDS = frozenset(
    {"and", "or", "not", "in", "true", "false", "null", "starts_with", "ends_with"}
)


class FilterError(ValueError):
    """Why a source is not a filter, and where (0-based character offset)."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} (at character {position + 1})")
        self.position = position


class OverBudget(Exception):
    """An evaluation needed more steps than its ``Budget`` had left."""


@dataclass
class Budget:
    """Steps an evaluation may still take (see the module's docstring); ``take`` raises
    ``OverBudget`` rather than go past ``steps``."""

    steps: int
    spent: int = 0

    @property
    def left(self) -> int:
        return self.steps - self.spent

    def take(self, steps: int) -> None:
        if steps > self.left:
            self.spent = self.steps
            raise OverBudget(self.steps)
        self.spent += steps

    def share(self, at_most: int) -> Budget:
        """A budget of at most ``at_most`` of the steps left, for one part of the work
        (charge it back with ``take(share.spent)``)."""
        return Budget(min(at_most, self.left))


def within_share(budget: Budget, work: Callable[[Budget], T]) -> T | OverBudget:
    """What ``work`` finds given at most ``MAX_FILTER_STEPS`` of the steps ``budget`` has
    left — charged to it whatever the outcome — or the ``OverBudget`` that stopped it."""
    share = budget.share(MAX_FILTER_STEPS)
    try:
        return work(share)
    except OverBudget as spent:
        return spent
    finally:
        budget.take(share.spent)


@dataclass(frozen=True)
class Path:
    segments: tuple[str | int, ...]


@dataclass(frozen=True)
class Constant:
    value: Any  # a JSON value


@dataclass(frozen=True)
class Compare:
    left: Node
    comparator: Comparator
    right: Node


@dataclass(frozen=True)
class Not:
    operand: Node


@dataclass(frozen=True)
class All:
    operands: tuple[Node, ...]


@dataclass(frozen=True)
class AnyOf:
    operands: tuple[Node, ...]


Node = Path | Constant | Compare | Not | All | AnyOf


@dataclass(frozen=True)
class _Token:
    kind: Literal["name", "string", "number", "symbol", "end"]
    text: str
    value: Any
    position: int


_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt])*"|'(?:[^'\\\x00-\x1f]|\\['\\/bfnrt])*')
  | (?P<symbol>==|!=|<=|>=|<|>|\(|\)|\[|\]|\.|,)
    """,
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text[1:-1])


def _tokens(source: str) -> Iterator[_Token]:
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            raise FilterError(f"unexpected character {source[position]!r}", position)
        kind, text = match.lastgroup, match.group()
        if kind == "number":
            number = float(text) if any(c in text for c in ".eE") else int(text)
            if isinstance(number, float) and not math.isfinite(number):
                raise FilterError(f"number {text} is out of range", position)
            yield _Token("number", text, number, position)
        elif kind == "string":
            yield _Token("string", text, _unquote(text), position)
        elif kind in ("name", "symbol"):
            yield _Token(kind, text, text, position)  # type: ignore[arg-type]
        position = match.end()
    yield _Token("end", "", None, position)


class _Parser:
    def __init__(self, source: str) -> None:
        self._tokens = list(_tokens(source))
        self._at = 0
        self._nodes = 0
        self._depth = 0

    def parse(self) -> Node:
        node = self._expression()
        if self._peek().kind != "end":
            raise self._error("expected and, or or the end")
        return node

    def _peek(self) -> _Token:
        return self._tokens[self._at]

    def _take(self) -> _Token:
        token = self._tokens[self._at]
        self._at += 1
        return token

    def _is(self, text: str) -> bool:
        token = self._peek()
        return token.kind in ("name", "symbol") and token.text == text

    def _expect(self, text: str) -> None:
        if not self._is(text):
            raise self._error(f"expected {text!r}")
        self._take()

    def _error(self, message: str) -> FilterError:
        token = self._peek()
        found = "the end" if token.kind == "end" else repr(token.text)
        return FilterError(f"{message}, found {found}", token.position)

    def _node(self, node: Node) -> Node:
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise FilterError(f"more than {MAX_NODES} parts", self._peek().position)
        return node

    def _nested(self) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise FilterError(f"nested deeper than {MAX_DEPTH}", self._peek().position)

    def _expression(self) -> Node:
        operands = [self._and()]
        while self._is("or"):
            self._take()
            operands.append(self._and())
        return operands[0] if len(operands) == 1 else self._node(AnyOf(tuple(operands)))

    def _and(self) -> Node:
        operands = [self._not()]
        while self._is("and"):
            self._take()
            operands.append(self._not())
        return operands[0] if len(operands) == 1 else self._node(All(tuple(operands)))

    def _not(self) -> Node:
        if self._is("not"):
            self._take()
            self._nested()
            operand = self._not()
            self._depth -= 1
            return self._node(Not(operand))
        return self._comparison()

    def _comparison(self) -> Node:
        left = self._operand()
        comparator = self._comparator()
        if comparator is None:
            return left
        return self._node(Compare(left, comparator, self._operand()))

    def _comparator(self) -> Comparator | None:
        token = self._peek()
        if token.kind not in ("name", "symbol"):
            return None
        if token.text == "not" and self._tokens[self._at + 1].text == "in":
            self._at += 2
            return "not in"
        if token.text in COMPARATORS:
            self._take()
            return token.text  # type: ignore[return-value]
        return None

    def _operand(self) -> Node:
        token = self._peek()
        if self._is("("):
            self._take()
            self._nested()
            node = self._expression()
            self._depth -= 1
            self._expect(")")
            return node
        if self._is("["):
            return self._node(Constant(self._list()))
        if token.kind == "name" and token.text not in KEYWORDS:
            return self._node(self._path())
        return self._node(Constant(self._literal()))

    def _literal(self) -> Any:
        token = self._peek()
        if token.kind in ("string", "number"):
            self._take()
            return token.value
        if token.kind == "name" and token.text in ("true", "false", "null"):
            self._take()
            return {"true": True, "false": False, "null": None}[token.text]
        raise self._error("expected a path, a string, a number, true, false, null or a list")

    def _list(self) -> list[Any]:
        self._expect("[")
        items: list[Any] = []
        while not self._is("]"):
            if items:
                self._expect(",")
            items.append(self._literal())
            if len(items) > MAX_LIST_ITEMS:
                raise self._error(f"a list holds at most {MAX_LIST_ITEMS} items")
        self._take()
        return items

    def _path(self) -> Path:
        segments: list[str | int] = [self._take().text]
        while self._is(".") or self._is("["):
            if self._take().text == ".":
                token = self._take()
                if token.kind != "name":
                    self._at -= 1
                    raise self._error("expected a name after '.'")
                segments.append(token.text)
            else:
                token = self._take()
                if (
                    token.kind == "number" and isinstance(token.value, int)
                ) or token.kind == "string":
                    segments.append(token.value)
                else:
                    self._at -= 1
                    raise self._error("expected an integer or a string inside [ ]")
                self._expect("]")
            if len(segments) > MAX_PATH_SEGMENTS:
                raise self._error(f"a path has at most {MAX_PATH_SEGMENTS} parts")
        return Path(tuple(segments))


def parse(source: str) -> Node:
    """The filter's tree, or ``FilterError`` saying what is wrong and where."""
    if len(source) > MAX_SOURCE_CHARS:
        raise FilterError(f"longer than {MAX_SOURCE_CHARS} characters", MAX_SOURCE_CHARS)
    if not source.strip():
        raise FilterError("empty", 0)
    return _Parser(source).parse()


def parse_value(source: str) -> Path | Constant:
    """A single operand — a path or a literal — as a trigger's parameter takes."""
    node = parse(source)
    if not isinstance(node, Path | Constant):
        raise FilterError("expected a path or a literal, not a condition", 0)
    return node


def check_cost(node: Node) -> None:
    """``FilterError`` for a filter with more than ``MAX_PAYLOAD_COMPARISONS`` comparisons
    whose work grows with the payload: two values read from the event compared (``==``,
    ``!=``, an ordering), or searched in or for one (``in``, ``starts_with``…, a path on
    the right). A literal bounds the work of the others."""
    count = sum(1 for compare in _comparisons(node) if _grows_with_payload(compare))
    if count > MAX_PAYLOAD_COMPARISONS:
        raise FilterError(
            f"{count} comparisons read two values of the event or search one; at most "
            f"{MAX_PAYLOAD_COMPARISONS} may",
            0,
        )


def _comparisons(node: Node) -> Iterator[Compare]:
    match node:
        case All(operands) | AnyOf(operands):
            for operand in operands:
                yield from _comparisons(operand)
        case Not(operand):
            yield from _comparisons(operand)
        case Compare(left, _, right):
            yield node
            yield from _comparisons(left)
            yield from _comparisons(right)
        case Path() | Constant():
            return


def _grows_with_payload(compare: Compare) -> bool:
    if compare.comparator in ("in", "not in", "starts_with", "ends_with"):
        return isinstance(compare.right, Path)
    return isinstance(compare.left, Path) and isinstance(compare.right, Path)


def value(node: Node, document: Any, budget: Budget | None = None) -> Any:
    """What a node reads from ``document``: a path's value (``None`` where it leads nowhere),
    a literal's, or a condition's truth. ``OverBudget`` past ``budget`` (by default
    ``MAX_FILTER_STEPS``)."""
    budget = Budget(MAX_FILTER_STEPS) if budget is None else budget
    budget.take(1)
    match node:
        case Path(segments):
            return _follow(document, segments)
        case Constant(constant):
            return constant
        case _:
            return matches(node, document, budget)


def matches(node: Node, document: Any, budget: Budget | None = None) -> bool:
    """Whether the event's ``document`` satisfies the filter; ``OverBudget`` when finding
    out takes more than ``budget`` (by default ``MAX_FILTER_STEPS``)."""
    budget = Budget(MAX_FILTER_STEPS) if budget is None else budget
    budget.take(1)
    match node:
        case All(operands):
            return all(matches(operand, document, budget) for operand in operands)
        case AnyOf(operands):
            return any(matches(operand, document, budget) for operand in operands)
        case Not(operand):
            return not matches(operand, document, budget)
        case Compare(left, comparator, right):
            return _compare(
                value(left, document, budget), comparator, value(right, document, budget), budget
            )
        case Path() | Constant():
            return value(node, document, budget) is True


def _follow(document: Any, segments: Sequence[str | int]) -> Any:
    current = document
    for segment in segments:
        if isinstance(segment, int) and isinstance(current, list):
            if not -len(current) <= segment < len(current):
                return None
            current = current[segment]
        elif isinstance(segment, str) and isinstance(current, dict):
            current = current.get(segment)
        else:
            return None
    return current


def _is_number(item: Any) -> bool:
    return isinstance(item, int | float) and not isinstance(item, bool)


def _equal(left: Any, right: Any, budget: Budget) -> bool:
    """JSON equality: numbers by value, booleans only with booleans, containers deeply —
    a step per pair of values visited."""
    budget.take(1)
    if _is_number(left) and _is_number(right):
        return bool(left == right)
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(
            _equal(one, other, budget) for one, other in zip(left, right, strict=True)
        )
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(_equal(left[k], right[k], budget) for k in left)
    if isinstance(left, str):
        _read(budget, min(len(left), len(right)))
    return bool(left == right)


def _read(budget: Budget, characters: int) -> None:
    budget.take(characters // STRING_CHARS_PER_STEP)


def _ordered(left: Any, right: Any, budget: Budget) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        _read(budget, min(len(left), len(right)))
        return True
    return _is_number(left) and _is_number(right)


def _compare(left: Any, comparator: Comparator, right: Any, budget: Budget) -> bool:
    match comparator:
        case "==":
            return _equal(left, right, budget)
        case "!=":
            return not _equal(left, right, budget)
        case "<":
            return _ordered(left, right, budget) and left < right
        case "<=":
            return _ordered(left, right, budget) and left <= right
        case ">":
            return _ordered(left, right, budget) and left > right
        case ">=":
            return _ordered(left, right, budget) and left >= right
        case "in":
            return _contains(right, left, budget)
        case "not in":
            return not _contains(right, left, budget)
        case "starts_with":
            return _affix(left, right, budget) and left.startswith(right)
        case "ends_with":
            return _affix(left, right, budget) and left.endswith(right)


def _affix(left: Any, right: Any, budget: Budget) -> bool:
    if isinstance(left, str) and isinstance(right, str):
        _read(budget, min(len(left), len(right)))
        return True
    return False


def _contains(container: Any, item: Any, budget: Budget) -> bool:
    if isinstance(container, list):
        return any(_equal(element, item, budget) for element in container)
    if isinstance(container, str) and isinstance(item, str):
        _read(budget, len(container))
        return item in container
    return False
