"""Naming a failure line that no regex knows by the known lines it reads like.

The catalog's regexes are written for families of messages, yet a release, an engine or a
wrapper words the same failure anew every week. This is the last specific resort before a line
is called unrecognised: a multinomial naive Bayes over the line's words, trained on the
catalog's corpus of real lines (``assets/real-lines.yaml``: each failure line under its
signature, each benign line, alarming words in a healthy run, under a class of its own) and on
the ``examples`` and ``benign`` lines of the catalog's entries, so an operator's catalog
teaches it too.

It is conservative on purpose: only a line that says a failure in words (:data:`FAILURE_WORDS`
as words of its message, not of its level, a path, a function's name or a builtin exception's
name like `ValueError`; an error code's `Error`/`FAILED` counts), that is no line of a stack
dump, no retry, no wrapper of an error printed elsewhere and no warning (the catalog's
``warning_lines``, checked by the matcher) is looked at,
the benign class starts ahead (:data:`BENIGN_HEAD_START`), a signature is named only by a
clear margin over the runner-up (:data:`MARGIN`) and with a word of what the line is about on
its side (not only the words that say it failed; in two of its known lines at least, short of a
clear win: :data:`SURE`), and only when the single known line nearest
to it (idf-weighted cosine of their words) is not a benign one (pooled words can outvote one
benign line that says the very same).
The figures were chosen on held-out real lines (benchmarks/bench_recall.py prints what the
resemblance adds).
"""

from __future__ import annotations

import functools
import math
import re
from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "BENIGN",
    "FAILURE_KEYWORDS",
    "FAILURE_PHRASES",
    "FAILURE_WORDS",
    "Guess",
    "Resemblance",
    "says_code_bug",
    "says_retry",
    "without_paths",
    "words",
]

BENIGN: Final = ""
"""The class of benign lines (no signature)."""

FAILURE_WORDS: Final = frozenset((
    "error", "errors", "fail", "failed", "failing", "failure", "failures", "fatal", "abort", "aborted",
    "aborting", "kill", "killed", "timeout", "timed", "refused", "exception", "unable", "cannot", "could",
    "couldn", "crash", "crashed", "died", "dead", "unhealthy", "invalid", "terminated", "denied", "oom",
    "panic", "panicked", "sigkill", "sigsegv", "sigabrt", "signal", "unavailable", "exit", "exited",
    "insufficient", "exceeded", "lost", "unreachable", "violation", "corrupt", "corrupted", "mismatch",
    "unsupported", "enough", "illegal", "hung", "stuck", "fault", "faults", "missing", "unrecognized",
    "unrecognised", "terminate", "fallen", "exhausted", "rejected", "disconnected", "malformed",
    "truncated", "incompatible", "mismatched", "corruption", "cancelled", "canceled", "revoked",
    "overflow",
))  # fmt: skip
"""A line is looked at only when it says one of these, or one of :data:`FAILURE_PHRASES` (see
:meth:`Resemblance.classify`). They are prefilter keywords too, whose tails are searched for:
a word whose tail healthy lines hold (`broken`: `token`; `unexpected`: `connected`) is left out."""

# Phrases that say a failure without a failure word: `... not found`, the phrases themselves,
# `No decode workers available` (each phrase chosen by cross-validation on the corpus). One list
# each, for the gate and for the prefilter's keywords.
_NOT_WHAT: Final = ("found", "ready", "available", "accessible", "responding", "healthy", "recognized")
_PHRASES: Final = (
    "no space left", "does not appear to have", "does not exist", "out of memory", "already in use",
    # (a capability refused, a lease or credential run out, a peer gone, a check's status, a
    # resource none of: `type fp8e4nv not supported in this architecture`, `Keep-alive lease
    # expired`, `Connection closed by remote peer`, `non-zero status: 7`, `no available backends`)
    "not supported", "does not support", "not compiled", "expired", "closed by peer", "closed by remote peer",
    "non-zero status", "no available",
)  # fmt: skip
_NONE_OF: Final = ("worker", "server", "endpoint")

FAILURE_PHRASES: Final = re.compile(
    rf"(?i)\bnot (?:{'|'.join(_NOT_WHAT)})\b"
    + "".join(rf"|\b{re.escape(phrase)}\b" for phrase in _PHRASES)
    + rf"|\bno (?:\w+ )?(?:{'|'.join(_NONE_OF)})s? available\b"
)
"""Failures said without a failure word (`config.json not found`, `does not appear to have a
file named ...`, `No decode workers available`)."""

