"""``python -m herder.cli``, as the local worker of ``herder up`` is started."""

from __future__ import annotations

from herder.cli import main

main()
