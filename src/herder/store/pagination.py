"""Opaque cursors for newest-first listings keyed by sortable ids, and the records of a page."""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from pydantic import ValidationError
from sqlalchemy import Column, Connection, Select

from herder.domain.errors import Invalid
from herder.domain.listings import PageRequest
from herder.domain.models import Page

MAX_PAGE_SIZE = 1000
_ID = re.compile(r"^[a-z]+_[0-9A-Z]{26}$")
T = TypeVar("T")
log = logging.getLogger("herder.store")


def encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(last_id.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        last_id = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        last_id = ""
    if not _ID.match(last_id):
        raise Invalid("cursor is not one returned by this listing", field="cursor")
    return last_id


def check_limit(limit: int) -> None:
    """The one bound on a page's size, for listings in any order."""
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise Invalid(f"limit must be between 1 and {MAX_PAGE_SIZE}", field="limit")


def page_of(
    connection: Connection,
    query: Select[Any],
    id_column: Column[str],
    record: Callable[[Any], T],
    page: PageRequest,
) -> Page[T]:
    """The ``page`` of ``query``'s rows, newest first, as records: every listing keyed by
    sortable ids reads its pages here. Its ``id_prefix`` keeps the rows whose id starts with
    it, as the CLI finds an id from the start a table shows."""
    if page.id_prefix is not None:
        # Escaped so that ``_`` (in every id) and ``%`` match only themselves.
        query = query.where(id_column.startswith(page.id_prefix, autoescape=True))
    rows = connection.execute(page_query(query, id_column, page)).all()
    return page_from(rows, record, page.limit)


def page_from(rows: Sequence[Any], record: Callable[[Any], T], limit: int) -> Page[T]:
    """The page of up to ``limit + 1`` rows read newest first (a row more than asked: a next
    page exists), for a listing that reads its rows its own way."""
    return Page(
        items=page_records(rows[:limit], record),
        next_cursor=next_cursor([row.id for row in rows], limit),
    )


def page_query(
    query: Select[tuple[object, ...]], id_column: Column[str], page: PageRequest
) -> Select[tuple[object, ...]]:
    """Newest first from below the page's cursor, one row more than asked so the caller knows
    whether a next page exists (the page's ``id_prefix`` is ``page_of``'s to apply)."""
    check_limit(page.limit)
    if page.cursor:  # an empty cursor (``?cursor=``) is no cursor: the first page
        query = query.where(id_column < decode_cursor(page.cursor))
    return query.order_by(id_column.desc()).limit(page.limit + 1)


def next_cursor(ids: list[str], limit: int) -> str | None:
    return encode_cursor(ids[limit - 1]) if len(ids) > limit else None


def page_records(rows: Iterable[Any], record: Callable[[Any], T]) -> list[T]:
    """The records of a page's rows. A row its model refuses is a server bug (written by an
    older version, or by hand), not the caller's: it is logged with its traceback and left
    out, so that one bad row never hides the good ones. Reading it alone answers 500."""
    records = []
    for row in rows:
        try:
            records.append(record(row))
        except ValidationError:
            log.exception("stored row %s fails its model; left out of the listing", row.id)
    return records
