"""Reconnect delays: capped exponential backoff with jitter, shared by the SSH transport and the log follower."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

JITTER = 0.2  # each delay is scaled by a random factor in [1 - JITTER, 1 + JITTER]


class Backoff:
    """``initial * 2**n`` seconds, at most ``maximum``, jittered so that many clients do not retry in step.

    A run (a connection, an agent process) that lasted ``stable_after`` seconds was healthy: the
    failures counted before it no longer say anything, and the delays start small again.
    """

    def __init__(
        self,
        initial: float,
        maximum: float,
        stable_after: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.stable_after = stable_after
        self.failures = 0
        self._clock = clock
        self._since = clock()

    def delay(self, n: int) -> float:
        """The delay before retry number ``n`` (0 is the first)."""
        return float(min(self.maximum, self.initial * 2**n) * random.uniform(1 - JITTER, 1 + JITTER))

    def began(self) -> None:
        """A run began (connected, started)."""
        self._since = self._clock()

    def lived_long(self) -> bool:
        """Whether the run that began last has lasted ``stable_after`` seconds."""
        return self._clock() - self._since >= self.stable_after

    def next_delay(self) -> float:
        """After a run ended: start over when it was healthy, then the delay before the next one."""
        if self.lived_long():
            self.failures = 0
        delay = self.delay(self.failures)
        self.failures += 1
        return delay
