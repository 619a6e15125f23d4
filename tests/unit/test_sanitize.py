"""Hostile log content becomes inert plain text."""

from __future__ import annotations

import time

import pytest
from rich.console import Console
from rich.text import Text

from console.sanitize import DEFAULT_MAX_CHARS, clean_line, decode_line


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\x1b[31mred\x1b[0m plain", "red plain"),
        ("\x1b[1;38;5;196mbold\x1b[m", "bold"),
        ("\x1b[2J\x1b[Hcleared", "cleared"),  # erase screen, cursor home
        ("\x1b]0;owned title\x07after", "after"),  # OSC window title, BEL-terminated
        ("\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\", "link"),  # OSC 8 hyperlink, ST-terminated
        ("\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07copied?", "copied?"),  # OSC 52 clipboard write
        ("\x1bP+q544e\x1b\\dcs", "dcs"),  # DCS
        ("\x1b_apc\x1b\\x", "x"),  # APC
        ("\x9b31mc1 csi", "c1 csi"),  # 8-bit CSI
        ("\x1b(Bcharset", "charset"),
        ("\x1bcreset", "reset"),  # RIS
        ("unterminated \x1b]0;title without end", "unterminated "),
        ("bell\x07 back\x08space del\x7f", "bell backspace del"),
        ("nul\x00byte", "nulbyte"),
        ("a\tb", "a       b"),
        ("progress 10%\rprogress 100%", "progress 100%"),
        ("crlf line\r", "crlf line"),
        ("bidi \u202eevil\u202c text", "bidi evil text"),
        ("line\u2028separator", "line separator"),
        ("vertical\x0btab\x0cform\x1cfs", "verticaltabformfs"),
    ],
)
def test_escape_sequences_and_controls_are_removed(raw: str, expected: str) -> None:
    assert clean_line(raw) == expected


def test_rich_markup_is_kept_literally() -> None:
    raw = "[bold red]x[/] [link=https://evil.example]click[/link] :smile: [/]"
    cleaned = clean_line(raw)
    assert cleaned == raw
    console = Console(width=200, color_system=None, record=True, emoji=True)
    console.print(Text(cleaned), end="")
    assert console.export_text() == raw


def test_plain_text_is_returned_unchanged() -> None:
    line = "[2026-08-21 10:00:01 DP0 TP0] Decode batch. #running-req: 64, ünïcödé ✓ 日本語"
    assert clean_line(line) == line


def test_invalid_utf8_is_replaced() -> None:
    assert decode_line(b"ok \xff\xfe\xc3 end\n") == "ok \ufffd\ufffd\ufffd end"
    assert decode_line(b"\xe2\x9c\x93 valid") == "\u2713 valid"


def test_nul_bytes_and_escapes_in_bytes() -> None:
    assert decode_line(b"a\x00b\x1b[31mc\x1b[0m\r\n") == "abc"


def test_long_lines_are_capped_with_a_marker() -> None:
    line = "y" * 5000
    cleaned = clean_line(line, max_chars=100)
    assert cleaned == "y" * 100 + "… [+4900 chars]"
    assert clean_line("z" * 100, max_chars=100) == "z" * 100


def test_a_10mb_line_is_capped_fast() -> None:
    line = "\x1b[31m" + "A" * (10 * 1024 * 1024) + "\x1b[0m"
    started = time.perf_counter()
    cleaned = clean_line(line)
    elapsed = time.perf_counter() - started
    assert cleaned.startswith("A" * DEFAULT_MAX_CHARS) and cleaned.endswith(" chars]")
    assert len(cleaned) < DEFAULT_MAX_CHARS + 30
    assert elapsed < 0.05, elapsed

    raw = b"\xff" * (10 * 1024 * 1024)
    started = time.perf_counter()
    decoded = decode_line(raw)
    assert time.perf_counter() - started < 0.05
    assert decoded.startswith("\ufffd" * DEFAULT_MAX_CHARS) and len(decoded) < DEFAULT_MAX_CHARS + 30


def test_a_10mb_line_of_escapes_is_capped_fast() -> None:
    line = "\x1b]0;" * (2 * 1024 * 1024) + "\x1b" * (2 * 1024 * 1024)
    started = time.perf_counter()
    cleaned = clean_line(line)
    assert time.perf_counter() - started < 0.05
    assert "\x1b" not in cleaned


def test_output_never_holds_control_characters() -> None:
    hostile = "".join(chr(c) for c in range(0x00, 0xA0)) + "\u202e\u2066\u2028\ufeff"
    cleaned = clean_line(hostile * 3)
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in cleaned)
    assert not any(ch in cleaned for ch in "\u202e\u2066\u2028\ufeff")
