"""Charts of the stats page, drawn on the server as inline SVG: no script, no CDN, nothing the
Content-Security-Policy has to allow (presentation attributes, never ``style``), and they update
live with the rest of the page (the page's live region is re-rendered on each event).

* memories saved per day over :data:`DAYS` days, stacked by type and by contributor;
* mutations pushed per day (the server records every pushed mutation; it does not record pulls,
  which are long-polls — a machine's last pull is on the machines chart instead);
* each machine's pending count and time since its last push.

Every query is scoped to the viewer's projects. Labels are escaped: they are teammates' input.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from html import escape
from typing import Any

from markupsafe import Markup
from sqlalchemy import Connection, cast, func, select
from sqlalchemy.types import Date

from engram_cloud import models
from engram_cloud.dashboard.queries.common import Scope

DAYS = 90
TOP_SERIES = 6
PALETTE = ["#3451b2", "#1b7f4b", "#b26b00", "#8e3ab2", "#b42318", "#0f7b8a", "#888f98"]
WIDTH, HEIGHT, PAD = 720, 180, 28


@dataclass(slots=True)
class Series:
    """Daily counts per name, oldest day first."""

    days: list[date]
    counts: dict[str, list[int]]

    @property
    def total(self) -> int:
        return sum(sum(values) for values in self.counts.values())


def _days(today: date, days: int) -> list[date]:
    return [today - timedelta(days=days - 1 - i) for i in range(days)]


def _top(counts: dict[str, list[int]], keep: int = TOP_SERIES) -> dict[str, list[int]]:
    """The ``keep`` largest series, the rest summed as "others"."""
    ranked = sorted(counts.items(), key=lambda item: (-sum(item[1]), item[0]))
    kept = dict(ranked[:keep])
    rest = ranked[keep:]
    if rest:
        kept["others"] = [sum(values) for values in zip(*(v for _, v in rest), strict=True)]
    return kept


def memories_per_day(
    conn: Connection, scope: Scope, by: str, *, today: date | None = None, days: int = DAYS
) -> Series:
    """Live memories created per day, per ``type`` or per ``contributor``."""
    o = models.observations
    column = o.c.type if by == "type" else o.c.contributor
    today = today or datetime.now(UTC).date()
    span = _days(today, days)
    day = func.substr(o.c.created_at, 1, 10)
    rows = conn.execute(
        select(day.label("day"), column.label("name"), func.count().label("n"))
        .where(scope.where(o.c.project), o.c.deleted_at.is_(None), day >= span[0].isoformat())
        .group_by(day, column)
    )
    index = {d.isoformat(): i for i, d in enumerate(span)}
    counts: dict[str, list[int]] = {}
    for row in rows:
        if row.day in index:
            counts.setdefault(row.name or "unknown", [0] * days)[index[row.day]] += row.n
    return Series(span, _top(counts))


def pushes_per_day(
    conn: Connection, scope: Scope, *, today: date | None = None, days: int = DAYS
) -> Series:
    """Mutations received per day (what teammates' machines pushed)."""
    m = models.mutations
    today = today or datetime.now(UTC).date()
    span = _days(today, days)
    day = cast(m.c.received_at, Date)
    rows = conn.execute(
        select(day.label("day"), func.count().label("n"))
        .where(scope.where(m.c.project), day >= span[0])
        .group_by(day)
    )
    index = {d: i for i, d in enumerate(span)}
    values = [0] * days
    for row in rows:
        if row.day in index:
            values[index[row.day]] = row.n
    return Series(span, {"mutations pushed": values})


# --- drawing ---------------------------------------------------------------------------------


def _legend(names: list[str], y: int) -> str:
    parts, x = [], PAD
    for i, name in enumerate(names):
        label = escape(name[:24])
        parts.append(
            f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
            f'<text x="{x + 14}" y="{y}" font-size="11" fill="#1d2125">{label}</text>'
        )
        x += 24 + 7 * len(label)
    return "".join(parts)


def stacked_bars(series: Series, title: str) -> Markup:
    """Days along x, one stacked bar per day; a legend below; a ``<title>`` per bar."""
    days = len(series.days)
    names = list(series.counts)
    totals = [sum(series.counts[n][i] for n in names) for i in range(days)]
    peak = max(totals, default=0) or 1
    plot_h = HEIGHT - 2 * PAD
    step = (WIDTH - 2 * PAD) / max(days, 1)
    bars = []
    for i, day in enumerate(series.days):
        y: float = HEIGHT - PAD
        tip = [f"{day.isoformat()}: {totals[i]}"]
        for k, name in enumerate(names):
            n = series.counts[name][i]
            if not n:
                continue
            h = n / peak * plot_h
            y -= h
            tip.append(f"{name}: {n}")
            bars.append(
                f'<rect x="{PAD + i * step:.1f}" y="{y:.1f}" width="{max(step - 1, 1):.1f}" '
                f'height="{h:.1f}" fill="{PALETTE[k % len(PALETTE)]}">'
                f"<title>{escape(', '.join(tip))}</title></rect>"
            )
    first, last = series.days[0].isoformat(), series.days[-1].isoformat()
    svg = (
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT + 24}" '
        f'aria-label="{escape(title)}: {series.total} in {days} days" data-testid="chart">'
        f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" '
        'stroke="#e2e4e7"/>'
        f'<text x="{PAD}" y="{PAD - 10}" font-size="11" fill="#646b73">max {peak}/day</text>'
        f"{''.join(bars)}"
        f'<text x="{PAD}" y="{HEIGHT - PAD + 14}" font-size="11" fill="#646b73">{first}</text>'
        f'<text x="{WIDTH - PAD}" y="{HEIGHT - PAD + 14}" font-size="11" fill="#646b73" '
        f'text-anchor="end">{last}</text>'
        f"{_legend(names, HEIGHT + 14)}</svg>"
    )
    return Markup(svg)


