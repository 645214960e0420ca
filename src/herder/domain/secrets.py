"""A tenant's secrets: named values a job's attempts receive in their environment.

What is decided here, without I/O: what a secret's name may be, how large its value may be,
and what the API shows of a secret (its metadata — never its value).
"""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from herder.domain.errors import Invalid, TooLarge

MAX_SECRET_BYTES = 64 * 1024  # a value, UTF-8 encoded
MAX_NAME_CHARS = 128
MAX_SECRETS_PER_TENANT = 1000
_SECRET_NAME = re.compile(rf"^[A-Za-z_][A-Za-z0-9_]{{0,{MAX_NAME_CHARS - 1}}}$")
NAME_RULE = (
    f"a secret's name is 1-{MAX_NAME_CHARS} letters, digits and '_', not starting with a digit "
    "(like an environment variable's)"
)


def secret_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a secret, or ``None``."""
    return None if _SECRET_NAME.match(name) else f"{name[:MAX_NAME_CHARS]!r}: {NAME_RULE}"


def check_secret_name(name: str, *, field: str = "name") -> str:
    problem = secret_name_problem(name)
    if problem is not None:
        raise Invalid(problem, field=field)
    return name


def secret_bytes(value: str) -> bytes:
    """The value as stored (UTF-8), refused when it is too large or holds a NUL (an
    environment variable cannot)."""
    try:
        encoded = value.encode()
    except UnicodeEncodeError as error:  # a lone surrogate: JSON allows "\ud800", UTF-8 not
        raise Invalid("the value is not valid Unicode text", field="value") from error
    if len(encoded) > MAX_SECRET_BYTES:
        raise TooLarge(
            f"the value is {len(encoded)} bytes; a secret holds at most {MAX_SECRET_BYTES}",
            field="value",
        )
    if "\0" in value:
        raise Invalid("the value holds a NUL character; an environment cannot", field="value")
    return encoded


class SecretValue(BaseModel):
    """The body of ``PUT /v1/secrets/{name}``: the value, only ever sent, never shown."""

    model_config = ConfigDict(extra="forbid")

    value: str = Field(description=f"at most {MAX_SECRET_BYTES} bytes (UTF-8), no NUL")


class Secret(BaseModel):
    """What anyone of the tenant may see of a secret."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: int = Field(description="1 when created, one more on every new value")
    created_at: datetime
    updated_at: datetime
