"""The demo engine as one file: a zipapp of the ``console.demo.engine`` package.

The engine is a package of small modules, but it reaches a cluster as a single file that the
login node's own ``python3`` (3.6 or newer) runs directly: ``python3 srt-demo-engine-<id>.pyz
orchestrator ...``. The archive is built in memory, deterministically (sorted entries, fixed
times), so its content names it and versions never mix.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent / "engine"
PACKAGE = "engine"  # the package's name inside the archive
_MAIN = f"import sys\n\nfrom {PACKAGE}.cli import main\n\nsys.exit(main())\n"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def engine_sources() -> dict[str, bytes]:
    """The engine's modules by name (``plan.py`` ...)."""
    return {path.name: path.read_bytes() for path in sorted(PACKAGE_DIR.glob("*.py"))}


@cache
def engine_zipapp() -> bytes:
    """The zipapp's bytes: ``__main__.py`` at the top, the package beside it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        entries = {"__main__.py": _MAIN.encode()}
        entries.update({f"{PACKAGE}/{name}": data for name, data in engine_sources().items()})
        for name, data in sorted(entries.items()):
            info = zipfile.ZipInfo(name, _EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def engine_digest() -> str:
    return hashlib.sha256(engine_zipapp()).hexdigest()[:12]


def engine_name() -> str:
    """The file name the engine is uploaded as: its content names it."""
    return f"srt-demo-engine-{engine_digest()}.pyz"


def _cache_dir() -> Path:
    # platformdirs is the console's dependency; a cluster's own python3 (the srtctl stand-in
    # runs this module there) may not have it, and then the XDG default is the same place.
    try:
        import platformdirs
    except ImportError:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "srt-console"
    return Path(platformdirs.user_cache_dir("srt-console"))


def engine_script() -> Path:
    """The zipapp written to this machine's cache (once per version), to run it in place."""
    directory = _cache_dir() / "demo-engine"
    path = directory / engine_name()
    if not path.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(engine_zipapp())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    return path
