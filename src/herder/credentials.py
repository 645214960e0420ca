"""Where the CLI finds the server and its key: ``HERDER_URL``/``HERDER_API_KEY``, or the
``client.json`` that ``herder up`` saves (mode 0600) in ``$HERDER_HOME`` (default ./.herder)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from herder.settings import DEFAULT_HOME

CLIENT_FILE = "client.json"
WORKER_TOKEN_FILE = "worker-token"


def home_directory() -> Path:
    return Path(os.environ.get("HERDER_HOME", DEFAULT_HOME)).absolute()


def write_private(path: Path, text: str) -> None:
    """Create or replace ``path`` readable by its owner only (never world-readable, even
    for an instant)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
    partial.replace(path)


@dataclass(frozen=True)
class ClientCredentials:
    url: str
    api_key: str

    def save(self, home: Path) -> Path:
        path = home / CLIENT_FILE
        write_private(path, json.dumps({"url": self.url, "api_key": self.api_key}, indent=2))
        return path

    @classmethod
    def load(cls, home: Path | None = None) -> ClientCredentials | None:
        url, key = os.environ.get("HERDER_URL"), os.environ.get("HERDER_API_KEY")
        path = (home or home_directory()) / CLIENT_FILE
        if path.exists():
            saved = json.loads(path.read_text())
            url, key = url or saved.get("url"), key or saved.get("api_key")
        if url and key:
            return cls(url=url, api_key=key)
        return None
