"""Readability: the default dark theme and the light one keep every piece of text at a WCAG
contrast of 4.5:1 or more against what is behind it, and ``NO_COLOR`` draws in greys only while
the cursor row stays marked."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.segment import Segment
from textual.app import App

from engram.tui.styles import DEFAULT_THEME, LIGHT_THEME
from tests.tui.helpers import Seeded, make_app, screen_text, snapshot, wait_for, wait_text

pytestmark = pytest.mark.anyio
SIZE = (110, 36)
DECORATION = " ─│╭╮╰╯▁▔▎▊█▀▄▇▌▐━┃"  # borders and scrollbars: not text to read


def segments(app: App) -> list[tuple[int, int, Segment]]:
    """Every drawn segment with its cell position (x, y)."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
    )
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    placed, x, y = [], 0, 0
    for segment in console.render(update):
        if segment.text == "\n":
            x, y = 0, y + 1
            continue
        placed.append((x, y, segment))
        x += segment.cell_length
    return placed


def luminance(rgb: tuple[int, int, int]) -> float:
    def channel(value: int) -> float:
        v = value / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = rgb
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(fg: tuple[int, int, int], bg: tuple[int, int, int]) -> float:
    high, low = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def poor_contrast(app: App, minimum: float) -> list[tuple[float, str]]:
    # A dialog dims the screen behind it on purpose: only the dialog itself must be crisp.
    dialogs = app.screen.query(".dialog")
    region = dialogs.first().region if dialogs else app.screen.region
    poor = []
    for x, y, segment in segments(app):
        style = segment.style
        if style is None or not segment.text.strip(DECORATION) or not region.contains(x, y):
            continue
        assert style.color is not None and style.bgcolor is not None, segment
        ratio = contrast(style.color.get_truecolor(), style.bgcolor.get_truecolor())
        if ratio < minimum:
            poor.append((round(ratio, 2), segment.text.strip()))
    return poor


@pytest.mark.parametrize("theme", [DEFAULT_THEME, LIGHT_THEME])
async def test_text_is_readable_in_the_dark_and_light_themes(seeded: Seeded, theme: str) -> None:
    app = make_app(seeded.data_dir, theme=theme)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Fixed login timeout")
        assert poor_contrast(app, 4.5) == [], "dashboard"
        snapshot(app, f"dashboard-{theme}")
        for keys, marker, name in (
            (("o",), "1–7 of 7", "recent"),
            (("enter",), "revisions", "detail"),
            (("d",), "Delete #", "confirm"),
            (("n", "e"), "Topic key", "edit"),
            (("escape", "question_mark"), "Ctrl+C", "help"),
            (("escape", "escape", "escape", "e"), "1–3 of 3", "sessions"),
        ):
            await pilot.press(*keys)
            await wait_text(pilot, marker)
            await pilot.pause(0.3)  # let the focus styles settle
            assert poor_contrast(app, 4.5) == [], name


async def test_no_color_draws_in_greys_and_keeps_the_cursor_visible(
    seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_text(pilot, "Fixed login timeout")
        await pilot.press("o")
        await wait_text(pilot, "1–7 of 7")
        for _x, _y, segment in segments(app):
            for color in (segment.style.color, segment.style.bgcolor) if segment.style else ():
                if color is not None:
                    r, g, b = color.get_truecolor()
                    assert r == g == b, (segment.text, color)
        cursor_rows = [line for line in screen_text(app).splitlines() if "│▌" in line]
        assert len(cursor_rows) == 2 and "Parser handles unicode" in cursor_rows[0]
        await pilot.press("j")
        await wait_for(pilot, lambda: "│▌ #6" in screen_text(app), "the marker to move")
        snapshot(app, "recent-no-color")
        # Every other screen draws without colour too (Textual's grey filter is strict).
        for keys, marker in (
            (("enter",), "Exponential backoff"),
            (("t",), "◆ this memory"),
            (("question_mark",), "Ctrl+C"),
            (("escape", "s", *"login"), "Results for “login”"),
            (("escape", "escape", "escape", "escape", "e"), "1–3 of 3"),
            (("enter",), "Prompts"),
            (("p",), "All projects"),
        ):
            await pilot.press(*keys)
            await wait_text(pilot, marker)
