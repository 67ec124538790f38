"""Beam's import logs, on the root logger, that BigQuery's client libraries are missing
(apitools). We never use BigQuery, and a user reads that line as our failure: our entry
points drop that one record, and nothing else of Beam's logging."""
from __future__ import annotations

import logging

APITOOLS_WARNING = "apitools not found, and bigquery client libraries are not available"


class _DropApitoolsWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(APITOOLS_WARNING)


def drop_beam_import_warning() -> None:
    """Install the filter once (before Beam is imported for it to matter)."""
    root = logging.getLogger()
    if not any(isinstance(f, _DropApitoolsWarning) for f in root.filters):
        root.addFilter(_DropApitoolsWarning())
