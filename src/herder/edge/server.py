"""``herder edge``: the directory opened (its tables made), the default cell registered on a
first start when one is given, and the edge served by uvicorn with the API's bounded heads."""

from __future__ import annotations

from datetime import UTC, datetime

import uvicorn

from herder.directory.repository import Directory
from herder.domain.cells import Cell, CellCreate
from herder.edge.app import create_edge_app
from herder.edge.settings import EdgeSettings
from herder.http_head import SERVER_KEEP_ALIVE_SECONDS, BoundedHttpToolsProtocol
from herder.telemetry import tracing


def open_directory(settings: EdgeSettings) -> tuple[Directory, Cell | None]:
    """The directory, and its default cell (registered now from the settings if it has
    none and they name one)."""
    directory = Directory(settings.directory_url)
    default = directory.default_cell()
    if default is None and settings.default_cell_url is not None:
        given = CellCreate(
            name=settings.default_cell,
            region=settings.default_region,
            api_url=settings.default_cell_url,
        )  # a ValidationError names what is wrong with it
        default = directory.create_cell(given.name, given.region, given.api_url, datetime.now(UTC))
    return directory, default


def serve(settings: EdgeSettings, directory: Directory) -> None:
    tracing.configure("edge")  # before the app: it adds the request spans' middleware
    config = uvicorn.Config(
        create_edge_app(settings, directory),
        host=settings.host,
        port=settings.port,
        http=BoundedHttpToolsProtocol,
        timeout_keep_alive=SERVER_KEEP_ALIVE_SECONDS,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
        proxy_headers=False,  # the client is the connection's peer, never what it says
    )
    try:
        uvicorn.Server(config).run()
    finally:
        directory.close()
