"""Keys never reach a log: credentials are cut out of logged query strings.

A browser cannot set headers on a WebSocket, so old clients (and the web app)
send the API key as `?token=<key>`, and the ASGI server writes every request
line - query string included - into its access log, where anyone who reads
the logs could take the key.  This filter, on the ASGI server's loggers,
replaces the value of every credential parameter (`token`, `ticket`, `key`,
`api_key`, `access_token`) with `***` before a record is formatted.
"""

from __future__ import annotations

import logging
import re
from typing import Any

__all__ = ["CredentialFilter", "install", "redact_query"]

_CREDENTIAL = re.compile(r"(?i)([?&](?:token|ticket|key|api_key|access_token)=)[^&\s\"']*")
#: the loggers an ASGI server writes request lines to (uvicorn's)
LOGGERS = ("uvicorn.access", "uvicorn.error", "uvicorn")


def redact_query(text: str) -> str:
    """`text` with the value of every credential query parameter as `***`."""
    return _CREDENTIAL.sub(r"\1***", text) if "=" in text else text


def _clean(value: Any) -> Any:
    return redact_query(value) if isinstance(value, str) else value


class CredentialFilter(logging.Filter):
    """Rewrites a record's message and arguments; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_query(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_clean(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {name: _clean(arg) for name, arg in record.args.items()}
        return True


_FILTER = CredentialFilter()


def install() -> None:
    """Put the filter on the ASGI server's loggers (once; idempotent)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
