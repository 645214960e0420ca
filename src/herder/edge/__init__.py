"""The edge (docs/cells.md): a stateless reverse proxy in front of the cells, sending each
request to the cell of the tenant its key (or its hook's address) names, read from the
directory through a cache of bounded staleness; it never reads a cell's database."""
