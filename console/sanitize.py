"""Log text is untrusted input: make it inert plain text before it is displayed.

:func:`clean_line` removes terminal escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, other
ESC sequences, their 8-bit C1 forms), C0/C1 control characters and DEL, bidirectional-override
and line/paragraph separator characters; expands tabs; keeps what a terminal would show of a
line rewritten with carriage returns (the last segment); and caps the length with a visible
``… [+N chars]`` marker. The result is plain text: markup such as ``[bold red]`` stays literal as
long as the UI renders it with ``rich.text.Text`` (never ``Text.from_markup``, never a markup
string). :func:`decode_line` does the same for raw bytes, replacing invalid UTF-8.

A very long line is cut before any regex runs over it, so a 10 MB line costs about as much as
``max_chars`` characters.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["DEFAULT_MAX_CHARS", "TAB_SIZE", "clean_line", "clean_text", "decode_line", "has_controls"]

DEFAULT_MAX_CHARS: Final[int] = 2000
TAB_SIZE: Final[int] = 8
# Escape sequences are removed after the cut, so the cut keeps some room for them.
_ROOM: Final[int] = 4

# Anything that needs work: ESC, C0 (tab, CR included), DEL, C1, bidi controls, separators.
_SPECIAL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff\ufff9-\ufffb]")
_SEQUENCES = re.compile(
    # OSC (title, hyperlink, clipboard...) up to BEL or ST; unterminated: to the end.
    "(?:\x1b\\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"
    # DCS, SOS, PM, APC strings up to ST.
    "|(?:\x1b[P_^X]|[\x90\x98\x9e\x9f])[^\x1b\x9c\x07]*(?:\x1b\\\\|\x9c|\x07)?"
    # CSI: parameters, intermediates, final byte.
    "|(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]?"
    # Other ESC sequences (charset selection, keypad modes, RIS...).
    "|\x1b[ -/]*[0-~]?"
)
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff\ufff9-\ufffb]")
_SEPARATORS = re.compile("[\u2028\u2029]")


def _marker(hidden: int) -> str:
    return f"… [+{hidden} chars]"


def _clean(text: str) -> str:
    if "\x1b" in text or _has_c1_introducer(text):
        text = _SEQUENCES.sub("", text)
    if "\r" in text:
        # A terminal shows what was written last over the line.
        segments = [s for s in text.split("\r") if s]
        text = segments[-1] if segments else ""
    text = _CONTROLS.sub("", text)
    text = _SEPARATORS.sub(" ", text)
    if "\t" in text:
        text = text.expandtabs(TAB_SIZE)
    return text


def _has_c1_introducer(text: str) -> bool:
    return any(ch in text for ch in "\x90\x98\x9b\x9d\x9e\x9f")


def clean_line(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """``text`` as inert, single-line plain text of at most about ``max_chars`` characters."""
    return _cap_and_clean(text, max_chars, 0)


def has_controls(text: str) -> bool:
    """Whether ``text`` holds anything :func:`clean_line` would remove or replace (escape
    sequences, control characters, tabs, line breaks, bidirectional overrides)."""
    return _SPECIAL.search(text) is not None


def clean_text(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Several lines (a recipe's YAML, a cluster's output) as :func:`clean_line` text, line by line."""
    return "\n".join(clean_line(line, max_chars) for line in text.split("\n"))


def decode_line(data: bytes, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Raw log bytes (one line) as :func:`clean_line` text; invalid UTF-8 becomes U+FFFD."""
    if data.endswith(b"\n"):
        data = data[:-1]
    limit = max(1, max_chars) * _ROOM * 4  # UTF-8: at most 4 bytes a character
    hidden = 0
    if len(data) > limit:
        hidden = len(data) - limit  # bytes, counted as characters: an estimate
        data = data[:limit]
    return _cap_and_clean(data.decode("utf-8", errors="replace"), max_chars, hidden)


def _cap_and_clean(text: str, max_chars: int, hidden: int) -> str:
    max_chars = max(1, max_chars)
    limit = max_chars * _ROOM
    if len(text) > limit:
        hidden += len(text) - limit
        text = text[:limit]
    if _SPECIAL.search(text) is not None:
        text = _clean(text)
    if len(text) > max_chars:
        hidden += len(text) - max_chars
        text = text[:max_chars]
    return text + _marker(hidden) if hidden else text
