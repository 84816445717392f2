"""What an edit makes of a file, and how the change is shown (stdlib only, Python 3.8).

An env file is ``KEY=value`` lines (``export KEY=value``), comments and blank lines, as systemd's
``EnvironmentFile=``, ``docker --env-file`` and a shell read them. A file with any other line is
not an env file (a private key, ``~/.aws/credentials``, ``.netrc``, a shell history): it is
refused by its line number, before anything of it is shown or changed. The diff of an env-file
edit shows only the lines the edit adds or changes, never the lines around them, and a value
that looks like a secret is hidden there. What is written is never a hidden value: a value that
holds the redaction mark, a newline or a NUL is refused.

Quoting: a value that needs it is written ``"..."`` with ``\\``, ``"``, ``$`` and a backquote
escaped by a backslash: systemd (``EnvironmentFile=``, env-file.c: inside double quotes a
backslash before one of those four gives that character) and a POSIX shell read it back as the
same value. (``docker run --env-file`` takes a value literally, quotes included.)
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Dict, List, Optional, Tuple

from ..environment.envvars import REDACTED, hide_url_password, shown_value
from .fixfiles import Refused, sha256

ENV_LINE = re.compile(r"^(\s*(?:export\s+)?)([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_PLAIN = re.compile(r"^[A-Za-z0-9_./:@%+,=-]*$")
_ESCAPED = re.compile(r'([\\"$`])')
CONTEXT = 3  # lines around a change in the diff of a patch or a whole file (none for env files)


def quote(value: str) -> str:
    """``value`` as systemd's EnvironmentFile and a shell read it back unchanged."""
    if _PLAIN.match(value):
        return value
    return '"%s"' % _ESCAPED.sub(r"\\\1", value)


def check_env_text(text: str, path: str) -> None:
    """Refused unless every line of ``text`` is blank, a comment or ``[export ]KEY=value``;
    the reason names the first other line by its number only (its text is never shown)."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")) or ENV_LINE.match(line):
            continue
        raise Refused(
            "%s is not an env file: line %d is neither KEY=value, a comment nor blank; "
            "nothing of it is shown or changed" % (path, number)
        )


def _check_value(name: str, value: str) -> None:
    if REDACTED in value:
        raise Refused(
            "the value for %s holds a redacted part (%s): archgap never writes a value it "
            "did not see whole; set %s by hand" % (name, REDACTED, name)
        )
    if any(c in value for c in "\n\r\0"):
        raise Refused("the value for %s holds a line break or a NUL; not written" % name)


def edit_env_text(text: str, pairs: List[Tuple[str, str]]) -> str:
    """``text`` with each NAME set to VALUE: a line that sets NAME is changed in place (its
    ``export`` kept), other lines are kept, new names are appended."""
    for name, value in pairs:
        _check_value(name, value)
    lines = text.splitlines(True)
    wanted = dict(pairs)
    seen = set()
    for i, line in enumerate(lines):
        match = ENV_LINE.match(line.rstrip("\r\n"))
        if match is None or match.group(2) not in wanted:
            continue
        name = match.group(2)
        ending = line[len(line.rstrip("\r\n")) :]
        lines[i] = "%s%s=%s%s" % (match.group(1), name, quote(wanted[name]), ending)
        seen.add(name)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    for name, value in pairs:
        if name not in seen:
            lines.append("%s=%s\n" % (name, quote(value)))
    return "".join(lines)


def new_bytes(edit: Dict[str, Any], old: Optional[bytes]) -> bytes:
    """What the file at edit["path"] becomes; Refused when the edit does not fit the file."""
    kind = edit.get("kind")
    path = str(edit.get("path"))
    if kind == "env-file":
        text = (old or b"").decode("utf-8", "surrogateescape")
        check_env_text(text, path)
        pairs = [(str(k), str(v)) for k, v in edit.get("set") or []]
        return edit_env_text(text, pairs).encode("utf-8", "surrogateescape")
    if kind == "file":
        content = str(edit.get("content", ""))
        if REDACTED in content:
            raise Refused("the content for %s holds a redacted part; not written" % path)
        return content.encode("utf-8")
    if kind == "patch":
        if old is None:
            raise Refused("%s does not exist; the patch is for an installed file" % path)
        if sha256(old) != edit.get("sha256"):
            if sha256(old) == edit.get("sha256_after"):
                return old  # already patched
            raise Refused(
                "%s is not the released file the patch is for (sha256 %s, expected %s)"
                % (path, sha256(old), edit.get("sha256"))
            )
        new = old.replace(str(edit["old"]).encode("utf-8"), str(edit["new"]).encode("utf-8"), 1)
        if sha256(new) != edit.get("sha256_after"):
            raise Refused("the patch of %s does not give the expected file" % path)
        return new
    raise Refused("unknown edit kind %r" % kind)


def _shown(line: str) -> str:
    """One line of a file as a diff may show it: a setting's secret-looking value hidden."""
    text = line.rstrip("\r\n")
    match = ENV_LINE.match(text)
    if match is None:
        return hide_url_password(line)
    raw = match.group(3)
    quoted = len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\""
    inner = raw[1:-1] if quoted else raw  # judged as the value it quotes
    value = shown_value(match.group(2), inner)
    value = raw if value == inner else value
    return "%s%s=%s%s" % (match.group(1), match.group(2), value, line[len(text) :])


def diff(path: str, old: Optional[bytes], new: Optional[bytes], context: int = CONTEXT) -> str:
    """The unified diff from ``old`` to ``new`` with ``context`` lines around each change;
    secret-looking values are never in it."""

    def lines(data: Optional[bytes]) -> List[str]:
        return (data or b"").decode("utf-8", "replace").splitlines(True)

    before = "/dev/null" if old is None else "a" + path
    after = "/dev/null" if new is None else "b" + path
    found = difflib.unified_diff(lines(old), lines(new), before, after, n=context)
    return "".join(d if d.startswith("@@") else d[:1] + _shown(d[1:]) for d in found)


def context_of(kind: Any) -> int:
    """Lines of context a diff of this kind of edit shows: none for an env file."""
    return 0 if kind == "env-file" else CONTEXT