FAILURE_KEYWORDS: Final = (
    (FAILURE_WORDS - {"fault", "faults"})
    | {" fault"}  # (not `fault`: every line holding `default` would pass the prefilter)
    | {f"not {what}" for what in _NOT_WHAT}
    | set(_PHRASES)
    | {f"{kind}{plural} available" for kind in _NONE_OF for plural in ("", "s")}
)
"""Lowercase literals one of which every line the gate lets through holds (the matcher's
prefilter passes them), but for a `fault` that follows no space (`(fault`, a line's first word)."""

MARGIN: Final = 2.0
"""Log-odds by which the best signature must beat the runner-up (a signature or benign)."""

SURE: Final = 3.0
"""Below this margin, two known lines of the winner at least must share a word of what the line is
about with it: one alone (a safetensors header's `invalid UTF-8`) is an anecdote, not a family."""

BENIGN_HEAD_START: Final = 6.0
"""Log-odds added to the benign class: a healthy run's alarming line stays quiet unless its
words clearly belong to a failure."""

_SMOOTHING: Final = 0.1
_DIGITS = re.compile(r"\d+")
_MAX_CHARS: Final = 2000
_CODE_WORDS: Final = frozenset(("error", "errors", "err", "fail", "failed", "failure", "fatal", "abort", "aborted"))
# How a failure is said, whatever failed: no evidence of which failure it is (with the words of
# the builtin exceptions engines raise most, and of a `return code` or `status`: any process has
# one; `key` or `index` may well say what a line is about).
_SAYING: Final = FAILURE_WORDS | _CODE_WORDS | frozenset((
    "valueerror", "value", "runtimeerror", "runtime", "typeerror", "type", "assertionerror", "assertion",
    "return", "code", "status",
    # (`timed out`; and the words of Python's own messages on any object: `'NoneType' object has no
    # attribute ...`, `got an unexpected keyword argument`)
    "out", "nonetype", "object", "attribute", "argument", "operand",
    # (the types such messages name: `unsupported operand type(s) for *: 'NoneType' and 'int'`)
    "int", "str", "float", "bool", "list", "dict", "tuple",
    # (the builtin exceptions that say what was raised, not what failed; `TimeoutError: timed out`
    # of a request is no rendezvous)
    "keyerror", "attributeerror", "indexerror", "nameerror", "lookuperror", "recursionerror",
    "notimplementederror", "unicodedecodeerror", "unicodeencodeerror", "timeouterror",
))  # fmt: skip
_PLAIN = re.compile(r"(?<![\w])[A-Za-z]+(?![\w])")  # a word, not a part of a name (`rpc_kill_job`)
_PATH = re.compile(r"[^\s'\"(),;=]*/[^\s'\"(),;]*")


def without_paths(text: str) -> str:
    """The text with its paths (`/opt/rocm-6.2/...`, `.../tcp/pair.cc:534`) blanked: their
    folders and files are no words of a message."""
    return _PATH.sub(" ", text)


