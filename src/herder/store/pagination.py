"""Opaque cursors for newest-first listings keyed by sortable ids."""

from __future__ import annotations

import base64
import binascii
import re

from sqlalchemy import Column, Select

from herder.domain.errors import Invalid

MAX_PAGE_SIZE = 1000
_ID = re.compile(r"^[a-z]+_[0-9A-Z]{26}$")


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


def page_query(
    query: Select[tuple[object, ...]], id_column: Column[str], limit: int, cursor: str | None
) -> Select[tuple[object, ...]]:
    """Newest first, one row more than asked so the caller knows whether a next page exists."""
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise Invalid(f"limit must be between 1 and {MAX_PAGE_SIZE}", field="limit")
    if cursor is not None:
        query = query.where(id_column < decode_cursor(cursor))
    return query.order_by(id_column.desc()).limit(limit + 1)


def next_cursor(ids: list[str], limit: int) -> str | None:
    return encode_cursor(ids[limit - 1]) if len(ids) > limit else None
