"""``herder edge``: the routing layer in front of the cells (docs/cells.md)."""

from __future__ import annotations

from typing import Annotated

import typer

from herder.cli.common import app, fail, out


@app.command()
def edge(
    directory_url: Annotated[
        str | None,
        typer.Option(help="the directory's database, SQLite or PostgreSQL (HERDER_DIRECTORY_URL)"),
    ] = None,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8088,
    default_cell_url: Annotated[
        str | None,
        typer.Option(
            help="on a directory with no cell yet: the API of the cell every tenant made "
            "before cells lives in, registered as the default cell"
        ),
    ] = None,
    default_cell: Annotated[str, typer.Option(help="the default cell's name")] = "default",
    region: Annotated[str, typer.Option(help="the default cell's region")] = "default",
) -> None:
    """Run an edge: a stateless proxy sending each request to the cell of the tenant its
    key names, read from the directory (cached 5 s; HERDER_EDGE_CACHE_SECONDS)."""
    from pydantic import ValidationError

    from herder.domain.errors import HerderError, Invalid
    from herder.edge.server import open_directory, serve
    from herder.edge.settings import EdgeSettings

    settings = EdgeSettings.from_environment(
        directory_url=directory_url, host=host, port=port, default_cell_url=default_cell_url,
        default_cell=default_cell, default_region=region,
    )  # fmt: skip
    if not settings.directory_url:
        raise fail("no directory: give --directory-url or set HERDER_DIRECTORY_URL")
    try:
        directory, default = open_directory(settings)
    except HerderError as error:
        raise fail(str(error)) from None
    except ValidationError as error:
        raise fail(f"the default cell: {Invalid.from_errors(error.errors()).detail}") from None
    said = f"default cell {default.name} at {default.api_url}" if default else "no default cell"
    out.print(f"Herder edge listening on http://{settings.host}:{settings.port} ({said})")
    serve(settings, directory)
