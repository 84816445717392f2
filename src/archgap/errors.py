"""The two errors every command can end with (``archgap.api`` re-exports both; the CLI reports
either on one line, exit code 2)."""

from __future__ import annotations


class UsageError(ValueError):
    """A bad argument: a path that does not exist, a name that cannot be traced, an option that
    needs another."""


class ProbeError(Exception):
    """The facts could not be collected: an unreachable host, an unreadable --env-from."""
