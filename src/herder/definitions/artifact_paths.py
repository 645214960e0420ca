"""Which local files a definitions file may name as artifacts: those under its own directory,
or under a directory the user opened with ``--allow-path``.

A file applied from a contributor's change must not upload the applier's own files
(``artifact: ../.ssh/id_rsa``, ``/etc/shadow``, a symlink to either): the path is resolved —
every symlink on the way, directories included — and the real file must lie inside one of
the allowed directories, themselves resolved. An absolute path counts only under an
``--allow-path`` directory. The resolved path is the one read and uploaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class OutsideAllowed(Exception):
    """The path leaves every directory it may name; the message says which and how to open."""


def artifact_file(directory: Path, named: str, allowed: Sequence[Path]) -> Path:
    """The real file ``named`` (relative to ``directory``, the naming file's) designates, or
    ``OutsideAllowed``."""
    try:
        path = Path(named)
        real = (directory / path).resolve()
        roots = [root.resolve() for root in allowed]
        if not path.is_absolute():
            roots.insert(0, directory.resolve())
    except (OSError, RuntimeError, ValueError) as error:  # a symlink loop, a NUL
        raise OutsideAllowed(f"{named} cannot be resolved: {error}") from error
    if any(real.is_relative_to(root) for root in roots):
        return real
    if path.is_absolute():
        reason = "is an absolute path outside every --allow-path directory"
    else:
        reason = f"leaves the directory {directory} (symlinks resolved: {real})"
    raise OutsideAllowed(
        f"{named} {reason}; artifacts must lie under the directory of the file that names "
        "them, or under a directory opened with --allow-path DIR"
    )
