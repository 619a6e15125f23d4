"""One backoff for reconnects: capped exponential delays with jitter, reset after a healthy run."""

from __future__ import annotations

from console.backoff import JITTER, Backoff


def test_delays_double_up_to_the_cap_within_the_jitter() -> None:
    backoff = Backoff(0.5, 4.0, 10.0)
    for n, base in enumerate([0.5, 1.0, 2.0, 4.0, 4.0, 4.0]):
        for _ in range(50):
            assert base * (1 - JITTER) <= backoff.delay(n) <= base * (1 + JITTER)


def test_a_healthy_run_starts_the_delays_over() -> None:
    now = [100.0]
    backoff = Backoff(1.0, 30.0, 10.0, clock=lambda: now[0])
    backoff.began()
    first = [backoff.next_delay() for _ in range(3)]  # three quick failures in a row
    for delay, base in zip(first, [1.0, 2.0, 4.0], strict=True):
        assert base * (1 - JITTER) <= delay <= base * (1 + JITTER)
    assert backoff.failures == 3
    now[0] += 9.0
    assert not backoff.lived_long()
    assert backoff.next_delay() >= 8 * (1 - JITTER)  # still failing young: keeps growing
    backoff.began()
    now[0] += 10.0
    assert backoff.lived_long()
    assert backoff.next_delay() <= 1 + JITTER  # a run of 10 s was healthy: small again
    assert backoff.failures == 1
