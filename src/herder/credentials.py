"""Where the CLI finds the server and its key, and the private files that hold them.

``HERDER_URL`` and ``HERDER_API_KEY`` come first; what they leave out comes from the
``client.json`` that ``herder up`` saves (mode 0600) in its home: ``$HERDER_HOME``'s when
that is set (an explicit home wins, as ``GIT_DIR`` does), else the nearest ``.herder`` in the
current directory or above it, as git finds ``.git``, so that a command run anywhere below
the directory ``herder up`` was started in reaches its server. Without ``HERDER_API_KEY``, the
session ``herder login`` saved (``session.json``, 0600, in ``$XDG_CONFIG_HOME/herder``) comes
before a client file's key, for its own server. A found file is used only
when it and its directory are the user's own and no symbolic link; either one readable by
others is made private, and said so, as the server's home is (``home.py``).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from herder.settings import DEFAULT_HOME

CLIENT_FILE = "client.json"
SESSION_FILE = "session.json"  # herder login's: a person's session on one server
WORKER_TOKEN_FILE = "worker-token"
HOME_MODE = 0o700
FILE_MODE = 0o600


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


def restrict(path: Path, mode: int) -> str:
    """Take away every permission beyond ``mode``; what was changed, or "" if nothing.
    Refuses (``SystemExit``) a symbolic link, and a path it cannot make private."""
    try:
        status = path.lstat()
    except FileNotFoundError:
        return ""
    if stat.S_ISLNK(status.st_mode):
        raise SystemExit(f"{path} is a symbolic link; Herder's home and its files must not be")
    current = stat.S_IMODE(status.st_mode)
    if not current & ~mode:
        return ""
    try:
        os.chmod(path, current & mode)
    except OSError as error:
        raise SystemExit(
            f"{path} is mode {current:04o}, readable by others, and cannot be made private: "
            f"{error.strerror}"
        ) from error
    return f"{path} was mode {current:04o}, now {current & mode:04o}"


def client_file_search(environment: Mapping[str, str], cwd: Path) -> tuple[Path, ...]:
    """Where the CLI looks for ``client.json``, in order: ``$HERDER_HOME``'s alone when it is
    set, else ``.herder/client.json`` in ``cwd`` (absolute) and every directory above it."""
    home = environment.get("HERDER_HOME")
    if home:
        return ((cwd / home) / CLIENT_FILE,)
    return tuple(directory / DEFAULT_HOME / CLIENT_FILE for directory in (cwd, *cwd.parents))


def searched_places(environment: Mapping[str, str], cwd: Path) -> str:
    """Where ``client_file_search`` looked, in words, for a message that found nothing."""
    if environment.get("HERDER_HOME"):
        return f"{client_file_search(environment, cwd)[0]}, as HERDER_HOME is set"
    return f"{DEFAULT_HOME / CLIENT_FILE} in {cwd} and every directory above it"


def where_the_cli_finds(home: Path) -> str:
    """How the CLI will find the client file ``herder up`` saved in ``home`` (absolute)."""
    if home.name == DEFAULT_HOME.name:
        return f"the CLI finds it from {home.parent} and every directory below it"
    return f"the CLI finds it with HERDER_HOME={home}"


@dataclass(frozen=True)
class ClientCredentials:
    url: str
    api_key: str
    ca_file: str | None = None  # the server's certificate's authority, when not the system's

    def save(self, home: Path) -> Path:
        path = home / CLIENT_FILE
        saved = {"url": self.url, "api_key": self.api_key}
        if self.ca_file:
            saved["ca_file"] = self.ca_file
        write_private(path, json.dumps(saved, indent=2))
        return path

    @classmethod
    def load(cls, home: Path | None = None) -> ClientCredentials | None:
        """The server's own view: ``home``'s saved key (for a restart), under the variables."""
        url, key = os.environ.get("HERDER_URL"), os.environ.get("HERDER_API_KEY")
        path = (home or home_directory()) / CLIENT_FILE
        if path.exists():
            saved = json.loads(path.read_text())
            url, key = url or saved.get("url"), key or saved.get("api_key")
        if url and key:
            return cls(url=url, api_key=key)
        return None


@dataclass(frozen=True)
class FoundCredentials:
    """What the CLI found: the credentials (none: nothing configured), the file read, and
    what was made private on the way."""

    credentials: ClientCredentials | None
    path: Path | None = None
    corrected: tuple[str, ...] = ()


def find_credentials(environment: Mapping[str, str], cwd: Path) -> FoundCredentials:
    """The CLI's credentials: the variables, then the first client file of the search.
    ``ValueError`` (or ``SystemExit`` from ``restrict``) naming a file it may not use."""
    url, key = environment.get("HERDER_URL"), environment.get("HERDER_API_KEY")
    ca_file = environment.get("HERDER_CA_FILE") or None
    if url and key:
        return FoundCredentials(ClientCredentials(url, key, ca_file))
    session = saved_session(environment)
    if not key and session is not None and (not url or url.rstrip("/") == session.url):
        return FoundCredentials(session.for_server(ca_file), session_path(environment))
    search = client_file_search(environment, cwd)
    path = next((path for path in search if os.path.lexists(path)), None)
    if path is None:
        return FoundCredentials(None)
    corrected = tuple(_made_private(path))
    try:
        with open(path, "rb", opener=_no_follow) as file:
            saved = json.loads(file.read(64 * 1024))
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read {path}: {error}") from error
    if not isinstance(saved, dict):
        raise ValueError(f"{path} is not a JSON object")
    url, key = url or saved.get("url"), key or saved.get("api_key")
    if not (isinstance(url, str) and url and isinstance(key, str) and key):
        return FoundCredentials(None, path, corrected)
    saved_ca = saved.get("ca_file") if isinstance(saved.get("ca_file"), str) else None
    return FoundCredentials(ClientCredentials(url, key, ca_file or saved_ca), path, corrected)


def _made_private(path: Path) -> list[str]:
    """The client file's directory and the file, each the user's own, made private."""
    for item in (path.parent, path):
        owner = item.lstat().st_uid
        if owner != os.geteuid():
            raise ValueError(
                f"{item} belongs to uid {owner}, not to this user (uid {os.geteuid()}): "
                "another user's file could send your commands to their server"
            )
    found = [restrict(path.parent, HOME_MODE), restrict(path, FILE_MODE)]
    return [item for item in found if item]


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK)


@dataclass(frozen=True)
class SavedSession:
    """A person's session on one server, as ``herder login`` saved it."""

    url: str
    token: str
    user_name: str = ""
    ca_file: str | None = None

    def for_server(self, ca_file: str | None) -> ClientCredentials:
        return ClientCredentials(self.url, self.token, ca_file or self.ca_file)


