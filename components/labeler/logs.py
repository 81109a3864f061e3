"""Structured logs: one JSON object per line on stdout, for the labeler's own events and for any
warning a library logs through ``logging``."""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any, Optional, TextIO

LOGGER_NAME = "topology-labeler"


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "event", ...fields}`` on one line; fields come from
    ``extra={"fields": {...}}`` (see ``log_event``)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, separators=(",", ":"))


def configure_logging(stream: Optional[TextIO] = None) -> logging.Logger:
    """Route every log record through ``JsonFormatter``; the labeler logs at INFO, libraries
    (botocore, urllib3, the Kubernetes client) only from WARNING up."""
    handler = logging.StreamHandler(sys.stdout if stream is None else stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(logging.INFO)
    return logger


def log_event(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    """Log ``event`` (a snake_case name) with structured fields."""
    logger.log(level, event, extra={"fields": fields})
