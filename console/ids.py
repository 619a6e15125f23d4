"""Short ids operators type: `s3` a sweep, `a7` an arm, `a7.2` attempt 2 of arm 7, `job:39443` a Slurm job."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_ID = re.compile(r"^(?:(?P<sweep>s\d+)|(?P<arm>a\d+)(?:\.(?P<number>\d+))?|job:(?P<job>\d+(?:_\d+)?))$")


def sweep_ref(sweep_id: int) -> str:
    return f"s{sweep_id}"


def arm_ref(arm_id: int) -> str:
    return f"a{arm_id}"


def attempt_ref(arm_id: int, number: int) -> str:
    return f"a{arm_id}.{number}"


@dataclass(frozen=True)
class Ref:
    kind: Literal["sweep", "arm", "attempt", "job"]
    id: int | str
    number: int | None = None


def parse_ref(text: str) -> Ref:
    """Raises ValueError with the accepted forms."""
    m = _ID.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not an id: use s<N> (sweep), a<N> (arm), a<N>.<K> (attempt) or job:<id>")
    if m.group("sweep"):
        return Ref("sweep", int(m.group("sweep")[1:]))
    if m.group("job"):
        return Ref("job", m.group("job"))
    arm = int(m.group("arm")[1:])
    if m.group("number"):
        return Ref("attempt", arm, int(m.group("number")))
    return Ref("arm", arm)