def horizontal_bars(items: list[tuple[str, float, str]], title: str) -> Markup:
    """One bar per ``(label, value, shown value)``, longest first as given."""
    row_h, label_w = 22, 200
    height = max(len(items), 1) * row_h + 8
    peak = max((v for _, v, _ in items), default=0) or 1
    rows = []
    for i, (label, value, shown) in enumerate(items):
        y = 4 + i * row_h
        w = value / peak * (WIDTH - label_w - 90)
        rows.append(
            f'<text x="{label_w - 8}" y="{y + 14}" font-size="12" text-anchor="end" '
            f'fill="#1d2125">{escape(label[:30])}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{max(w, 1):.1f}" height="{row_h - 8}" '
            f'fill="{PALETTE[0]}"><title>{escape(label)}: {escape(shown)}</title></rect>'
            f'<text x="{label_w + w + 6:.1f}" y="{y + 14}" font-size="11" '
            f'fill="#646b73">{escape(shown)}</text>'
        )
    return Markup(
        f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {height}" '
        f'aria-label="{escape(title)}" data-testid="chart">{"".join(rows)}</svg>'
    )


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def machine_charts(machines: list[dict[str, Any]], now: datetime) -> dict[str, Markup]:
    """Pending mutations and time since the last push, per machine the viewer may see."""
    pending = [(m["hostname"], float(m["pending"]), str(m["pending"])) for m in machines]
    lag: list[tuple[str, float, str]] = []
    for m in machines:
        pushed = m.get("last_push_at")
        seconds = None
        if pushed:
            seconds = max(0.0, (now - datetime.fromisoformat(pushed)).total_seconds())
        lag.append((m["hostname"], seconds or 0.0, _ago(seconds)))
    return {
        "pending": horizontal_bars(sorted(pending, key=lambda r: -r[1]), "Pending per machine"),
        "lag": horizontal_bars(sorted(lag, key=lambda r: -r[1]), "Time since last push"),
    }


def stats_charts(conn: Connection, scope: Scope, machines: list[dict[str, Any]]) -> dict[str, Any]:
    now = datetime.now(UTC)
    by_type = memories_per_day(conn, scope, "type")
    by_person = memories_per_day(conn, scope, "contributor")
    pushes = pushes_per_day(conn, scope)
    return {
        "by_type": stacked_bars(by_type, "Memories per day by type"),
        "by_contributor": stacked_bars(by_person, "Memories per day by contributor"),
        "pushes": stacked_bars(pushes, "Mutations pushed per day"),
        "machines": machine_charts(machines, now) if machines else None,
    }
