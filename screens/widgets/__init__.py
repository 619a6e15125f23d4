"""Widgets of srt-console's UI."""
