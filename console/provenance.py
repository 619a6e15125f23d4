"""What an attempt actually ran, recorded when it is submitted and kept with it.

For the srtctl launcher: the cluster's srt-slurm checkout (resolved path, commit, local changes),
srtctl's version and flavour, as read from the checkout right before the submission. For the
demo launcher: the console's own version and the demo engine's build (the file named by its
content), and ``simulated`` set, so that no report passes its numbers off as hardware's. For
both: the container image, every commit and version pinned in the recipe (fields, env and
comments), the srt-slurm commits stated by the recipe and the profile, the scheduling values
with their sources, and the resolved recipe exactly as handed to the launcher, with its digest.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from console import __version__
from console.launchers import Setting, SrtctlLauncher, srtctl_recipe
from console.model import Arm
from console.pin_checks import stated_commits
from console.recipes.yamlio import dump
from console.transport.base import TransportError

__all__ = ["Provenance", "collect_provenance"]


@dataclass(frozen=True)
class Provenance:
    """One attempt's record of what ran. ``to_json()`` is what the store keeps."""

    launcher: str
    cluster: str
    console_version: str
    simulated: bool
    recorded_at: float
    image: str | None = None
    pins: list[dict[str, str]] = field(default_factory=list)  # name, value, source
    stated_commits: list[dict[str, str]] = field(default_factory=list)  # source, commit
    scheduling: list[dict[str, str | None]] = field(default_factory=list)  # key, value, source
    checkout: dict[str, Any] | None = None  # srtctl: path, commit, dirty, version, flavour
    srtctl: str | None = None  # the command that ran srtctl
    engine: str | None = None  # demo: the engine build that ran
    recipe_sha256: str = ""
    resolved_recipe: str = ""
    notes: list[str] = field(default_factory=list)  # what could not be read, and why

    def to_json(self, *, with_recipe: bool = True) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "launcher": self.launcher,
            "cluster": self.cluster,
            "console_version": self.console_version,
            "simulated": self.simulated,
            "recorded_at": self.recorded_at,
            "image": self.image,
            "pins": self.pins,
            "stated_commits": self.stated_commits,
            "scheduling": self.scheduling,
            "checkout": self.checkout,
            "srtctl": self.srtctl,
            "engine": self.engine,
            "recipe_sha256": self.recipe_sha256,
            "notes": self.notes,
        }
        if with_recipe:
            doc["resolved_recipe"] = self.resolved_recipe
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Provenance:
        """The stored record back (unknown keys ignored, missing ones defaulted)."""

        def listed(key: str) -> list[Any]:
            value = doc.get(key)
            return value if isinstance(value, list) else []

        checkout = doc.get("checkout")
        return cls(
            launcher=str(doc.get("launcher") or ""),
            cluster=str(doc.get("cluster") or ""),
            console_version=str(doc.get("console_version") or ""),
            simulated=bool(doc.get("simulated")),
            recorded_at=float(doc.get("recorded_at") or 0.0),
            image=doc.get("image") if isinstance(doc.get("image"), str) else None,
            pins=listed("pins"),
            stated_commits=listed("stated_commits"),
            scheduling=listed("scheduling"),
            checkout=checkout if isinstance(checkout, dict) else None,
            srtctl=doc.get("srtctl") if isinstance(doc.get("srtctl"), str) else None,
            engine=doc.get("engine") if isinstance(doc.get("engine"), str) else None,
            recipe_sha256=str(doc.get("recipe_sha256") or ""),
            resolved_recipe=str(doc.get("resolved_recipe") or ""),
            notes=[str(n) for n in listed("notes")],
        )

    @property
    def commit(self) -> str | None:
        value = (self.checkout or {}).get("commit")
        return value if isinstance(value, str) else None

    def summary(self) -> str:
        """One line: `srt-slurm 1a2b3c4d5e6f (local changes) · srtctl 0.9.0 upstream · image ...`."""
        parts: list[str] = []
        if self.simulated:
            parts.append(f"simulated (demo engine {self.engine or '?'}, srt-console {self.console_version})")
        if self.checkout is not None:
            commit = self.commit
            dirty = " (local changes)" if self.checkout.get("dirty") else ""
            parts.append(f"srt-slurm {commit[:12] if commit else 'no commit'}{dirty}")
            version = self.checkout.get("version") or "?"
            parts.append(f"srtctl {version} {self.checkout.get('flavour') or ''}".rstrip())
        if self.image:
            parts.append(f"image {self.image}")
        parts.append(f"recipe sha256 {self.recipe_sha256[:12]}")
        return " · ".join(parts)


async def collect_provenance(runtime: Any, arm: Arm, settings: list[Setting] | None = None) -> Provenance:
    """What submitting ``arm`` through ``runtime`` (a :class:`~console.engine.ClusterRuntime`)
    will run. Never raises for the cluster's sake: what cannot be read becomes a note."""
    launcher = runtime.launcher
    profile = runtime.profile
    notes: list[str] = []
    checkout: dict[str, Any] | None = None
    srtctl: str | None = None
    engine: str | None = None
    if isinstance(launcher, SrtctlLauncher):
        recipe_text = dump(srtctl_recipe(arm.config, profile))
        srtctl = " ".join(launcher.srtctl)
        try:
            site = await launcher.site(refresh=True)
        except (TransportError, OSError) as exc:
            notes.append(f"the srt-slurm checkout could not be read: {exc}")
        else:
            checkout = {
                "path": site.path or site.checkout,
                "exists": site.exists,
                "commit": site.commit,
                "dirty": site.dirty,
                "version": site.version,
                "flavour": site.flavour,
            }
    else:
        recipe_text = dump(arm.config)
        if launcher.name == "demo":
            from console.demo.bundle import engine_name

            engine = engine_name()
    if settings is None:
        try:
            settings = await launcher.scheduling(arm)
        except (TransportError, OSError) as exc:
            notes.append(f"the scheduling values could not be read: {exc}")
            settings = []
    return Provenance(
        launcher=launcher.name,
        cluster=profile.name,
        console_version=__version__,
        simulated=launcher.name == "demo",
        recorded_at=time.time(),
        image=arm.container,
        pins=[{"name": p.name, "value": p.value, "source": p.source} for p in arm.pins],
        stated_commits=[{"source": s.source, "commit": s.commit} for s in stated_commits(arm, profile)],
        scheduling=[s.as_dict() for s in settings],
        checkout=checkout,
        srtctl=srtctl,
        engine=engine,
        recipe_sha256=hashlib.sha256(recipe_text.encode()).hexdigest(),
        resolved_recipe=recipe_text,
        notes=notes,
    )