# A builtin exception's name says that something was raised, not what failed: `ValueError:
# percentile of an empty sequence` is no failure of any signature, and its `Error` alone let
# every config check an engine raises be named after the class holding most `ValueError`s. So
# does Ray's wrapper of a remote task's exception (`RayTaskError(RuntimeError): ray::TaskRunner.run()
# (pid=..., actor_id=...)`): its traceback and the exception it carries follow.
_GENERIC_EXCEPTION = re.compile(
    r"\b(?:Value|Runtime|Type|Key|Attribute|Index|Assertion|NotImplemented|Lookup|Name|Recursion"
    r"|ZeroDivision|Arithmetic|Unicode(?:Decode|Encode)?|Ray(?:Task|Actor))Error\b|\bException\b"
)
_LEVEL = re.compile(r"(?<![\w./-])(?:ERROR|FATAL|CRITICAL|ERR)(?![\w/-])|\[(?:error|fatal|crit)\]|level=\w+")
# Lines of a stack dump are context, not a report, whatever their words (`checkTimeout`): a
# native frame (PyTorch's `frame #3: ...`, gdb's and glibc's `#3 0x...`), the header of
# PyTorch's C++ stack, a Python traceback's header, frames and links of its cause chain.
_STACK: Final = re.compile(
    r"(?:^|[\s)\]:])frame #\d{1,4}: "
    r"|(?:^|\s)#\s?\d{1,4} {1,4}0x[0-9a-fA-F]{4,}"
    r"|Exception raised from \S{1,200} at \S{1,300} \(most recent call first\)"
    r"|Traceback \(most recent call last\)"
    r'|(?:^|\s)File "[^"\n]{1,400}", line \d{1,7}, in '
    # IPython's and Jupyter's frames: `File ~/.../sync.py:207, in SyncBackend.connect_tcp(...)` and the
    # numbered source lines under it (`    203     socket.timeout: ConnectTimeout,`, `--> 124 ...`)
    r"|(?:^|\s)File \S{1,400}:\d{1,7}, in \w"
    r"|^(?:-{1,4}> ?|\s{4,10})\d{1,6} {1,12}\S"
    # absl's and glog's symbolised frames (`@     0x4004ebf56848        464  absl::...FailureSignalHandler()`)
    r"|(?:^|[\s:])@\s{1,8}0x[0-9a-fA-F]{4,}\s"
    r"|The above exception was the direct cause of the following exception"
    r"|During handling of the above exception, another exception occurred"
)
# A comment of source code that a log prints (inductor's generated Triton kernels at E level:
# `[22/4]     # Cast ... to int64 to avoid int32 overflow`) tells of no failure whatever its words.
_COMMENT: Final = re.compile(r"(?:^|[\]|])\s{0,12}# (?=[A-Za-z])")
# Python telling of a bug in code (`'_CudaDeviceProperties' object has no attribute 'total_mem'`,
# `maximum recursion depth exceeded while calling a Python object`):
# its words name the code's objects, not what failed, so they resemble nothing. (A signature that
# owns such a message says so in a pattern: `Capture cuda graph failed: TypeError: ...`.)
_CODE_BUG: Final = re.compile(
    r"\bobject has no attribute\b|\bobject is not (?:callable|subscriptable|iterable)\b"
    r"|\bgot an unexpected keyword argument\b|\btakes \d{1,3} positional arguments? but\b"
    r"|\bmaximum recursion depth exceeded\b"
    r"|\bmissing \d{1,3} required (?:positional|keyword-only) arguments?\b|\bunsupported operand type"
)
# A line that says it retries (or makes the thing anew: `... Recreating container...`) is on the
# way to a failure, not one: the give-up line that may follow is the failure (`ERROR failed to
# connect, willRetry=1, retry=1, retryLimit=3`).
_RETRY = re.compile(r"(?i)\bretrying\b|\bre-?creating\b|\bwill (?:be )?retr(?:y|ied)\b|\bwillRetry=(?:1|true)\b")
# A wrapper of an error printed elsewhere says no failure of its own: torch_npu's `RuntimeError: The
# Inner error is reported as above. The process exits for this inner error, and the current working
# operator name is SelfAttentionOperation.` (its words are those of whatever operator ran, and read
# like the failure some known wrapper of it carried), and an exception group, whose sub-exceptions
# follow (`ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)`), and Ray's report of a
# remote task's exception, whose traceback and the exception it carries follow
# (`RayTaskError(AcceleratorError): ray::MegatronTrainRayActor.train() (pid=76563, ...)`), and pydantic's
# header over the errors it lists on the lines below (`ValidationError: 1 validation error for ModelConfig`: the
# next line says whether a setting was refused or a model not found).
_CARRIER = re.compile(
    r"(?i)\berrors? (?:is |are |was )?reported (?:as |in the logs? )?above\b"
    r"|\bExceptionGroup: [^\n]{0,200}?\(\d{1,4} sub-exceptions?\)"
    r"|\bRay(?:Task|Actor)Error\(\w{1,80}\): ray::"
    r"|\bValidationError: \d{1,4} validation errors? for \w"
)
# ... and one that says it looks for failures (a harness: `Checking for RuntimeError and critical
# errors in server logs`) reports none.
_LOOKING = re.compile(
    r"(?i)\b(?:checking|looking|scanning|searching|grepping) for\b"  # (not a `health check for X failed`)
)


# A process that ended with code 0 succeeded (`Benchmark finished with exit code 0`): that `exit`
# says no failure (taken out before numbers are masked, when a 1 would read as a 0).
_SUCCESS_EXIT = re.compile(
    r"(?i)\b(?:exit(?:ed)?|return(?:ed)?|finished) (?:with )?(?:exit )?(?:code|status)[ :=]{0,3}0(?![\d.])"
    r"|\bexit_?code[:=] ?0(?![\d.])"
)


# A timeout given as a setting (`Waiting for server to be ready (timeout: 600s)`, `timeout=30`)
# says how long something may take, not that it took too long.
_SETTING = re.compile(r"(?i)\btime-?out\s?[:=]\s?\d")


