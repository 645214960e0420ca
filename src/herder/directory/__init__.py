"""The directory of cells (docs/cells.md): regions, cells and where each tenant lives, in a
small database of its own (``HERDER_DIRECTORY_URL``, SQLite or PostgreSQL), read by the
edge and never by a cell."""
