"""Log bytes into text lines: the one decoder the follower and the log window share."""

from __future__ import annotations


def decode_line(raw: bytes) -> str:
    """One line's bytes (no newline) as text: a CRLF ending's CR dropped, invalid UTF-8 replaced."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw.decode("utf-8", errors="replace")


def split_lines(data: bytes) -> list[bytes]:
    """Complete lines of ``data`` (the bytes after its last newline are left out), without newlines."""
    last = data.rfind(b"\n")
    if last < 0:
        return []
    return data[:last].split(b"\n")
