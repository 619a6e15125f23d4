"""A DataTable for tables updated in place, whose render caches hold only what can still be drawn.

Textual's DataTable keys every render cache (cells, rows, row renderables, lines) by an update
count that each ``update_cell``, ``add_row`` or sort raises. An entry of an older count can never
be drawn again, yet it stays until its cache's LRU cap pushes it out: 10,000 cells and 1,000 rows
and lines. A table updated at every finding (the workers and findings tables under a busy
follow) grew towards those caps for minutes: 85,000 more live objects after three minutes.

:class:`LiveTable` drops the dead entries when it first draws after an update, so its caches hold
what the current frame drew and nothing older. Drawing costs the same: a new count misses every
old entry anyway.
"""

from __future__ import annotations

from typing import Any

from textual.cache import LRUCache
from textual.strip import Strip
from textual.widgets import DataTable

__all__ = ["LiveTable", "render_caches"]

# The caches keyed by the update count (Textual 8's names). One this Textual lacks is skipped.
_KEYED_BY_UPDATE = ("_cell_render_cache", "_row_render_cache", "_row_renderable_cache", "_line_cache")


def render_caches(table: DataTable[Any]) -> dict[str, LRUCache[Any, Any]]:
    """The table's render caches that are keyed by its update count, by name."""
    found: dict[str, LRUCache[Any, Any]] = {}
    for name in _KEYED_BY_UPDATE:
        cache = getattr(table, name, None)
        if isinstance(cache, LRUCache):
            found[name] = cache
    return found


class LiveTable(DataTable[Any]):
    """A DataTable whose render caches keep only the current update's entries."""

    _drawn_update: int | None = None

    def render_line(self, y: int) -> Strip:
        update = getattr(self, "_update_count", None)
        if update != self._drawn_update:
            self._drawn_update = update
            for cache in render_caches(self).values():
                cache.clear()
        return super().render_line(y)
