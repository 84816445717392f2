"""Values as text that is safe to show: a name or a message from a host, a document or a file may
carry control characters (ESC/OSC sequences set titles, colours, move the cursor; CR and newlines
forge lines) or bidirectional controls (which reorder what the reader sees: CVE-2021-42574). They
are shown as visible escapes (\\x1b, \\u202e), never sent raw. Every text renderer (tables, lines,
errors, Prometheus labels) takes them from here."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL; the bidi embeddings, overrides and isolates (U+202A-U+202E,
# U+2066-U+2069), the marks (U+200E, U+200F, U+061C); the line and paragraph separators (U+2028,
# U+2029), which str.splitlines and some terminals treat as line ends.
_BEYOND_C0 = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
_CONTROL_NOT_LAYOUT = re.compile(f"[\x00-\x08\x0b-\x1f{_BEYOND_C0}]")  # newline, tab kept


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def literal(text: str) -> str:
    """One value on one line: every control and bidi character (newlines too) as a visible
    escape."""
    return text if text.isprintable() else _CONTROL.sub(_visible, text)  # isprintable: fast


def terminal_safe(text: str) -> str:
    """Text for the terminal: control and bidi characters other than newline and tab made
    visible (the last line of defence; values are ``literal`` where they are interpolated)."""
    return _CONTROL_NOT_LAYOUT.sub(_visible, text)


def one_line(message: str) -> str:
    """A message (an error whose cause spans lines) on one line: its lines joined by "; "."""
    parts = [part.strip() for part in message.splitlines()]
    return literal("; ".join(part for part in parts if part))
