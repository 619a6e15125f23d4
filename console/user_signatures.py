"""The operator's own signatures, merged with the bundled catalog.

An operator teaches the console a failure of their cluster in the config file, or in a catalog
file beside it::

    # config.yaml                               # signatures.yaml (beside config.yaml)
    signatures:                                 version: 1
      - id: site-lustre-stale                   signatures:
        title: Lustre handle went stale           - id: ...
        category: infra
        severity: fatal
        keywords: [stale file handle]
        regex: 'Stale file handle'
        hint: The shared filesystem dropped the node; drain it.
        examples: ['OSError: [Errno 116] Stale file handle']
        benign: ['NFS handle refreshed']

``signatures:`` may also name a catalog file (relative to the config file). Entries are the
bundled catalog's (see the comment at the top of ``assets/signatures.yaml``), plus ``examples``
(lines the entry must match) and ``benign`` (lines it must not). Each is validated as the bundled
ones are; a bad entry is left out with a message naming its file, line and field, the others are
used. An entry whose id the bundled catalog has replaces it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from console.config import Config
from console.recipes.yamlio import YamlError, decode, load

if TYPE_CHECKING:
    from console.signatures import Catalog

# The catalog is loaded only where signatures are used: a config without signatures of its
# own costs a command that never matches a line (`status`, `cancel`) nothing.

__all__ = ["BESIDE_NAME", "configured", "install_user_signatures", "user_catalog"]

BESIDE_NAME: Final = "signatures.yaml"
"""The catalog file read from the config file's folder when it exists."""


def configured(config: Config) -> bool:
    """Whether the operator has signatures of their own (in the config or beside it)."""
    return config.raw.get("signatures") is not None or (config.path.parent / BESIDE_NAME).is_file()


def user_catalog(config: Config, base: Catalog | None = None) -> tuple[Catalog, list[str]]:
    """The bundled catalog (or ``base``) with the operator's signatures merged in, and a
    message per problem (a bad entry is left out; the rest is used)."""
    from console.signatures import Catalog, bundled_catalog, merge_catalog, parse_entries

    catalog = base or bundled_catalog()
    problems: list[str] = []
    beside = config.path.parent / BESIDE_NAME
    if beside.is_file():
        catalog = _merge_file(catalog, beside, problems)
    raw = config.raw.get("signatures")
    marks = config.marks
    if raw is None:
        return catalog, problems
    where = str(config.path)
    if isinstance(raw, str):
        path = Path(os.path.expandvars(raw)).expanduser()
        if not path.is_absolute():
            path = config.path.parent / path
        if path.resolve() != beside.resolve():
            catalog = _merge_file(catalog, path, problems)
    elif isinstance(raw, list):
        line_of = marks.line if marks is not None else None
        signatures, found = parse_entries(
            raw, where, line_of, key=("signatures",), context=catalog.context, quiet=catalog.quiet_lines
        )
        problems += found
        catalog = merge_catalog(catalog, Catalog(signatures=tuple(signatures)), config.path)
    else:
        line = marks.line(("signatures",)) if marks is not None else None
        problems.append(f"{where}:{line or 1}: signatures: expected a list of signatures or a catalog file")
    return catalog, problems


def _merge_file(catalog: Catalog, path: Path, problems: list[str]) -> Catalog:
    """``catalog`` with a catalog file's good entries merged in (read keeping key lines)."""
    from console.signatures import merge_catalog, parse_catalog_document

    try:
        data, marks = load(decode(path.read_bytes()))
    except OSError as exc:
        problems.append(f"{path}: cannot read the signature catalog: {exc.strerror or exc}")
        return catalog
    except YamlError as exc:
        problems.append(f"{path}:{exc.line or 1}: {exc.message}")
        return catalog
    part, found = parse_catalog_document(data, str(path), marks.line, base=path.parent)
    problems += found
    return merge_catalog(catalog, part, path)


def install_user_signatures(config: Config) -> list[str]:
    """Make the catalog with the operator's signatures the default one; its problems."""
    from console.signatures import Matcher, install

    catalog, problems = user_catalog(config)
    install(Matcher(catalog))
    return problems
