"""Jobs from OCI images: a reference to an image in a registry the operator allows, an
image's config, and how that config and a job's spec make one command line and environment.

Precedence, as ``docker run IMAGE cmd…`` has it: the image's ``Entrypoint`` always runs; the
job's ``command`` (split as a shell would split it, never run by one: an image may have no
shell) replaces the image's ``Cmd``; the job's ``args`` are appended; the job's ``env``
overrides the image's ``Env``; the image's ``WorkingDir`` is the working directory (else
the attempt's workspace).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from herder.domain.errors import Invalid

REGISTRIES_VARIABLE = "HERDER_IMAGE_REGISTRIES"
# Every worker registers its isolation under this label (its ``--isolation``: sandbox or
# none); an image job requires a sandbox, where alone its root can be built, so it waits for
# one rather than failing on a worker that cannot run it.
ISOLATION_LABEL = "isolation"
NEEDS_SANDBOX = {ISOLATION_LABEL: "sandbox"}
_REFERENCE = re.compile(
    r"^(?P<host>[A-Za-z0-9.-]+(?::[0-9]{1,5})?)/"
    r"(?P<name>[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"@(?P<digest>sha256:[0-9a-f]{64})$"
)
MAX_CONFIG_BYTES = 1024 * 1024  # an image config or manifest: JSON, read whole


class ImageProblem(ValueError):
    """An image, reference or config that cannot be used; the message says why."""


@dataclass(frozen=True)
class ImageReference:
    """``host[:port]/name@sha256:…``: pinned by digest, so what runs is what was named."""

    host: str
    name: str
    digest: str  # sha256:<hex>

    @classmethod
    def parse(cls, text: str) -> ImageReference:
        matched = _REFERENCE.match(text)
        if matched is None:
            if "@sha256:" not in text:
                raise ImageProblem(
                    f"{text!r} is not pinned by digest: name an image as "
                    "host/repository@sha256:<64 hex> (a tag can change under a job)"
                )
            raise ImageProblem(f"{text!r} is not a reference host/repository@sha256:<64 hex>")
        return cls(matched["host"], matched["name"], matched["digest"])

    def __str__(self) -> str:
        return f"{self.host}/{self.name}@{self.digest}"


def parse_registries(text: str) -> tuple[str, ...]:
    """The operator's registries (``HERDER_IMAGE_REGISTRIES``): base URLs, comma or space
    separated, such as ``https://registry.internal,http://127.0.0.1:5000``."""
    registries = []
    for url in text.replace(",", " ").split():
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ImageProblem(f"{REGISTRIES_VARIABLE}: {url!r} is not an http(s) base URL")
        registries.append(url.rstrip("/"))
    return tuple(registries)


def registry_for(reference: ImageReference, registries: Sequence[str]) -> str | None:
    """The base URL of the allowed registry ``reference`` names by its host, or None."""
    for url in registries:
        if urlsplit(url).netloc == reference.host:
            return url
    return None


def check_image_allowed(image: str, registries: Sequence[str]) -> None:
    """``Invalid`` naming the field ``image`` unless it names one of ``registries``."""
    reference = ImageReference.parse(image)
    if registry_for(reference, registries) is None:
        allowed = ", ".join(urlsplit(url).netloc for url in registries) or "none"
        raise Invalid(
            f"image {image!r} is not in a registry this server allows ({allowed}; the "
            f"operator's {REGISTRIES_VARIABLE})",
            field="image",
        )


