"""One definitions file read as YAML: its data, and the line where each document path starts,
so every problem can be named ``file:line: jobs[2].resources.cpu``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.reader import ReaderError

from herder.definitions.problems import Problem, Where

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_VALUES = 200_000  # values in a document once its aliases are expanded ("billion laughs")
MAX_DEPTH = 100  # sequences and mappings nested in one another; composing recurses per level

DocumentPath = tuple[str | int, ...]


def dotted(path: DocumentPath) -> str:
    """``("jobs", 2, "resources", "cpu")`` as ``jobs[2].resources.cpu``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text


@dataclass(frozen=True)
class Source:
    file: str  # as the user named it (or found in the directory they named)
    directory: Path  # where the file's relative artifact paths start
    data: Any
    lines: dict[DocumentPath, int]
    allowed: tuple[Path, ...] = ()  # more directories its artifacts may lie under

    def where(self, path: DocumentPath) -> Where:
        """The line of ``path``, or of the nearest enclosing value that has one."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return Where(self.file, line, dotted(path))
        return Where(self.file, 1, dotted(path))


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a document nested past ``MAX_DEPTH`` before its
    recursive composer runs out of stack (``[[[[…`` a hundred thousand deep)."""

    depth = 0

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.depth >= MAX_DEPTH:
            raise ComposerError(
                None, None, f"nested deeper than {MAX_DEPTH} levels", self.get_mark()
            )
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def read(path: Path, file: str, allowed: tuple[Path, ...] = ()) -> Source | Problem:
    """The file's single YAML document, or the problem with it (syntax errors at their line)."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return Problem(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB", Where(file, 1, ""))
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return Problem(f"cannot be read: {error}", Where(file, 1, ""))
    return parse(text, file, path.parent, allowed)


def parse(
    text: str, file: str, directory: Path = Path("."), allowed: tuple[Path, ...] = ()
) -> Source | Problem:
    """``text``'s single YAML document, or the problem with it (syntax errors at their line):
    a file's, or one the dashboard's editor sends (``definitions/workflow_text.py``)."""
    try:
        loader = _Loader(text)  # refuses a character YAML does not allow (a NUL), at its place
    except ReaderError as error:
        line = text.count("\n", 0, max(error.position, 0)) + 1
        return Problem(f"YAML: {error.reason}", Where(file, line, ""))
    try:
        node = loader.get_single_node()
        lines: dict[DocumentPath, int] = {}
        if node is not None:
            problem = _map_lines(node, file, lines)
            if problem is not None:
                return problem
        data = None
        if node is not None:
            try:
                data = loader.construct_document(node)
            except (ValueError, TypeError, AttributeError):  # a tagged or dated value that is none
                return _unreadable(node, file)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else 1
        message = " ".join(part for part in (error.context, error.problem) if part)
        return Problem(f"YAML syntax: {message}", Where(file, line, ""))
    except yaml.YAMLError as error:
        return Problem(f"YAML: {error}", Where(file, 1, ""))
    finally:
        loader.dispose()
    return Source(file, directory, data, lines, allowed)


def _unreadable(root: Node, file: str) -> Problem:
    """The first scalar that cannot be the value its tag or its look says (``2001-02-30``,
    ``!!int abc``), which PyYAML's constructor raises for with no place."""
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, ScalarNode):
            loader = _Loader("")
            try:
                loader.construct_object(node)
            except (ValueError, TypeError, AttributeError) as error:
                message = f"YAML: {node.value[:80]!r} cannot be read as {node.tag}: {error}"
                return Problem(message, Where(file, node.start_mark.line + 1, ""))
            finally:
                loader.dispose()
        stack.extend(reversed(_children(node)))
    return Problem("YAML: a value cannot be read", Where(file, root.start_mark.line + 1, ""))


def _map_lines(root: Node, file: str, lines: dict[DocumentPath, int]) -> Problem | None:
    """Record each path's line (a mapping entry's is its key's); refuse a key given twice in
    one mapping (YAML would keep the last silently) and aliases that expand past
    ``MAX_VALUES``. Iterative, and each node is walked once however many aliases name it."""
    seen: set[int] = set()
    stack: list[tuple[Node, DocumentPath, int]] = [(root, (), root.start_mark.line)]
    while stack:
        node, path, line = stack.pop()
        lines.setdefault(path, line + 1)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, SequenceNode):
            stack.extend(
                (child, (*path, index), child.start_mark.line)
                for index, child in enumerate(node.value)
            )
        elif isinstance(node, MappingNode):
            keys: set[str] = set()
            for key, value in node.value:
                if not isinstance(key, ScalarNode):
                    continue  # a complex key; the validation that follows refuses it
                if key.value in keys and key.value != "<<":
                    return Problem(
                        f"{key.value!r} is given twice in this mapping",
                        Where(file, key.start_mark.line + 1, dotted(path)),
                    )
                keys.add(key.value)
                stack.append((value, (*path, key.value), key.start_mark.line))
    if _expanded_size(root) > MAX_VALUES:
        return Problem(
            f"the document's aliases expand to more than {MAX_VALUES} values",
            Where(file, root.start_mark.line + 1, ""),
        )
    return None


def _expanded_size(root: Node) -> int:
    """How many values the document holds with every alias expanded, computed once per node
    (children before parents), so a document of nested aliases is measured, not expanded."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_done or not children:
            sizes[id(node)] = min(1 + sum(sizes[id(child)] for child in children), MAX_VALUES + 1)
            continue
        if id(node) in visiting:  # an alias inside its own anchor: it never ends
            return MAX_VALUES + 1
        visiting.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []
