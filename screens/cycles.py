"""Textual's caches without the reference cycles that made every frame cyclic garbage.

What is in a reference cycle is not freed when its last user drops it, only by the cyclic
collector, and a collection of the older generations walks all of it: under a busy followed
log (1,000 lines a second in each of 64 worker logs) they held 100,000 to 270,000 such objects
and a collection took 350 to 600 ms (a key press, a frame, a finding held back that long).
Textual 8 made them in two places:

- A :class:`textual.strip.Strip` memoises what it derives in caches of its own, and two of
  them held the strip itself: ``divide(cuts)`` when the only cut is the strip's length (the
  compositor divides every line of every widget on every frame; most are not cut) and
  ``crop_extend(0, length)``.
- :class:`textual.cache.LRUCache` links its entries in a ring; ``clear()`` dropped the ring
  whole, with every strip and segment it held. A DataTable clears its caches at every cell
  update (the workers and findings tables, at every finding).

:func:`install` makes those two strip calls return the strip without caching it (the result
is the same strip either way) and ``clear()`` unlink the entries first, so that all of it is
freed at once. It checks first that the installed Textual still does each, and leaves a part
that no longer does alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.strip import Strip

__all__ = ["install", "installed"]

_installed: set[str] = set()


def installed() -> frozenset[str]:
    """What :func:`install` replaced: ``strip``, ``lru-clear``."""
    return frozenset(_installed)


def install() -> frozenset[str]:
    """Break the cycles this Textual makes (once each); what was replaced."""
    if "strip" not in _installed and _strip_holds_itself():
        _uncycle_strip()
        _installed.add("strip")
    if "lru-clear" not in _installed and _cleared_ring_is_linked():
        _uncycle_lru_clear()
        _installed.add("lru-clear")
    return installed()


def _uncycle_strip() -> None:
    divide: Callable[[Strip, Iterable[int]], Sequence[Strip]] = Strip.divide
    crop_extend: Callable[[Strip, int, int, Style | None], Strip] = Strip.crop_extend

    def divide_uncycled(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
        cuts = [cut for cut in cuts if cut <= self.cell_length]
        if cuts == [self.cell_length]:
            return [self]
        return divide(self, cuts)

    def crop_extend_uncycled(self: Strip, start: int, end: int, style: Style | None) -> Strip:
        if start <= 0 and end == self.cell_length:
            return self
        return crop_extend(self, start, end, style)

    Strip.divide = divide_uncycled  # type: ignore[method-assign]
    Strip.crop_extend = crop_extend_uncycled  # type: ignore[method-assign]


def _uncycle_lru_clear() -> None:
    clear: Callable[[LRUCache[Any, Any]], None] = LRUCache.clear

    def clear_unlinked(self: LRUCache[Any, Any]) -> None:
        for link in self._cache.values():
            link.clear()  # [previous, next, key, value]: the ring falls apart, entry by entry
        clear(self)

    LRUCache.clear = clear_unlinked  # type: ignore[method-assign]


def _strip_holds_itself() -> bool:
    """Whether this Textual's strip holds itself after the two calls (as 8.x does)."""
    strip = Strip([Segment("probe")], 5)
    held = [*strip.divide([5]), strip.crop_extend(0, 5, None)]
    if not all(s is strip for s in held):
        return False
    caches = [getattr(strip, name, None) for name in ("_divide_cache", "_crop_extend_cache")]
    return any(cache is not None and len(cache) > 0 for cache in caches)


def _cleared_ring_is_linked() -> bool:
    """Whether this Textual's LRUCache leaves its entries linked in a ring when cleared."""
    cache: LRUCache[str, int] = LRUCache(4)
    cache.set("a", 1)
    cache.set("b", 2)
    links = list(getattr(cache, "_cache", {}).values())
    cache.clear()
    return bool(links) and all(isinstance(link, list) and len(link) == 4 for link in links)
