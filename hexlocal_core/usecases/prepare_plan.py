"""The decision every docs call passes through (`Ingestion.prepare`), as a pure function.

`Ingestion.prepare` gathers the facts (the version resolved, what the index holds, the job
running for the package, how the last one ended), asks `decide`, and acts on the answer.
The rules, in order:

1. Unpinned (no version asked, none locked) and something else is indexed or being
   indexed: answer from that version rather than hex.pm's latest (`switch_to`).
2. A running job for another version gives way (`cancel_running`).
3. Indexed at the version, complete, nothing running, no refresh: `Ready`.
4. A sync's chunks-only job is running: report its progress (`ReportJob`).
5. A call that can answer from chunks, whose last job for this version failed moments ago,
   with the chunks there: answer from them (`AnswerFromChunks`), no new download.
6. Otherwise a job (the running one, else a new one): answer from the chunks at once when
   they are there at that version and the call can (`Work(answer_now=True)`), else wait on
   it (`Work(answer_now=False)`).
"""

from __future__ import annotations

from attrs import frozen


@frozen
class LastJob:
    """The package's finished job this process has not collected: why it ended."""

    version: str
    stopped: str | None  # its error, None when it ended well
    recent: bool  # ended less than RETRY_FAILED_AFTER_S ago


@frozen
class Facts:
    wanted: str  # the version resolved
    pinned: bool  # asked explicitly, or the project pins it
    refresh: bool
    searchable: bool  # the call may answer from chunks alone
    indexed: str | None  # the version the index holds
    indexed_complete: bool
    running: str | None  # the version a job of this process is indexing
    running_embeds: bool
    last: LastJob | None = None


@frozen
class Ready:
    pass


@frozen
class ReportJob:
    """Report the running chunks-only job's progress."""


@frozen
class AnswerFromChunks:
    stopped: str | None


@frozen
class Work:
    start: bool  # no job runs for the version: start one
    answer_now: bool  # its chunks are there: answer without waiting
    owe_notice: bool  # the chunks lack vectors: say so


Decision = Ready | ReportJob | AnswerFromChunks | Work


def switch_to(facts: Facts) -> str | None:
    """The indexed (or being indexed) version an unpinned call answers from instead of
    the one resolved, or None."""
    current = facts.running or facts.indexed
    if current is None or current == facts.wanted or facts.refresh or facts.pinned:
        return None
    return current


def cancel_running(facts: Facts) -> bool:
    """A running job for another version gives way to the one wanted now."""
    return facts.running is not None and facts.running != facts.wanted


def decide(facts: Facts) -> Decision:
    """What the call does, once `switch_to` and `cancel_running` were acted on."""
    at_version = facts.indexed == facts.wanted
    if facts.running is None and at_version and facts.indexed_complete and not facts.refresh:
        return Ready()
    if facts.running is not None and not facts.running_embeds:
        return ReportJob()
    last = facts.last
    if (
        facts.searchable
        and not facts.refresh
        and facts.running is None
        and last is not None
        and last.stopped is not None
        and last.version == facts.wanted
        and at_version
        and last.recent
    ):
        return AnswerFromChunks(last.stopped)
    answer_now = facts.searchable and at_version and not facts.refresh
    return Work(
        start=facts.running is None,
        answer_now=answer_now,
        owe_notice=answer_now and not facts.indexed_complete,
    )
