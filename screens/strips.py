"""Textual's strips without the references to themselves that made every frame cyclic garbage.

A :class:`textual.strip.Strip` memoises what it derives in caches of its own. Two of them can
hold the strip itself: ``divide(cuts)`` when the only cut is the strip's length (the compositor
divides every line of every widget on every frame, and most lines are not cut) and
``crop_extend(0, length)``. A strip that refers to itself is not freed when its last user
drops it, only by the cyclic collector. A busy followed log made thousands of them a second:
they filled the collector's older generations and a collection of those took half a second
(a key press, a frame, a finding held back that long).

:func:`install` makes those two calls return the strip without caching it (the result is the
same strip either way), so strips are freed as soon as they are dropped. It checks first that
the installed Textual still caches the strip itself, and leaves a release that does not alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

__all__ = ["install", "installed"]

_installed = False


def installed() -> bool:
    """Whether :func:`install` replaced Strip's two methods."""
    return _installed


def install() -> bool:
    """Make ``Strip.divide`` and ``Strip.crop_extend`` keep no reference to the strip itself
    (once; a Textual that does not cache the strip is left as it is). Whether it did."""
    global _installed
    if _installed or not _caches_itself():
        return _installed
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
    _installed = True
    return True


def _caches_itself() -> bool:
    """Whether this Textual's strip holds itself after the two calls (as 8.x does)."""
    strip = Strip([Segment("probe")], 5)
    held = [*strip.divide([5]), strip.crop_extend(0, 5, None)]
    if not all(s is strip for s in held):
        return False
    caches = [getattr(strip, name, None) for name in ("_divide_cache", "_crop_extend_cache")]
    return any(cache is not None and len(cache) > 0 for cache in caches)
