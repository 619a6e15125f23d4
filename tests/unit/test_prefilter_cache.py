"""The prefilter's compiled databases are kept in the user's cache folder: a second run reads
them instead of building them, and a damaged, foreign or unwritable cache only costs a build."""

from __future__ import annotations

from pathlib import Path

import pytest

from console import prefilter
from console.prefilter import LineFilter

pytestmark = pytest.mark.skipif(prefilter.engine() != "hyperscan", reason="hyperscan is not installed")

WORDS = ("out of memory", "nccl", "error", "address already in use", "oom", "memory")
CHUNK = (
    b"[2026-12-01 10:00:01] Decode batch. #running-req: 64, gen throughput (token/s): 2345.67\n"
    b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    b"INFO: all good\n"
    b"zmq.error.ZMQError: Address already in use\n"
    b"caf\xc3\xa9 ready\n"
)


def cache_files(base: Path) -> list[Path]:
    return sorted((base / "srt-console" / "prefilter").glob("*.hsdb"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_a_second_filter_reads_the_databases_the_first_built(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = LineFilter(WORDS)
    expected = first.lines(CHUNK)
    assert len(expected) == 3  # the OOM, the bind failure, the non-ASCII line
    [saved] = cache_files(cache)

    def no_build(*_: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(prefilter, "_build_hyperscan", no_build)
    second = LineFilter(WORDS)
    assert second.engine == "hyperscan" and second.lines(CHUNK) == expected
    # Other literals are other databases.
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    assert LineFilter(("segfault",)).lines(CHUNK) == [CHUNK.index(b"caf")]
    assert saved in cache_files(cache) and len(cache_files(cache)) == 2


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "foreign"])
def test_a_damaged_cache_file_is_built_again(cache: Path, damage: str) -> None:
    expected = LineFilter(WORDS).lines(CHUNK)
    [saved] = cache_files(cache)
    data = saved.read_bytes()
    saved.write_bytes(
        {
            "truncated": data[: len(data) // 2],
            "garbage": data[:40] + b"\xff" * (len(data) - 40),
            "empty": b"",
            "foreign": b"not a prefilter cache\n" + data,
        }[damage]
    )
    assert LineFilter(WORDS).lines(CHUNK) == expected
    assert saved.read_bytes() == data  # written whole again


def test_a_cache_that_cannot_be_written_only_costs_a_build(cache: Path) -> None:
    (cache / "srt-console").write_text("a file where the folder would go")
    assert len(LineFilter(WORDS).lines(CHUNK)) == 3
    assert LineFilter(WORDS).engine == "hyperscan"


def test_the_cache_keeps_the_newest_databases_only(cache: Path) -> None:
    for i in range(prefilter._CACHE_FILES + 3):
        LineFilter((f"word{i:02d}x",))
    assert len(cache_files(cache)) == prefilter._CACHE_FILES
