"""The console side of log following: starts the agent next to the logs and turns its records into events.

One :class:`Follower` per cluster (per transport). It starts ``console/agent.py`` with a tiny
bootstrap (``python3 -c <bootstrap>``; the agent source and then the commands go to its stdin),
tells it which job dirs to watch from which offsets, and delivers:

- :class:`FileEvent` when a file is found, :class:`FileGoneEvent` when it disappears;
- :class:`LinesEvent` with complete lines (decoded, invalid UTF-8 replaced; not sanitized: use
  :mod:`console.sanitize` before display), 1-based line numbers and the exact byte offset after
  them; an incomplete last line is carried over (and shown in ``partial``), never delivered twice;
- :class:`CandidatesEvent` for a big backlog the agent triaged instead of sending: the lines
  holding a prefilter keyword, with their offsets and line numbers;
- :class:`ResultEvent` with a result file's head and tail bytes (never the whole file);
- :class:`ResetEvent` when a file was truncated or replaced (it is followed again from 0);
- :class:`AgentStatus` when the agent starts, is lost (transport dropped, exited, heartbeats
  stopped) and is restarted.

Use::

    follower = Follower(transport, keywords=default_matcher().keywords,
                        on_offsets=lambda d, offsets: store.set_offsets(attempt_id, offsets))
    await follower.start()
    await follower.watch(output_dir, results=results_dir, offsets=store.get_offsets(attempt_id))
    async for event in follower.events():   # or Follower(..., on_event=callback)
        ...
    older = await follower.read_range(output_dir, "logs/sweep_1.log", offset, length)
    await follower.close()

Events wait in a bounded queue: a consumer that stops reading stops the agent's output too
(flow control, not a lost heartbeat).

Offsets: every event moves a per-file position (offset and line count). Positions of events
already handed to the consumer are reported through ``on_offsets(dir, {file: offset})`` (for the
store) and can be passed back to :meth:`Follower.watch` after a console restart (the agent then
counts the lines before each offset, so line numbers stay right). When the agent is lost, it is
restarted with backoff from the positions received so far: nothing is lost and nothing is
delivered twice. Files are named relative to the watched dir (``logs/sweep_1.log``).

Fallback for login nodes without ``python3``: ``mode="tail"`` (or ``"auto"``, which switches to it
when the agent's interpreter is missing) follows each log with ``tail -c +<offset+1> -F`` (one
channel per file, at most ``max_tails`` at once) and polls the others with range reads; new files
are found with ``find``. It moves plain bytes with exact offsets, like the agent, but has no
triage of big backlogs, does not notice truncation or rotation (``tail -F`` reopens the file and
starts it over, so offsets drift), and reports result files by reading their head and tail.
"""

from console.follow.events import (
    AgentLost,
    AgentProtocolError,
    AgentState,
    AgentStatus,
    Candidate,
    CandidatesEvent,
    FileEvent,
    FileGoneEvent,
    FollowEvent,
    HeartbeatLost,
    LinesEvent,
    ResetEvent,
    ResultEvent,
    SkippedEvent,
)
from console.follow.follower import Follower
from console.follow.protocol import BOOTSTRAP, RecordReader, agent_argv, agent_source
from console.follow.streams import _StreamState, take_lines  # _StreamState: for tests of the line cutter

__all__ = [
    "BOOTSTRAP",
    "AgentLost",
    "AgentProtocolError",
    "AgentState",
    "AgentStatus",
    "Candidate",
    "CandidatesEvent",
    "FileEvent",
    "FileGoneEvent",
    "FollowEvent",
    "Follower",
    "HeartbeatLost",
    "LinesEvent",
    "RecordReader",
    "ResetEvent",
    "ResultEvent",
    "SkippedEvent",
    "_StreamState",
    "agent_argv",
    "agent_source",
    "take_lines",
]
