"""How the CLI lays out what it shows within the terminal's width (80 columns in a pipe).

One object is a ``record``: key/value lines, values folded, never cut. Many are a
``Listing``: a table whose names, states, dates and ids are never cut. When the table is too
wide, its less important columns are dropped first (``Field.drop``), and only free text (a
message, a reason, a summary: ``Field.free``) gives way, cut with "…"."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.console import (
    Console,
    ConsoleOptions,
    Group,
    OverflowMethod,
    RenderableType,
    RenderResult,
)
from rich.table import Column, Table
from rich.text import Text

Cell = str | Text
FREE_MIN_CHARACTERS = 12  # the least a free-text column is cut to before a column is dropped
BORDERS = 1  # a bordered table: one rule before each column and one after the last
PADDING = 2  # a cell's space either side


@dataclass(frozen=True)
class Field:
    """A column of a listing: ``drop`` 0 is always shown; others are dropped when the table is
    too wide, the highest first (the rightmost of equals); ``free`` text takes the width left,
    cut to one line with "…" (``wrap``: wrapped onto more lines, for a view of one object)."""

    header: str
    drop: int = 0
    free: bool = False
    wrap: bool = False


class Listing:
    """A table that fits the width it is printed in (see the module's docstring); a header
    alone is a column always shown."""

    def __init__(self, *fields: Field | str) -> None:
        self.fields = [one if isinstance(one, Field) else Field(one) for one in fields]
        self.rows: list[Sequence[Cell]] = []

    def add_row(self, *cells: Cell) -> None:
        self.rows.append(cells)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)

    def table(self, width: int) -> Table:
        """The rich table of the columns that fit ``width``. Each kept column is as wide as
        its widest cell, the free ones share what is left; when that is too wide, the
        droppable columns go (the highest ``drop`` first), then the free ones (the rightmost
        first), and then the kept ones wrap between words."""
        cells = [
            [one.header, *(row[index] for row in self.rows)]
            for index, one in enumerate(self.fields)
        ]
        natural = [max(map(_width, column)) for column in cells]
        floor = [  # the least a column is given: a free one's header is never cut either
            max(_width(one.header), min(natural[index], FREE_MIN_CHARACTERS))
            if one.free
            else natural[index]
            for index, one in enumerate(self.fields)
        ]
        shown = list(range(len(self.fields)))
        while _total(floor[index] for index in shown) > width:
            droppable = [index for index in shown if self.fields[index].drop]
            if not droppable:
                break
            shown.remove(max(reversed(droppable), key=lambda index: self.fields[index].drop))
        free = [index for index in shown if self.fields[index].free]
        while free and _total(floor[index] for index in shown) > width:
            shown.remove(free.pop())
        kept = {index: natural[index] for index in shown if index not in free}
        _wrap_to(kept, [max(map(_longest_word, column)) for column in cells], width)
        left = width - _total(kept.values())
        widths = kept | _free_widths(floor, natural, free, left)
        table = Table(*(_column(self.fields[i], widths[i], natural[i]) for i in shown))
        for row in self.rows:
            table.add_row(*(row[index] for index in shown))
        return table


def _width(cell: Cell) -> int:
    return max((line.cell_len for line in _text(cell).split()), default=0)


def _longest_word(cell: Cell) -> int:
    return max((len(word) for word in _text(cell).plain.split()), default=0)


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else Text.from_markup(cell)


def _total(widths: Iterable[int]) -> int:
    """The width of a table of columns this wide, borders and padding in."""
    listed = list(widths)
    return sum(listed) + len(listed) * (PADDING + BORDERS) + BORDERS


def _wrap_to(widths: dict[int, int], words: Sequence[int], width: int) -> None:
    """When the kept columns' table is wider than ``width``, narrow the widest that can
    wrap between words, a character at a time, never below its longest word: a state, a
    date or a name wraps, and is never cut."""
    over = _total(widths.values()) - width
    while over > 0:
        narrowable = [index for index in widths if widths[index] > words[index]]
        if not narrowable:
            return
        widest = max(narrowable, key=lambda index: widths[index])
        widths[widest] -= 1
        over -= 1


def _free_widths(
    floor: Sequence[int], natural: Sequence[int], free: Sequence[int], left: int
) -> dict[int, int]:
    """What each free column gets of the ``left`` width (their borders and padding still to
    take): an equal share, never under its floor, the share of one that needs less going
    to the others."""
    left -= len(free) * (PADDING + BORDERS)
    widths = {}
    for position, index in enumerate(sorted(free, key=lambda index: natural[index])):
        widths[index] = max(floor[index], min(natural[index], left // (len(free) - position)))
        left -= widths[index]
    return widths


def _column(one: Field, width: int, natural: int) -> Column:
    if one.free:
        overflow: OverflowMethod = "fold" if one.wrap else "ellipsis"
        return Column(one.header, width=width, no_wrap=not one.wrap, overflow=overflow)
    return Column(one.header, width=width, no_wrap=width >= natural, overflow="fold")


def record(title: Cell, pairs: Iterable[tuple[str, Cell | None]]) -> RenderableType:
    """One object: its title, then a ``key: value`` line for each pair (``None`` or empty:
    left out), a long value folded onto the next lines, never cut."""
    lines = [Text.assemble(f"{key}: ", _text(value)) for key, value in pairs if value]
    for line in lines:
        line.overflow = "fold"
    return Group(title, *lines)


def record_of(title: Cell, listing: Listing, *more: tuple[str, Cell | None]) -> RenderableType:
    """A listing's one row as a record, each header in lower case as its key, then ``more``:
    the view of one object has the fields its row in a list has."""
    (row,) = listing.rows
    keys = (one.header.lower() for one in listing.fields)
    return record(title, [*zip(keys, row, strict=True), *more])