@dataclass(frozen=True)
class ImageConfig:
    """What of an image's config decides how it runs (its ``User`` does not: an attempt runs
    as its own uid)."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str = ""
    diff_ids: tuple[str, ...] = ()  # sha256:<hex> of each layer's uncompressed tar, in order

    @classmethod
    def from_json(cls, data: bytes) -> ImageConfig:
        document = json_object(data, "its config")
        run = document.get("config") or {}
        rootfs = document.get("rootfs") or {}
        if not isinstance(run, dict) or not isinstance(rootfs, dict):
            raise ImageProblem("its config's config or rootfs is not an object")
        env = []
        for entry in _strings(run.get("Env"), "Env"):
            name, equals, value = entry.partition("=")
            if not equals or not name:
                raise ImageProblem(f"its config's Env entry {entry!r} is not NAME=VALUE")
            env.append((name, value))
        working_dir = run.get("WorkingDir") or ""
        if not isinstance(working_dir, str) or (working_dir and not working_dir.startswith("/")):
            raise ImageProblem("its config's WorkingDir is not an absolute path")
        if "\0" in working_dir:
            raise ImageProblem("its config's WorkingDir has a NUL in it")
        diff_ids = _strings(rootfs.get("diff_ids"), "rootfs.diff_ids")
        for diff_id in diff_ids:
            if not re.fullmatch(r"sha256:[0-9a-f]{64}", diff_id):
                raise ImageProblem(f"its config names a layer {diff_id!r}, not a sha256 digest")
        return cls(
            entrypoint=_strings(run.get("Entrypoint"), "Entrypoint"),
            cmd=_strings(run.get("Cmd"), "Cmd"),
            env=tuple(env),
            working_dir=working_dir,
            diff_ids=diff_ids,
        )


def json_object(data: bytes, what: str) -> dict[str, Any]:
    """A config, manifest or index: a JSON object of bounded size."""
    if len(data) > MAX_CONFIG_BYTES:
        raise ImageProblem(f"{what} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        parsed = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ImageProblem(f"{what} is not JSON: {error}") from error
    if not isinstance(parsed, dict):
        raise ImageProblem(f"{what} is not a JSON object")
    return parsed


def _strings(value: object, what: str) -> tuple[str, ...]:
    """A list of strings, none with a NUL (it would cut a word, or a variable, in two)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ImageProblem(f"its config's {what} is not a list of strings")
    if any("\0" in item for item in value):
        raise ImageProblem(f"its config's {what} has a NUL in it")
    return tuple(value)


def command_words(command: str) -> list[str]:
    """A job's ``command`` for an image, split as a shell would; ``ImageProblem`` if it
    cannot be."""
    try:
        words = shlex.split(command)
    except ValueError as error:
        raise ImageProblem(f"command cannot be split into words: {error}") from error
    if not words:
        raise ImageProblem("command is empty")
    return words


_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"})


def command_warning(entrypoint: Sequence[str] | None, command: str) -> str | None:
    """Why ``command`` will likely not run as meant under an image whose ``Entrypoint`` is
    ``entrypoint`` (None: not known where this is asked), else None. The command is split
    into words and never run by a shell, so under an entrypoint of ``sh -c`` only its first
    word is the script (the others become ``$0``, ``$1``…), and under any other, shell syntax
    (``|``, ``&&``, ``>``, ``$VAR``) reaches the program as plain words."""
    try:
        words = command_words(command)
    except ImageProblem:
        return None  # refused when the job is saved, saying why
    script = shlex.quote(command)
    if entrypoint and _runs_a_script(entrypoint):
        if len(words) == 1:
            return None
        return (
            f"the image's entrypoint {shlex.join(entrypoint)} runs only the command's first word "
            f"({words[0]!r}) as its script, the others become $0, $1…: make the command the "
            f"whole script quoted as one word, {script}"
        )
    syntax = _shell_syntax(command)
    if syntax is None:
        return None
    split = f"the command is split into words and run without a shell, so {syntax!r}"
    if entrypoint is None:
        return (
            f"{split} reaches the program as a word: if the image's entrypoint is sh -c, make "
            f"the command the whole script quoted as one word ({script}); if it has none, "
            f"sh -c {script}"
        )
    if not entrypoint:
        return f"{split} reaches the program as a word: make it sh -c {script}"
    return f"{split} reaches the image's entrypoint {shlex.join(entrypoint)} as a word"


def _runs_a_script(entrypoint: Sequence[str]) -> bool:
    """``sh -c``, ``/bin/bash -ec``…: a shell that takes its script as the next argument."""
    program = entrypoint[0].rsplit("/", 1)[-1]
    return program in _SHELLS and bool(re.fullmatch(r"-[a-z]*c", entrypoint[-1]))


def _shell_syntax(command: str) -> str | None:
    """The first operator (``|``, ``&&``, ``>``…) or ``$`` expansion outside single quotes."""
    lexer = shlex.shlex(command, posix=False, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    for token in tokens:
        if token and all(character in "();<>|&" for character in token):
            return token
        if "$" in token and not token.startswith("'"):
            return "$" + token.split("$", 1)[1].strip('"')
    return None


def image_argv(config: ImageConfig, command: str | None, args: Sequence[str]) -> list[str]:
    """Entrypoint, then the job's command (else the image's Cmd), then the job's args."""
    cmd = command_words(command) if command is not None else list(config.cmd)
    argv = [*config.entrypoint, *cmd, *args]
    if not argv:
        raise ImageProblem("the image has no Entrypoint or Cmd; give the job a command")
    return argv


def image_environment(config: ImageConfig, base: dict[str, str]) -> dict[str, str]:
    """``base`` (the attempt's fixed variables) under the image's Env; the job's own env and
    Herder's variables are laid on top by the caller."""
    return {**base, **dict(config.env)}
