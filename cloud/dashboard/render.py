"""Rendering the dashboard: the Jinja environment, the filters templates use (times, memory
content, badges, links), and the choice between a full page and an HTMX fragment.

**Escaping.** Autoescaping is always on and no filter returns markup: memory content, titles and
names reach the page as text whatever they contain (``<script>``, HTML, ``{{ … }}``), and the
What / Why / Where / Learned renderer only splits text into labelled blocks that the templates
print escaped. Templates are files of this package, never strings built from input.

**Fragments.** A request with ``HX-Request: true`` gets only the fragment a page swaps in; any
other request (a bookmark, a reload, htmx restoring history) gets the whole page, so every URL
works opened directly.

Times in the read model are the store's UTC text (``YYYY-MM-DD HH:MM:SS``); they are shown in
``ENGRAM_TIMEZONE`` (an IANA zone, default UTC), relative ("3 h ago") and absolute.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime, tzinfo
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from litestar import Request, Response
from litestar.plugins.htmx import ClientRedirect
from litestar.response import Template

from engram import __version__
from engram.record import EPOCH_TEXT
from engram.text import one_line, split_blocks
from engram_cloud import settings

log = logging.getLogger("engram_cloud.dashboard")

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
TYPE_CLASSES = {
    "decision": "ok",
    "architecture": "ok",
    "bugfix": "danger",
    "discovery": "warn",
    "learning": "warn",
}


def template_dir() -> Path:
    return Path(str(files("engram_cloud.templates")))


def display_zone() -> tzinfo:
    """``ENGRAM_TIMEZONE`` (IANA name), else UTC; a bad name is logged and UTC used."""
    name = settings.raw("ENGRAM_TIMEZONE")
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        log.warning("ENGRAM_TIMEZONE=%r is not a known time zone; showing times in UTC", name)
        return UTC


# --- times ---------------------------------------------------------------------------------------


def parse_time(value: Any) -> datetime | None:
    """A store text time, an RFC 3339 text or a datetime → an aware datetime (``None`` if
    empty, unparseable or the epoch placeholder)."""
    if value is None or value == "" or value == EPOCH_TEXT:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def relative(moment: datetime, now: datetime) -> str:
    seconds = int((now - moment).total_seconds())
    ahead = seconds < 0
    seconds = abs(seconds)
    if seconds < 45:
        return "just now"
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size or unit == "min":
            count = max(1, round(seconds / size))
            label = unit if unit != "day" else ("day" if count == 1 else "days")
            if unit == "day" and count >= 60:
                months = round(count / 30.4)
                label, count = ("month" if months == 1 else "months"), months
            if unit == "day" and count >= 730:
                years = round(count / 365.25)
                label, count = ("year" if years == 1 else "years"), years
            return f"in {count} {label}" if ahead else f"{count} {label} ago"
    return "just now"  # pragma: no cover  (the loop always returns)


class Clock:
    """Formats times for one render (one "now" and one zone for the whole page)."""

    def __init__(self, zone: tzinfo, now: datetime | None = None) -> None:
        self.zone = zone
        self.now = now or datetime.now(UTC)

    def absolute(self, value: Any, empty: str = "-") -> str:
        moment = parse_time(value)
        if moment is None:
            return empty
        local = moment.astimezone(self.zone)
        return local.strftime("%d %b %Y %H:%M") + " " + (local.tzname() or "")

    def relative(self, value: Any, empty: str = "-") -> str:
        moment = parse_time(value)
        return empty if moment is None else relative(moment, self.now)

    def iso(self, value: Any) -> str:
        moment = parse_time(value)
        return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- content ---------------------------------------------------------------------------------------


def blocks(content: str | None) -> list[Any]:
    """A memory's What / Why / Where / Learned blocks (text before the first label is an
    unlabelled block). Plain text: the template escapes it."""
    return split_blocks(content or "")


def preview(content: str | None, limit: int = 240) -> str:
    """One line: ``What: … • Why: …`` for structured content, else the text flattened."""
    parts = []
    for block in blocks(content):
        text = one_line(block.text, limit)
        if text:
            parts.append(f"{block.label}: {text}" if block.label else text)
    return one_line(" • ".join(parts), limit)


def type_class(kind: str | None) -> str:
    return TYPE_CLASSES.get((kind or "").lower(), "muted")


# --- links ---------------------------------------------------------------------------------------


def seg(value: Any) -> str:
    """One path segment, percent-encoded (``/`` included), so any name makes a working link."""
    return quote(str(value), safe="")


def with_query(path: str, params: dict[str, Any] | None = None, **changes: Any) -> str:
    """``path`` with the non-empty ``params`` (updated by ``changes``) as its query string."""
    merged = {**(params or {}), **changes}
    query = urlencode([(k, v) for k, v in merged.items() if v not in (None, "")])
    return f"{path}?{query}" if query else path


def observation_url(row: Any) -> str:
    if isinstance(row, dict):  # built in a template from a relation's other end
        project, session_id, sync_id = row["project"], row["session_id"], row["sync_id"]
    else:
        project, session_id, sync_id = row.project, row.session_id, row.sync_id
    return f"/dashboard/observations/{seg(project)}/{seg(session_id)}/{seg(sync_id)}"


def prompt_url(row: Any) -> str:
    return f"/dashboard/prompts/{seg(row.project)}/{seg(row.session_id)}/{seg(row.sync_id)}"


def session_url(project: str, session_id: str) -> str:
    return f"/dashboard/sessions/{seg(project)}/{seg(session_id)}"


def project_url(name: str, *rest: str) -> str:
    return "/".join([f"/dashboard/projects/{seg(name)}", *rest])


def contributor_url(name: str) -> str:
    return f"/dashboard/contributors/{seg(name)}"


def _static_version() -> str:
    """A short digest of the static files, so a new release busts browser caches."""
    digest = hashlib.sha256()
    for path in sorted(STATIC_DIR.glob("*")):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def environment() -> Environment:
    """The dashboard's Jinja environment: the package's templates, autoescape on, undefined
    names are errors (a typo in a template fails its test instead of rendering blank)."""
    env = Environment(
        loader=FileSystemLoader(str(template_dir())),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        preview=preview,
        blocks=blocks,
        type_class=type_class,
        seg=seg,
        one_line=one_line,
        number=lambda n: f"{n:,}",
    )
    env.globals.update(
        with_query=with_query,
        observation_url=observation_url,
        prompt_url=prompt_url,
        session_url=session_url,
        project_url=project_url,
        contributor_url=contributor_url,
        version=__version__,
        static_version=_static_version(),
    )
    return env


# --- responses -----------------------------------------------------------------------------------

NO_STORE = {"Cache-Control": "no-store", "Vary": "HX-Request"}


def is_fragment(request: Request) -> bool:
    """An htmx swap (not a history restore, which needs the whole page)."""
    headers = request.headers
    return headers.get("hx-request", "").lower() == "true" and (
        headers.get("hx-history-restore-request", "").lower() != "true"
    )


def render(
    request: Request,
    template: str,
    context: dict[str, Any],
    *,
    fragment: str | None = None,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> Template:
    """The full page ``template``, or only ``fragment`` for an htmx request."""
    name = fragment if fragment and is_fragment(request) else template
    zone = request.app.state.dashboard_zone
    full = {
        "viewer": None,
        "nav": "",
        "title": "",
        "clock": Clock(zone),
        "fragment": fragment or "",
        **context,
    }
    return Template(
        template_name=name,
        context=full,
        status_code=status_code,
        headers={**NO_STORE, **(headers or {})},
    )


def hx_redirect(url: str) -> Response[Any]:
    """``HX-Redirect``: htmx navigates the whole page there (a 303 would be followed by the
    browser's fetch and its target swapped into the fragment)."""
    response = ClientRedirect(redirect_to=url)
    response.status_code = 200  # else the route's declared status (a 303) applies
    return response