def says_retry(text: str) -> bool:
    """Whether the line says it will try again (the matcher names no family in it either)."""
    return _RETRY.search(text) is not None


def says_code_bug(text: str) -> bool:
    """Whether the line is Python's report of a bug in code (the matcher names no family by the
    words of its objects either: `'_CudaDeviceProperties' object has no attribute ...`)."""
    return _CODE_BUG.search(text) is not None


_WORD = re.compile(r"[A-Za-z][A-Za-z_]+")
# Who wrote a line and from where, as vLLM prefixes every one (`(EngineCore pid=3931) ERROR ...
# [core.py:1233]`): it says which process speaks, not what happened, and would make any line of
# the engine's process read like the engine's failure to start.
# (and Ascend's CANN, `[ERROR] 2025-08-14-13:42:44 (PID:5309, Device:-1, RankID:-1) ERR99999 ...`)
_WRITER = re.compile(
    r"\((?:\w{1,60} )?pid=\d{1,10}\)|\[[\w.\-]{1,80}\.py:\d{1,6}\]|\(PID:\d{1,10}, Device:-?\d{1,4}, RankID:-?\d{1,6}\)"
)
# An id, a hash or an address in hex (`actor_id=844eebf05e31...`, `0x7ef91ede3e80`): its letters
# are no words (`eebf`, `ede`), though they would read as some known line's.
_HEX = re.compile(r"(?<![\w.-])(?:0[xX])?(?=[0-9a-fA-F]{0,64}\d)[0-9a-fA-F]{6,}(?![\w-])")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
# Words that say nothing of a failure: English glue, and a log format's own words (logfmt's
# `time=... level=error msg=...` would make any such line read like etcd's).
_STOP: Final = frozenset((
    "the", "an", "of", "to", "in", "on", "for", "is", "at", "by", "with", "and", "or", "be", "was", "were",
    "not", "no", "from", "this", "that", "it", "as", "are", "has", "have", "had", "will", "can", "did",
    "does", "do", "than",
    "msg", "level", "time", "ts", "caller",
))  # fmt: skip


def words(text: str) -> list[str]:
    """The line's words, lowercased: a CamelCase or snake_case name gives its parts and itself
    (``_kgspIsHeartbeatTimedOut`` names a heartbeat that timed out); numbers, hex and one
    letters are left out, and so is where the line was written from (see _WRITER)."""
    out: list[str] = []
    for word in _WORD.findall(_HEX.sub(" ", _WRITER.sub(" ", text))):
        parts = [p for p in _CAMEL.sub("_", word).split("_") if len(p) > 1]
        low = word.lower()
        if len(parts) > 1:
            out.extend(p.lower() for p in parts)
            out.append(low.strip("_"))
        else:
            out.append(low)
    return [w for w in out if len(w) > 1 and w not in _STOP]


# A lowercase snake_case name (`fatal_by_judge`, `on_error`) is a field or a function of some
# program, whose words say no failure; an error code is written in capitals somewhere
# (`cudaErrorIllegalAddress`, `NIXL_ERR_BACKEND`), and a plain `err` is a word of a message.
_FIELD = re.compile(r"(?<![\w.])[a-z][a-z\d]*(?:_[a-z\d]+)+(?![\w.])")


def _code_words(text: str) -> list[str]:
    return words(_FIELD.sub(" ", text))


@dataclass(frozen=True)
class Guess:
    """A signature named by resemblance: by how much it won, and the words that weighed most."""

    signature_id: str
    margin: float
    words: tuple[str, ...]


