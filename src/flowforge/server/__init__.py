"""The HTTP server: `flowforge serve`, or `create_app()` under any ASGI server."""

from flowforge.server.app import create_app
from flowforge.server.settings import ServerSettings

__all__ = ["ServerSettings", "create_app"]
