"""The one exception type that reaches the user as a single sentence, and the helpers that keep
that sentence short and printable whatever the user's input holds."""

from __future__ import annotations

import re

#: the most characters of any one value a message quotes
MAX_VALUE_CHARS = 200
#: the most items of a list a message names (the rest are counted)
MAX_LIST_ITEMS = 10
#: the longest message [characters]; beyond it the middle is cut and counted
MAX_MESSAGE_CHARS = 2000

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b"}
#: a quoted value, or a run of characters without spaces, longer than MAX_VALUE_CHARS
_N = MAX_VALUE_CHARS + 1
_LONG = re.compile(rf"'[^']{{{_N},}}'|\"[^\"]{{{_N},}}\"|\S{{{_N},}}")
#: a whole comma-separated list of more than MAX_LIST_ITEMS items without spaces, starting after
#: a space or an opening bracket ("known: a, b, ...", "a zoo family (a, b, ...)", "its values
#: are a, b, ..."), up to the end of its clause; a list whose items hold spaces is left whole
#: (it cannot be told apart from prose), and messages built from the user's lists name them
#: with ``listing``
_LIST = re.compile(
    rf"(?:(?<=\s)|(?<=\()|(?<=\[)|^)(?:[^\s,;()\[\]]+, ){{{MAX_LIST_ITEMS},}}[^\s,;()\[\]]*[^\s,;.()\[\]]"
    rf"(?=[.;)\]]|\s|$)"
)


def printable(text: str) -> str:
    """``text`` with every control character (newline, tab, escape codes, C1 codes, the Unicode
    line separators) written as an escape (``\\n``, ``\\x1b``), so it stays on one line and
    cannot steer a terminal."""
    return _CONTROL.sub(
        lambda m: _NAMED.get(
            m.group(), f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}"
        ),
        text,
    )


def shorten(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """``text`` cut when longer than ``limit`` characters, the cut counted ("abc... (1,234
    characters)"; cut a little short, so that a message tidied again is not cut twice)."""
    return text if len(text) <= limit else f"{text[: limit - 10]}... ({len(text):,} characters)"


def quoted(value) -> str:
    """One value as a message quotes it: printable (``printable``), at most ``MAX_VALUE_CHARS``
    characters, in quotes when it is text."""
    text = printable(value if isinstance(value, str) else repr(value))
    if not isinstance(value, str):
        return shorten(text)
    if len(text) <= MAX_VALUE_CHARS:
        return f"'{text}'"
    return f"'{text[: MAX_VALUE_CHARS - 10]}'... ({len(text):,} characters)"


def listing(items, limit: int = MAX_LIST_ITEMS, word: str = "more") -> str:
    """``items`` as "a, b, c" naming at most ``limit`` of them, each quoted short and
    printable, the rest counted ("a, b, ... and 5 more")."""
    names = [printable(shorten(str(item))) for item in items]
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit:,} {word}"


def tidy(message: str) -> str:
    """A message made safe to print as one sentence: control characters escaped, any one value
    of more than ``MAX_VALUE_CHARS`` characters cut, a list of more than ``MAX_LIST_ITEMS``
    items cut to ten and counted, and the whole at most ``MAX_MESSAGE_CHARS``."""
    text = printable(str(message))

    def cut(match: re.Match) -> str:
        value = match.group()
        quote = value[0] if value[0] in "'\"" and value[-1] == value[0] else ""
        inner = value[1:-1] if quote else value
        # cut a little short, so that a message tidied twice (an error wrapped in another) is cut once
        return f"{quote}{inner[: MAX_VALUE_CHARS - 10]}{quote}... ({len(inner):,} characters)"

    def count(match: re.Match) -> str:
        items = match.group().split(", ")
        return f"{', '.join(items[:MAX_LIST_ITEMS])} and {len(items) - MAX_LIST_ITEMS:,} more"

    text = _LONG.sub(cut, text)
    text = _LIST.sub(count, text)
    if len(text) > MAX_MESSAGE_CHARS:
        keep = MAX_MESSAGE_CHARS // 2
        text = f"{text[:keep]} ... ({len(text) - 2 * keep:,} characters left out) ... {text[-keep:]}"
    return text


class PaigridError(Exception):
    """A problem with the user's input or environment, worded as one clear sentence.

    The command line prints ``str(error)`` and exits non-zero; it never shows a traceback
    for these.  The message is tidied (``tidy``) when the error is made, so a hostile value
    (an 11 MB line, escape codes, a newline) never reaches the terminal raw.
    """

    #: True when the command must exit without closing its open HDF5 file (a write that failed
    #: inside HDF5, which could crash on the close)
    exit_hard: bool = False

    def __init__(self, message: str = "", *rest):
        super().__init__(tidy(message), *rest)
