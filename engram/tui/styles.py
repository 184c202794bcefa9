"""The TUI's look: its stylesheet and theme choice, in one place.

Every colour comes from the active Textual theme's variables ($text-accent, $text-muted, …), never
a literal, so any theme stays consistent; text uses the contrast-adjusted ``$text-*`` variants. The
default is Catppuccin Mocha (the palette of the tool that first defined Engram); the app paints its
own background, so it reads the same on light and dark terminals. ``engram-light`` (Catppuccin
Latte with darker accents) is for people who prefer a light screen; both keep body text at a WCAG
contrast of 4.5:1 or more (tested). ``ansi-dark`` / ``ansi-light`` use the terminal's own colours,
and with ``NO_COLOR`` set Textual renders in greys while the cursor row keeps its ``▌`` marker and
headings stay bold.
"""

from __future__ import annotations

from engram import settings

DEFAULT_THEME = "catppuccin-mocha"
THEME_ENV = "ENGRAM_TUI_THEME"

#: Smallest terminal the screens are drawn in; below it a message asks for more room.
MIN_WIDTH = 50
MIN_HEIGHT = 12


LIGHT_THEME = "engram-light"


def light_theme():  # -> textual.theme.Theme (imported lazily with Textual)
    """Catppuccin Latte with accents dark enough for body text on its pale background."""
    from textual.theme import BUILTIN_THEMES, Theme

    latte = BUILTIN_THEMES["catppuccin-latte"]
    return Theme(
        name=LIGHT_THEME,
        primary="#7028C8",
        secondary="#A0461F",
        accent="#A8420A",
        warning="#9A5A00",
        error="#B00B2E",
        success="#2D7320",
        foreground=latte.foreground,
        background=latte.background,
        surface=latte.surface,
        panel=latte.panel,
        dark=False,
        variables={**latte.variables, "input-selection-background": "#7028C8 14%"},
    )


def builtin_themes() -> list[str]:
    from textual.theme import BUILTIN_THEMES

    return sorted([*BUILTIN_THEMES, LIGHT_THEME])


def choose_theme(explicit: str | None) -> str:
    """``--theme``, else ``$ENGRAM_TUI_THEME``, else the default; unknown names are an error."""
    name = (explicit or settings.raw(THEME_ENV) or DEFAULT_THEME).strip()
    known = builtin_themes()
    if name not in known:
        from engram.errors import ValidationError

        raise ValidationError(f"unknown theme {name!r}; choose one of: {', '.join(known)}")
    return name


APP_CSS = """
Screen {
    background: $background;
    layout: vertical;
}

#topbar {
    height: 1;
    padding: 0 1;
    background: $panel;
    color: $text;
}

#status {
    height: auto;
    padding: 0 1;
    color: $warning;
    text-style: bold;
    display: none;
}
#status.-shown { display: block; }

#too-small {
    display: none;
    width: 1fr;
    height: 1fr;
    content-align: center middle;
    text-align: center;
    color: $warning;
    text-style: bold;
}
App.-too-small Screen > * { display: none; }
App.-too-small Screen > #too-small { display: block; }

/* Footer keys in the theme's contrast-checked accent (the default can be faint on light). */
FooterKey .footer-key--key { color: $text-accent; }
/* Placeholders are hints people must be able to read. */
Input > .input--placeholder { color: $text-muted; }

/* dashboard */
#stats { height: 4; padding: 0 1; }
.stat {
    width: 1fr;
    height: 4;
    border: round $border-blurred;
    padding: 0 1;
    content-align: center middle;
    text-align: center;
}
#sync, #database { height: auto; padding: 0 2; color: $text-muted; }
#dash-main { height: 1fr; padding: 0 1; }
#menu {
    width: 30;
    height: 1fr;
    border: round $border-blurred;
    background: $surface;
}
#menu:focus { border: round $border; }

/* search */
#query {
    margin: 0 1;
    border: round $border-blurred;
}
#query:focus { border: round $border; }

LazyList { margin: 0 1; }

/* observation detail */
#obs-head { padding: 0 2; height: auto; text-style: bold; }
#obs-meta { padding: 0 2; height: auto; color: $text-muted; }
#obs-relations { padding: 0 2; height: auto; color: $text-accent; }
#obs-body {
    margin: 0 1;
    height: 1fr;
    border: round $border-blurred;
    background: $surface;
    padding: 0 1;
}
#obs-body:focus { border: round $border; }
.block { height: auto; margin-bottom: 1; }
.block-label {
    height: 1;
    color: $text-accent;
    text-style: bold underline;
}
.block-text { height: auto; padding-left: 2; }
#obs-gone {
    display: none;
    margin: 1 2;
    padding: 1 2;
    border: heavy $error;
    color: $error;
    text-style: bold;
    height: auto;
}
ObservationScreen.-gone #obs-gone { display: block; }
ObservationScreen.-gone #obs-body { display: none; }

/* timeline and session detail */
#tl-head, #session-head { padding: 0 2; height: auto; color: $text-muted; }

/* dialogs */
ModalScreen { align: center middle; background: $background 60%; }
.dialog {
    width: 90;
    max-width: 95%;
    height: auto;
    max-height: 90%;
    border: thick $primary;
    background: $surface;
    padding: 1 2;
}
.dialog-title { text-style: bold; color: $primary; margin-bottom: 1; }
.dialog-text { margin-bottom: 1; }
.dialog-buttons { height: auto; align-horizontal: right; }
.dialog-buttons Button { margin-left: 2; }
.field-label { color: $text-muted; margin-top: 1; }
#projects-list { height: auto; max-height: 20; }
#edit-content { height: 8; min-height: 3; }
#edit-error { height: auto; color: $error; }
#help-keys { height: auto; }
"""
