"""ETags of versioned objects (jobs, workflows): the version in quotes (``"3"``), and the
versions an ``If-Match`` header accepts (a schedule's tag, a number drawn from its
definition, is read the same way)."""

from __future__ import annotations

from typing import Protocol, TypeVar

from fastapi import Response

from herder.domain.errors import Invalid


class Versioned(Protocol):
    @property
    def version(self) -> int: ...


V = TypeVar("V", bound=Versioned)


def versions(if_match: str | None) -> frozenset[int] | None:
    """The versions ``If-Match`` accepts; None for any. A weak tag (``W/"3"``) never matches,
    as RFC 9110 compares strongly for If-Match."""
    if if_match is None or if_match.strip() == "*":
        return None
    accepted = set()
    for tag in (part.strip() for part in if_match.split(",")):
        if tag.startswith("W/"):
            continue
        digits = tag[1:-1]
        # ASCII only: ``isdigit`` also takes "²", which ``int`` refuses (a 500, not a 422)
        if not (
            len(tag) > 2 and tag[0] == tag[-1] == '"' and digits.isascii() and digits.isdigit()
        ):
            raise Invalid(
                f'If-Match takes the ETag of a read object, e.g. "3" with its quotes; got {tag!r}',
                field="If-Match",
            )
        accepted.add(int(digits))
    return frozenset(accepted)


def tagged(record: V, response: Response) -> V:
    response.headers["ETag"] = f'"{record.version}"'
    return record