class Resemblance:
    """The classifier (see the module's doc). Classes are signature ids and :data:`BENIGN`."""

    def __init__(self, labelled: Iterable[tuple[str, str]]) -> None:
        counts: dict[str, Counter[str]] = {}
        docs: list[tuple[frozenset[str], str]] = []
        for line, label in labelled:
            bag = frozenset(words(line))
            counts.setdefault(label, Counter()).update(bag)
            docs.append((bag, label))
        self._classes: tuple[str, ...] = tuple(sorted(counts))
        vocabulary = {w for c in counts.values() for w in c}
        size = len(vocabulary)
        totals = [sum(counts[c].values()) for c in self._classes]
        # Per class: the log-probability of a word never seen with it, and per word the
        # difference a sighting makes (so a line costs one add per known word and class).
        self._unseen = [math.log(_SMOOTHING / (t + _SMOOTHING * size)) for t in totals]
        # (arrays of doubles: a third of the memory of lists of floats)
        self._seen: dict[str, array[float]] = {}
        for word in vocabulary:
            self._seen[word] = array(
                "d",
                (
                    math.log((counts[c][word] + _SMOOTHING) / (t + _SMOOTHING * size)) - u
                    for c, t, u in zip(self._classes, totals, self._unseen, strict=True)
                ),
            )
        self._benign = self._classes.index(BENIGN) if BENIGN in self._classes else -1
        # For the nearest known line: each word's idf and the lines (index, label) holding it.
        self._idf = {w: math.log((len(docs) + 1) / sum(c[w] for c in counts.values())) for w in vocabulary}
        self._norms = [math.sqrt(sum(self._idf[w] ** 2 for w in bag)) or 1.0 for bag, _ in docs]
        self._labels = [label for _, label in docs]
        self._holding: dict[str, list[int]] = {}
        for index, (bag, _) in enumerate(docs):
            for word in bag:
                self._holding.setdefault(word, []).append(index)

        # A log repeats its lines with other numbers: each template is classified once (numbers
        # are no words, so masking them changes nothing). lru_cache is thread-safe.
        self._cached = functools.lru_cache(maxsize=4096)(self._classify)

    def classify(self, text: str) -> Guess | None:
        """The signature the line reads like, or None (benign, unclear, or no failure word)."""
        # The head of a long line says what it is, and bounds the cost of a hostile one.
        head = text[:_MAX_CHARS]
        # (before numbers are masked: `willRetry=1`)
        if (
            says_retry(head)
            or says_code_bug(head)
            or _LOOKING.search(head) is not None
            or _CARRIER.search(head) is not None
        ):
            return None
        return self._cached(_DIGITS.sub("0", _SUCCESS_EXIT.sub(" ", head)))

    def _classify(self, text: str) -> Guess | None:
        found = [w for w in dict.fromkeys(words(text)) if w in self._seen]
        if len(self._classes) < 2 or _STACK.search(text) is not None or _COMMENT.search(text) is not None:
            return None
        # The failure must be said: not by a level (`[ERROR]`: argparse's usage printed at
        # ERROR line by line is no failure), a builtin exception's name or a path
        # (`runs/mocker-kill-a1/`); in a name, only an error code's words count
        # (`cudaErrorIllegalAddress`, not `_rpc_kill_job`).
        said = without_paths(_LEVEL.sub(" ", _GENERIC_EXCEPTION.sub(" ", _SETTING.sub(" ", text))))
        if (
            FAILURE_WORDS.isdisjoint(w.lower() for w in _PLAIN.findall(said))
            and _CODE_WORDS.isdisjoint(_code_words(said))
            and FAILURE_PHRASES.search(said) is None
        ):
            return None
        scores = [u * len(found) for u in self._unseen]
        for word in found:
            for i, extra in enumerate(self._seen[word]):
                scores[i] += extra
        if self._benign >= 0:
            scores[self._benign] += BENIGN_HEAD_START
        ranked = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
        best, second = ranked[0], ranked[1]
        margin = scores[best] - scores[second]
        if best == self._benign or margin < MARGIN or self._nearest(found) in (BENIGN, None):
            return None
        # What the line is about must favour the winner too, not only how it says it failed
        # (`failed to submit load req=...` of a KV offload is no rejected Slurm job).
        about = [w for w in found if w not in _SAYING]
        if self._benign >= 0:
            about = [w for w in about if self._seen[w][best] > self._seen[w][self._benign]]
        if not about:
            return None
        # ... and, but for a clear win, in more than one known line of it (see SURE).
        if margin < SURE:
            # (a path's folders say where, not what: `/usr/bin/python3`)
            unpathed = set(words(without_paths(text)))
            about = [w for w in about if w in unpathed]
            if len({i for w in about for i in self._holding[w] if self._labels[i] == self._classes[best]}) < 2:
                return None
        # The words that favour the winner most over the runner-up: what the operator is shown.
        weigh = sorted(found, key=lambda w: self._seen[w][best] - self._seen[w][second], reverse=True)
        return Guess(self._classes[best], round(margin, 1), tuple(weigh[:3]))

    def _nearest(self, found: list[str]) -> str | None:
        """The label of the known line most like these words (idf-weighted cosine)."""
        dot: dict[int, float] = {}
        for word in found:
            weight = self._idf[word] ** 2
            for index in self._holding[word]:
                dot[index] = dot.get(index, 0.0) + weight
        if not dot:
            return None
        index = max(dot, key=lambda i: dot[i] / self._norms[i])
        return self._labels[index]
