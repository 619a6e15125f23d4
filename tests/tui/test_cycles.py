"""What Textual draws and drops is freed at once: no strip refers to itself, a cleared cache
leaves no ring of entries behind (screens/cycles.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.strip import Strip

import screens.app  # noqa: F401  (installs the fixes, as the console does)
from screens import cycles

RED = Style(color="red")


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def a_strip(n: int) -> Strip:
    return Strip([Segment(f"line {n:04d} "), Segment("decode batch", RED)], 22)


def test_the_installed_textual_needed_both() -> None:
    # Textual 8 makes both cycles; were one fixed there, its tests here would test nothing.
    assert cycles.installed() == {"strip", "lru-clear"}


def test_a_strip_divided_and_cropped_whole_is_not_cyclic_garbage(collector_off: None) -> None:
    for n in range(500):
        strip = a_strip(n)
        assert strip.divide([22]) == [strip]
        assert strip.crop_extend(0, 22, None) is strip
        strip.divide([4, 22])  # cut: new strips, cached (they do not hold the strip)
        strip.crop_extend(2, 30, RED)
    del strip
    assert gc.collect() == 0


@pytest.mark.parametrize(("start", "end"), [(0, 22), (-3, 22), (0, 10), (5, 22), (0, 30), (5, 30), (10, 5), (22, 22)])
def test_crop_extend_gives_what_textual_defines(start: int, end: int) -> None:
    strip = a_strip(7)
    expected = strip.extend_cell_length(end, RED).crop(start, end)
    got = strip.crop_extend(start, end, RED)
    assert (got.text, got.cell_length, list(got)) == (expected.text, expected.cell_length, list(expected))


@pytest.mark.parametrize("cuts", [[22], [30], [4, 22], [4, 12, 22], [22, 30], [0, 22], [4]])
def test_divide_gives_what_textual_defines(cuts: list[int]) -> None:
    strip = a_strip(3)
    kept = [cut for cut in cuts if cut <= 22]
    pieces = strip.divide(cuts)
    starts = [0, *kept][: len(kept)]
    assert [p.text for p in pieces] == [strip.text[a:b] for a, b in zip(starts, kept, strict=True)]
    assert [p.cell_length for p in pieces] == [b - a for a, b in zip(starts, kept, strict=True)]


def test_a_cleared_cache_leaves_no_cyclic_garbage_and_still_works(collector_off: None) -> None:
    cache: LRUCache[int, Strip] = LRUCache(64)
    for _ in range(20):  # as a DataTable clears its render caches at every cell update
        for n in range(100):  # more than fit: the oldest are evicted as it fills
            cache.set(n, a_strip(n))
        cache.clear()
    assert gc.collect() == 0
    assert len(cache) == 0 and cache.get(5) is None
    cache.set(5, a_strip(5))
    cache.set(6, a_strip(6))
    assert cache.get(5) is not None and len(cache) == 2