def session_path(environment: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/herder/session.json`` (``~/.config`` when unset)."""
    config = environment.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "herder" / SESSION_FILE


def save_session(environment: Mapping[str, str], session: SavedSession) -> Path:
    path = session_path(environment)
    path.parent.mkdir(parents=True, exist_ok=True, mode=HOME_MODE)
    saved = {"url": session.url, "token": session.token, "user_name": session.user_name}
    if session.ca_file:
        saved["ca_file"] = session.ca_file
    write_private(path, json.dumps(saved, indent=2))
    return path


def saved_session(environment: Mapping[str, str]) -> SavedSession | None:
    """The saved session, when there is one and it is the user's own private file."""
    path = session_path(environment)
    if not os.path.lexists(path):
        return None
    try:
        _made_private(path)
        with open(path, "rb", opener=_no_follow) as file:
            saved = json.loads(file.read(64 * 1024))
    except (OSError, ValueError) as error:
        raise ValueError(f"cannot read {path}: {error}") from error
    if not isinstance(saved, dict):
        return None
    url, token = saved.get("url"), saved.get("token")
    if not (isinstance(url, str) and url and isinstance(token, str) and token):
        return None
    ca_file = saved.get("ca_file") if isinstance(saved.get("ca_file"), str) else None
    user_name = saved.get("user_name") if isinstance(saved.get("user_name"), str) else ""
    return SavedSession(url.rstrip("/"), token, user_name or "", ca_file)
