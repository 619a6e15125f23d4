"""Notices for the operator: an attempt doomed or failed, an arm completed, a sweep ended.

The notifier watches the core's events and turns the ones worth interrupting for into
:class:`~console.events.Notice` objects, each at most once. The UI shows them as a toast and
rings the terminal bell on whatever screen is showing; the config's optional ``notify:``
command gets each one as a JSON document on its standard input (a chat webhook, `notify-send`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
from collections.abc import Callable, Sequence
from typing import Any

from console.events import AttemptChanged, CoreEvent, Notice, Triaged
from console.ids import arm_ref, attempt_ref, sweep_ref
from console.store import Store

log = logging.getLogger(__name__)

NOTIFY_TIMEOUT_S = 20.0


def notify_command(raw: Any, where: str = "config") -> tuple[list[str] | None, str | None]:
    """The ``notify:`` value as an argv (a string is split as a shell would, never run by one);
    (None, problem) when it is not a command."""
    if raw is None:
        return None, None
    if isinstance(raw, str) and raw.strip():
        try:
            return shlex.split(raw), None
        except ValueError as exc:
            return None, f"{where}: notify: cannot split {raw!r}: {exc}"
    if isinstance(raw, list) and raw and all(isinstance(a, str) for a in raw):
        return list(raw), None
    return None, f"{where}: notify: expected a command (a string or a list of arguments)"


class Notifier:
    """Core events in, notices out (each at most once), and the notify command run for each."""

    def __init__(self, store: Store, command: Sequence[str] | None = None) -> None:
        self.store = store
        self.command = list(command) if command else None
        self._listeners: list[Callable[[Notice], None]] = []
        self._seen: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[bool]] = set()
        self.failures: list[str] = []  # why the notify command failed, newest last

    def subscribe(self, listener: Callable[[Notice], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def feed(self, event: CoreEvent) -> list[Notice]:
        """The notices an event makes (announced to listeners, and to the command)."""
        notices = self._notices(event)
        for notice in notices:
            self._announce(notice)
            if self.command:
                self._run_command(notice)
        return notices

    def _announce(self, notice: Notice) -> None:
        for listener in list(self._listeners):
            try:
                listener(notice)
            except Exception:  # a broken listener must not stop the others
                log.exception("notice listener failed")

    def _failed(self, why: str) -> bool:
        self.failures.append(why)
        self._announce(Notice("notify_failed", "warning", why, None, None, None, None))
        return False

    def _once(self, kind: str, key: str) -> bool:
        if (kind, key) in self._seen:
            return False
        self._seen.add((kind, key))
        return True

    def _notices(self, event: CoreEvent) -> list[Notice]:
        if isinstance(event, Triaged) and event.diagnosis.verdict == "doomed":
            try:
                attempt = self.store.attempt(event.attempt_id)
            except KeyError:
                return []
            ref = attempt_ref(attempt.arm_id, attempt.number)
            if not attempt.live or not self._once("attempt_doomed", ref):
                return []
            root = event.diagnosis.root_cause
            cause = f": {root.first.finding.title} [{root.id}]" if root is not None else ""
            return [self._notice("attempt_doomed", "error", f"{ref} is doomed{cause}", attempt.arm_id, ref,
                                 attempt.state, event.diagnosis.advice)]  # fmt: skip
        if not isinstance(event, AttemptChanged) or event.attempt.live:
            return []
        attempt = event.attempt
        ref = attempt_ref(attempt.arm_id, attempt.number)
        notices: list[Notice] = []
        if attempt.state == "COMPLETED":
            if self._once("arm_completed", ref):
                notices.append(self._notice("arm_completed", "information", f"{arm_ref(attempt.arm_id)} completed "
                                            f"({ref})", attempt.arm_id, ref, attempt.state))  # fmt: skip
        elif not attempt.cancelled_by_operator and self._once("attempt_failed", ref):
            why = attempt.reason or attempt.error or ""
            text = f"{ref} {attempt.state}" + (f": {why}" if why else "")
            notices.append(self._notice("attempt_failed", "error", text, attempt.arm_id, ref, attempt.state))
        notices += self._sweep_ended(attempt.arm_id)
        return notices

    def _sweep_ended(self, arm_id: int) -> list[Notice]:
        arm = self.store.arm(arm_id)
        if arm is None:
            return []
        lasts = []
        for sweep_arm in self.store.arms(arm.sweep_id):
            attempts = self.store.attempts(sweep_arm.id)
            if attempts and attempts[-1].live:
                return []
            if attempts:
                lasts.append(attempts[-1])
        # Keyed by the last attempts: a rerun that ends again ends the sweep again.
        key = f"{arm.sweep_id}:" + ",".join(str(a.id) for a in lasts)
        if not lasts or not self._once("sweep_ended", key):
            return []
        done = sum(1 for a in lasts if a.state == "COMPLETED")
        severity = "information" if done == len(lasts) else "warning"
        text = f"{sweep_ref(arm.sweep_id)} ended: {done}/{len(lasts)} arm(s) completed"
        return [Notice("sweep_ended", severity, text, sweep_ref(arm.sweep_id), None, None, None)]

    def _notice(
        self, kind: str, severity: str, text: str, arm_id: int, ref: str, state: str, detail: str = ""
    ) -> Notice:
        arm = self.store.arm(arm_id)
        sweep = sweep_ref(arm.sweep_id) if arm is not None else None
        return Notice(kind, severity, text, sweep, arm_ref(arm_id), ref, state, arm.name if arm else None, detail)

    # --- the notify command ------------------------------------------------------------------

    def _run_command(self, notice: Notice) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous caller): nothing to run it on
        task = loop.create_task(self.deliver(notice))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def deliver(self, notice: Notice) -> bool:
        """Run the notify command with the notice as JSON on stdin; False (reason kept) on failure."""
        assert self.command is not None
        payload = json.dumps(notice.to_json()).encode() + b"\n"
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            return self._failed(f"notify command {self.command[0]!r} cannot run: {exc.strerror or exc}")
        try:
            _, err = await asyncio.wait_for(proc.communicate(payload), NOTIFY_TIMEOUT_S)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return self._failed(f"notify command timed out after {NOTIFY_TIMEOUT_S:.0f}s")
        if proc.returncode != 0:
            text = err.decode("utf-8", "replace").strip()[-300:]
            return self._failed(f"notify command exited {proc.returncode}" + (f": {text}" if text else ""))
        return True

    async def close(self) -> None:
        """Let notify commands under way finish (each has its own timeout)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
