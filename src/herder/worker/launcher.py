"""The sandbox launcher: built once per worker host from ``sandbox.c``, then run as a server
(``launch_server.py``).

The launcher must be a small native program: it sets up namespaces, mounts, the uid switch and
the seccomp filter, where a chain of util-linux tools costs three execs (docs/design.md §9). It is
compiled from the source shipped in this package with the host's C compiler into a root-owned
directory, named after the hash of its source and flags, so an upgrade builds a new one and a
job can never replace it. It is linked statically where the host has a static libc.

Each worker runs it once, as a server: an attempt then costs one ``clone`` of a small process
instead of an exec (about 0.35 ms of CPU here, most of it libc's start-up asking the CPU what
it is, which traps in a VM) behind a fork of the worker's own.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from herder.domain.errors import HerderError

COMPILE_FLAGS = [
    "-O2",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-D_FORTIFY_SOURCE=2",
    "-fstack-protector-strong",
]


class LauncherUnavailable(HerderError):
    """The sandbox launcher could not be built on this host; the message says why."""


def sandbox_source() -> bytes:
    return resources.files("herder.worker").joinpath("sandbox.c").read_bytes()


def sandbox_launcher(bin_directory: Path) -> Path:
    """The launcher for this version of the source, built into ``bin_directory`` (root-owned,
    made by ``statedir.secure_directory``) when it is not there yet."""
    source = sandbox_source()
    recipe = hashlib.sha256(source + " ".join(COMPILE_FLAGS).encode()).hexdigest()[:16]
    target = bin_directory / f"herder-sandbox-{recipe}"
    if target.is_file() and not target.is_symlink():
        return target
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise LauncherUnavailable(
            "a root worker sandboxes every attempt with herder-sandbox, built once from source "
            "with the host's C compiler; install one (apt-get install gcc) or run a trusted "
            "fleet's worker with --isolation none"
        )
    # Each builder's own files: two workers starting together on a new host build side by side.
    partial = bin_directory / f".{target.name}.{os.getpid()}"
    source_file = partial.with_name(f"{partial.name}.c")
    source_file.write_bytes(source)
    try:
        for linking in (["-static"], []):  # static execs faster; libc.a may be missing
            built = subprocess.run(
                [compiler, *COMPILE_FLAGS, *linking, "-o", str(partial), str(source_file)],
                capture_output=True,
                text=True,
                check=False,
            )
            if built.returncode == 0:
                break
        if built.returncode != 0:
            raise LauncherUnavailable(f"building herder-sandbox failed:\n{built.stderr}")
        partial.chmod(0o755)
        partial.rename(target)  # atomic: two workers starting together both end with one
    finally:
        source_file.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)
    return target
