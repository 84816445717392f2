"""The two errors every command can end with (``archgap.api`` re-exports both; the CLI reports
either on one line, exit code 2)."""

from __future__ import annotations

# A command's exit code, which its typed result decides (``exit_code``): 0 what was asked holds,
# 1 a gap (what was asked does not hold), 2 an error (nothing could be judged).
EXIT_OK = 0
EXIT_GAP = 1
EXIT_ERROR = 2


class UsageError(ValueError):
    """A bad argument: a path that does not exist, a name that cannot be traced, an option that
    needs another."""


class ProbeError(Exception):
    """The facts could not be collected: an unreachable host, an unreadable --env-from."""
