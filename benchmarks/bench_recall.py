"""Recall of the failure-signature catalog on labelled real log lines.

Reads a YAML file of ``variants`` (``{id, line, source}``: a real failure line and the
signature it must be found under) and ``benign`` (``{line, source}``: real lines that must
match nothing), and prints recall by signature id and the false findings, with the figures
of the regexes and family words alone beside them (without the resemblance to the corpus'
lines, console/resemblance.py). The project's own set is the catalog's corpus,
assets/real-lines.yaml (every line of it is found by a regex: the resemblance learns from it);
a set kept apart from the project measures how the catalog generalises. ``--catalog`` reads
other catalog files (an older catalog with its own corpus, to measure a set before learning
from it). ``--cross-validate`` measures the resemblance alone on the corpus, five folds by
source (each fold's lines are classified by a model that never saw their sources). Figures,
not a test.

    .venv/bin/python benchmarks/bench_recall.py [FILE ...] [--catalog CATALOG ...] [--json out.json] [--misses]
    .venv/bin/python benchmarks/bench_recall.py --cross-validate
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.resemblance import BENIGN, Resemblance
from console.signatures import Catalog, Matcher, load_catalog

DEFAULT = Path(__file__).resolve().parents[1] / "assets" / "real-lines.yaml"


def measure(matcher: Matcher, data: dict[str, list[dict[str, str]]]) -> dict[str, object]:
    total: Counter[str] = Counter()
    found: Counter[str] = Counter()
    misses: list[dict[str, str | None]] = []
    for entry in data.get("variants", []):
        total[entry["id"]] += 1
        finding = matcher.match_line(entry["line"])
        if finding is not None and finding.signature_id == entry["id"]:
            found[entry["id"]] += 1
        else:
            misses.append({"id": entry["id"], "got": finding.signature_id if finding else None, "line": entry["line"]})
    # A stop asked of a process reports no failure: no false finding (as in test_real_variants).
    said = [(entry["line"], [f for f in matcher.match_all(entry["line"]) if not f.stop])
            for entry in data.get("benign", [])]  # fmt: skip
    false = [{"line": line, "got": [f.signature_id for f in found]} for line, found in said if found]
    return {
        "variants": sum(total.values()),
        "found": sum(found.values()),
        "recall": round(sum(found.values()) / max(1, sum(total.values())), 4),
        "by_signature": {sig: [found[sig], total[sig]] for sig in sorted(total)},
        "benign": len(data.get("benign", [])),
        "false_findings": false,
        "misses": misses,
    }


def cross_validate(catalog: Catalog, folds: int = 5) -> None:
    """The resemblance alone on the catalog's corpus, ``folds`` folds by source."""
    named = {sig.id for sig in catalog.signatures if not sig.generic}
    items: list[tuple[str, str, str]] = []
    for path in catalog.corpus:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        items += [(v["line"], v["id"], v["source"]) for v in data.get("variants", []) if v["id"] in named]
        items += [(b["line"], BENIGN, b["source"]) for b in data.get("benign", [])]
    sources = sorted({source for *_, source in items})
    random.Random(7).shuffle(sources)
    fold = {source: i % folds for i, source in enumerate(sources)}
    right = wrong = failures = fired = benign = 0
    for k in range(folds):
        model = Resemblance((line, label) for line, label, source in items if fold[source] != k)
        for line, label, source in items:
            if fold[source] != k:
                continue
            warning = any(p.search(line) for p in catalog.warning_lines)
            guess = None if warning else model.classify(line)
            if label == BENIGN:
                benign += 1
                fired += guess is not None
            else:
                failures += 1
                right += guess is not None and guess.signature_id == label
                wrong += guess is not None and guess.signature_id != label
    print(f"resemblance alone, {folds} folds by source ({len(sources)} sources)")
    print(f"  failure lines named right   {right}/{failures} ({right / max(1, failures):.1%})")
    print(f"  named under another id      {wrong}/{failures} ({wrong / max(1, failures):.1%})")
    print(f"  benign lines named          {fired}/{benign} ({fired / max(1, benign):.1%})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=[DEFAULT])
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    parser.add_argument("--misses", action="store_true", help="print every missed line")
    parser.add_argument("--catalog", type=Path, action="append", help="a catalog file (default: the bundled one)")
    parser.add_argument("--cross-validate", action="store_true", help="the resemblance alone on the corpus")
    args = parser.parse_args(argv)
    catalog = load_catalog(*(args.catalog or ()))
    if args.cross_validate:
        cross_validate(catalog)
        return 0
    matcher = Matcher(catalog)
    alone = Matcher(catalog, resemblance=False)
    report = {}
    for path in args.files:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        figures = measure(matcher, data)
        peer = measure(alone, data)
        figures["without_resemblance"] = {k: peer[k] for k in ("found", "recall", "false_findings")}
        report[str(path)] = figures
        print(f"{path}")
        print(
            f"  recall           {figures['found']}/{figures['variants']} ({figures['recall']:.1%})"
            f"   regexes and family words alone: {peer['found']}/{peer['variants']} ({peer['recall']:.1%})"
        )
        print(
            f"  false findings   {len(figures['false_findings'])}/{figures['benign']} benign lines"  # type: ignore[arg-type]
            f"   alone: {len(peer['false_findings'])}"  # type: ignore[arg-type]
        )
        for sig, (ok, n) in figures["by_signature"].items():  # type: ignore[attr-defined]
            if ok < n or args.misses:
                print(f"    {sig:34} {ok}/{n}")
        if args.misses:
            for miss in figures["misses"]:  # type: ignore[attr-defined]
                print(f"  MISS {miss['id']} (got {miss['got']}): {miss['line'][:160]}")
            for false in figures["false_findings"]:  # type: ignore[attr-defined]
                print(f"  FALSE {false['got']}: {false['line'][:160]}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
