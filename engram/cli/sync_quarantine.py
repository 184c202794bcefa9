"""``engram sync --quarantine [--retry | --discard]``: the records kept aside, for any transport.

Lists both quarantines of :mod:`engram.store.quarantine` — records received from a git chunk or
a cloud pull that could not be applied yet or at all (``clock_skew``, ``invalid`` …) and journal
rows a cloud server rejected — with their reason, project, key, who wrote them (origin) and
where they came from. ``--retry`` checks the received ones again now and puts the rejected ones
back in their push queue; ``--discard`` drops them (no confirmation: the flag is the decision).
"""

from __future__ import annotations

import argparse

from engram.cli.common import emit, open_store, resolve_project


def _projects(args: argparse.Namespace) -> list[str] | None:
    """An explicit ``--project`` narrows the list; otherwise every project's records show."""
    return [resolve_project(args.project).project] if args.project else None


def _line(item) -> str:
    where = f"{item.project or '(no project)'}/{item.entity or '?'} {item.key or '?'}"
    who = item.origin or "unknown origin"
    via = "from" if item.direction == "inbound" else "refused by"
    return (
        f"  [{item.direction} #{item.id}] {item.reason}: {where} — written by {who}, {via} "
        f"{item.source} ({item.attempts} attempt(s), since {item.since})\n      {item.error}"
    )


def cmd_quarantine(args: argparse.Namespace) -> int:
    from engram.store import quarantine

    projects = _projects(args)
    scope = "" if projects is None else f" of project {projects[0]}"
    with open_store() as store:
        if args.retry:
            checked = store.recheck_quarantine(
                [q.id for q in quarantine.listing(store.db, projects=projects)
                 if q.direction == "inbound"]
            )  # fmt: skip
            released = quarantine.release_outbound(store.db, projects=projects)
            left = quarantine.listing(store.db, projects=projects)
            data = {
                "applied": checked.released,
                "still_quarantined": checked.quarantined,
                "released_for_push": released,
                "quarantined": [q.to_dict() for q in left],
            }
            human = [
                f"Checked again{scope}: {checked.released} applied, "
                f"{checked.quarantined_total} still waiting"
                + (f" ({_reasons(checked.quarantined)})" if checked.quarantined else ""),
                f"{released} rejected record(s) back in the push queue"
                + (" (the next engram sync --cloud pushes them)" if released else ""),
            ]
            emit(args, "\n".join(human), data)
            return 0
        if args.discard:
            dropped = quarantine.discard(store.db, projects=projects)
            emit(
                args,
                f"Discarded{scope}: {dropped['inbound']} received record(s), "
                f"{dropped['outbound']} rejected record(s) (no longer pushed to that target)",
                {"discarded": dropped},
            )
            return 0
        items = quarantine.listing(store.db, projects=projects)
    data = {"quarantined": [q.to_dict() for q in items]}
    if not items:
        emit(args, f"Quarantine is empty{scope}.", data)
        return 0
    lines = [f"{len(items)} quarantined record(s){scope}:"]
    lines += [_line(q) for q in items]
    lines.append("engram sync --quarantine --retry checks them again; --discard drops them.")
    emit(args, "\n".join(lines), data)
    return 0


def _reasons(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))


def summary(store, projects: list[str] | None = None) -> str | None:
    """One status line about the quarantines (``None`` when both are empty)."""
    held = store.quarantine_counts(projects)
    if not held["inbound"] and not held["outbound"]:
        return None
    parts = [f"{n} received ({reason})" for reason, n in held["inbound"].items()]
    parts += [f"{n} rejected by a server ({code})" for code, n in held["outbound"].items()]
    return "Quarantined: " + ", ".join(parts) + " — engram sync --quarantine"
