"""``LazyList``: a keyboard-driven list over a source of any size, loaded page by page.

Only the total count and the pages on screen are ever fetched, on worker threads: a list of
100,000 memories opens with one ``COUNT`` and one page of 50 rows, and jumping to its end loads
just the last page. Each item is two lines (a headline and a preview). The border shows where
the view is ("21–40 of 312"); a ``▌`` marks the cursor row, so it stays visible without colour.

Size: over 500 lines on purpose: one widget whose paging, cursor and rendering share state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from engram.terminal import for_terminal
from engram.tui.gateway import Closing, as_engram_error
from engram.tui.present import position_text

T = TypeVar("T")
PAGE_SIZE = 50
ITEM_HEIGHT = 2
MAX_CACHED_PAGES = 40
#: A growing source fetches more once the cursor is this close to its end.
GROW_AHEAD = 10

#: A line of an item: (text, role) spans; roles name the ``lazy-list--<role>`` styles.
Line = Sequence[tuple[str, str]]
ROLES = ("marker", "id", "type", "title", "badge", "meta", "preview", "notice")


class Source(Protocol[T]):
    """Where a list's items come from; both methods run on worker threads (on the UI thread
    when the source says it is ``in_memory``)."""

    def count(self) -> int: ...

    def fetch(self, offset: int, limit: int) -> list[T]: ...


class GrowingSource(Source[T], Protocol[T]):
    """A source whose count is only what was fetched so far (search results): when the cursor
    nears the end, ``grow()`` (worker thread) fetches more and ``adopt()`` (UI thread) keeps
    them."""

    can_grow: bool

    def grow(self) -> list[T]: ...

    def adopt(self, items: list[T]) -> None: ...


@dataclass
class FixedSource(Generic[T]):
    """Items already in memory (a timeline, a dashboard's recent list)."""

    items: list[T]
    in_memory = True

    def count(self) -> int:
        return len(self.items)

    def fetch(self, offset: int, limit: int) -> list[T]:
        return self.items[offset : offset + limit]


@dataclass
class CallSource(Generic[T]):
    """A source made of two callables (each given the store access it needs)."""

    counter: Callable[[], int]
    fetcher: Callable[[int, int], list[T]]

    def count(self) -> int:
        return self.counter()

    def fetch(self, offset: int, limit: int) -> list[T]:
        return self.fetcher(offset, limit)


class LazyList(ScrollView, Generic[T], can_focus=True):
    """A list that loads its items lazily; ``render_item(item) -> (line1, line2)``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("pagedown,space", "page(1)", "Page down", show=False),
        Binding("pageup,b", "page(-1)", "Page up", show=False),
        Binding("home,g", "first", "First", show=False),
        Binding("end,G", "last", "Last", show=False),
        Binding("enter", "select", "Open"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "lazy-list--cursor",
        "lazy-list--marker",
        "lazy-list--id",
        "lazy-list--type",
        "lazy-list--title",
        "lazy-list--badge",
        "lazy-list--meta",
        "lazy-list--preview",
        "lazy-list--notice",
    }

    DEFAULT_CSS = """
    LazyList {
        overflow-x: hidden;
        overflow-y: auto;
        border: round $border-blurred;
        border-title-color: $text-muted;
        border-subtitle-color: $text-muted;
        background: $surface;
        height: 1fr;
        & > .lazy-list--cursor { background: $block-cursor-blurred-background; }
        & > .lazy-list--marker { color: $text-muted; }
        & > .lazy-list--id { color: $text-muted; }
        & > .lazy-list--type { color: $text-secondary; text-style: bold; }
        & > .lazy-list--title { color: $foreground; text-style: bold; }
        & > .lazy-list--badge { color: $text-success; text-style: bold; }
        & > .lazy-list--meta { color: $text-muted; }
        & > .lazy-list--preview { color: $text-muted; }
        & > .lazy-list--notice { color: $text-muted; text-style: italic; }
        &:focus {
            border: round $border;
            border-title-color: $text;
            & > .lazy-list--cursor { background: $block-cursor-background; }
            & > .lazy-list--marker { color: $text-accent; }
        }
    }
    """

    cursor: reactive[int] = reactive(0, init=False)

    class Selected(Message):
        """Enter (or a click on the cursor row) on a loaded item."""

        def __init__(self, lazy_list: LazyList[Any], index: int, item: Any) -> None:
            super().__init__()
            self.lazy_list = lazy_list
            self.index = index
            self.item = item

        @property
        def control(self) -> LazyList[Any]:
            return self.lazy_list

    class Loaded(Message):
        """The count (and so the first page) arrived, or loading failed."""

        def __init__(self, lazy_list: LazyList[Any]) -> None:
            super().__init__()
            self.lazy_list = lazy_list

        @property
        def control(self) -> LazyList[Any]:
            return self.lazy_list

    def __init__(
        self,
        render_item: Callable[[T], tuple[Line, Line]],
        *,
        title: str = "",
        empty_text: str = "Nothing here yet.",
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.render_item = render_item
        self.border_title = title
        self.empty_text = empty_text
        self.source: Source[T] | None = None
        self.total: int | None = None
        self.error: str | None = None
        self._items: dict[int, T] = {}
        self._pages: dict[int, None] = {}  # loaded page numbers, oldest first (LRU order)
        self._pending: set[int] = set()
        self._generation = 0
        self._growing = False
        # Drawn lines, so that moving the cursor or scrolling redraws only what changed.
        self._lines: dict[tuple[object, ...], Strip] = {}
        self._style_cache: dict[tuple[bool, bool], dict[str, Style]] = {}

    # --- data -----------------------------------------------------------------------------------

    def set_source(
        self, source: Source[T], *, keep_cursor: bool = False, cursor: int | None = None
    ) -> None:
        """Show ``source`` (dropping what was loaded); the count and the cursor's page load.

        The cursor goes to ``cursor`` if given, else stays (``keep_cursor``) or goes to the top.
        """
        self.source = source
        self._generation += 1
        self._items.clear()
        self._pages.clear()
        self._pending.clear()
        self._growing = False
        self.total = None
        self.error = None
        if cursor is not None:
            self.set_reactive(LazyList.cursor, max(0, cursor))
        elif not keep_cursor:
            self.set_reactive(LazyList.cursor, 0)
            self.scroll_to(y=0, animate=False, immediate=True)
        self._update_position()
        self.refresh()
        generation = self._generation
        first_page = self.cursor // PAGE_SIZE
        if getattr(source, "in_memory", False):  # no database, so no thread hop
            offset = first_page * PAGE_SIZE
            self._counted(generation, source.count(), first_page, source.fetch(offset, PAGE_SIZE))
            return
        self._pending.add(first_page)
        self.run_worker(
            lambda: self._load_count(generation, source, first_page),
            thread=True,
            group="lazy-list",
            exit_on_error=False,
        )

    def reload(self) -> None:
        """Fetch the same source again (after a change), keeping the cursor where it was."""
        if self.source is not None:
            self.set_source(self.source, keep_cursor=True)

    def _load_count(self, generation: int, source: Source[T], page: int) -> None:
        try:
            total = source.count()
            items = source.fetch(page * PAGE_SIZE, PAGE_SIZE) if total else []
        except Closing:
            return
        except Exception as exc:
            self._call_ui(self._failed, generation, str(as_engram_error(exc)))
            return
        self._call_ui(self._counted, generation, total, page, items)

    def _load_page(self, generation: int, source: Source[T], page: int) -> None:
        try:
            items = source.fetch(page * PAGE_SIZE, PAGE_SIZE)
        except Closing:
            return
        except Exception as exc:
            self._call_ui(self._failed, generation, str(as_engram_error(exc)))
            return
        self._call_ui(self._page_loaded, generation, page, items)

    def _call_ui(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            self.app.call_from_thread(fn, *args)
        except RuntimeError:  # the app is shutting down: nobody is waiting for this page
            pass

    def _counted(self, generation: int, total: int, page: int, items: list[T]) -> None:
        if generation != self._generation:
            return
        self.total = total
        self.virtual_size = Size(self.scrollable_content_region.width, total * ITEM_HEIGHT)
        if self.cursor >= total:
            self.set_reactive(LazyList.cursor, max(0, total - 1))
        self._page_loaded(generation, page, items)
        self.scroll_to_cursor()
        self.post_message(self.Loaded(self))

    def show_error(self, message: str) -> None:
        """Show why the items cannot be listed (``r`` retries on every screen)."""
        self._generation += 1
        self._failed(self._generation, message)

    def _failed(self, generation: int, message: str) -> None:
        if generation != self._generation:
            return
        self._pending.clear()
        self.error = message
        if self.total is None:
            self.total = 0
            self.virtual_size = Size(self.scrollable_content_region.width, 0)
        self._update_position()
        self.refresh()
        self.post_message(self.Loaded(self))

    def _page_loaded(self, generation: int, page: int, items: list[T]) -> None:
        if generation != self._generation:
            return
        self._pending.discard(page)
        for offset, item in enumerate(items):
            self._items[page * PAGE_SIZE + offset] = item
        self._pages.pop(page, None)
        self._pages[page] = None
        self._evict(keep=page)
        self._update_position()
        self.refresh()

    def _evict(self, keep: int) -> None:
        """Forget the pages farthest from the cursor once too many are held."""
        while len(self._pages) > MAX_CACHED_PAGES:
            cursor_page = self.cursor // PAGE_SIZE
            far = max((p for p in self._pages if p != keep), key=lambda p: abs(p - cursor_page))
            del self._pages[far]
            for index in range(far * PAGE_SIZE, (far + 1) * PAGE_SIZE):
                self._items.pop(index, None)

    def _request(self, index: int) -> None:
        page = index // PAGE_SIZE
        if page in self._pages or page in self._pending or self.source is None:
            return
        if self.error is not None:
            return
        generation, source = self._generation, self.source
        if getattr(source, "in_memory", False):
            self._page_loaded(generation, page, source.fetch(page * PAGE_SIZE, PAGE_SIZE))
            return
        self._pending.add(page)
        self.run_worker(
            lambda: self._load_page(generation, source, page),
            thread=True,
            group="lazy-list",
            exit_on_error=False,
        )

    # --- reading --------------------------------------------------------------------------------

    @property
    def item_count(self) -> int:
        return self.total or 0

    def item_at(self, index: int) -> T | None:
        return self._items.get(index)

    @property
    def current(self) -> T | None:
        """The item under the cursor (``None`` while its page loads or the list is empty)."""
        return self._items.get(self.cursor) if self.item_count else None

    def visible_range(self) -> tuple[int, int]:
        """1-based first and last items wholly on screen."""
        top = int(self.scroll_offset.y)
        bottom = top + self.scrollable_content_region.height
        first = -(-top // ITEM_HEIGHT) + 1
        return first, max(first, min(self.item_count, bottom // ITEM_HEIGHT))

    @property
    def position(self) -> str:
        if self.error is not None:
            return "error"
        first, last = self.visible_range()
        more = "+" if getattr(self.source, "can_grow", False) else ""
        return position_text(first, last, self.total) + more

    def _update_position(self) -> None:
        self.border_subtitle = self.position

    # --- moving ---------------------------------------------------------------------------------

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, self.item_count - 1)) if self.item_count else 0

    def watch_cursor(self, old: int, new: int) -> None:
        self.scroll_to_cursor()
        self.refresh()
        self._update_position()
        self._maybe_grow()

    def _maybe_grow(self) -> None:
        """Near the end of a growing source: fetch more in the background."""
        source = cast("GrowingSource[T]", self.source)
        if (
            self._growing
            or self.total is None
            or not getattr(source, "can_grow", False)
            or self.cursor < self.total - GROW_AHEAD
        ):
            return
        self._growing = True
        generation = self._generation

        def grow() -> None:
            try:
                items = source.grow()
            except Closing:
                return
            except Exception as exc:
                self._call_ui(self._failed, generation, str(as_engram_error(exc)))
                return
            self._call_ui(self._grown, generation, items)

        self.run_worker(grow, thread=True, group="lazy-list-grow", exit_on_error=False)

    def _grown(self, generation: int, items: list[T]) -> None:
        self._growing = False
        if generation != self._generation or self.source is None:
            return
        cast("GrowingSource[T]", self.source).adopt(items)
        self.total = self.source.count()
        self.virtual_size = Size(self.scrollable_content_region.width, self.total * ITEM_HEIGHT)
        self._items.clear()
        self._pages.clear()
        self._lines.clear()
        self._update_position()
        self.refresh()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._update_position()

    def scroll_to_cursor(self) -> None:
        if not self.item_count:
            return
        self.scroll_to_region(
            Region(0, self.cursor * ITEM_HEIGHT, 1, ITEM_HEIGHT),
            animate=False,
            force=True,
            immediate=True,
        )

    def action_cursor(self, delta: int) -> None:
        self.cursor += delta

    def action_page(self, direction: int) -> None:
        rows = max(1, self.scrollable_content_region.height // ITEM_HEIGHT)
        self.cursor += direction * rows

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = self.item_count - 1

    def action_select(self) -> None:
        item = self.current
        if item is not None:
            self.post_message(self.Selected(self, self.cursor, item))

    def on_click(self, event: events.Click) -> None:
        index = (event.y + int(self.scroll_offset.y)) // ITEM_HEIGHT
        if not 0 <= index < self.item_count:
            return
        if index == self.cursor:
            self.action_select()
        else:
            self.cursor = index

    def on_resize(self, event: events.Resize) -> None:
        if self.total is not None:
            self.virtual_size = Size(self.scrollable_content_region.width, self.total * ITEM_HEIGHT)
        self._update_position()

    # --- drawing --------------------------------------------------------------------------------

    def _styles(self, selected: bool) -> dict[str, Style]:
        """The style of each role on a normal or the cursor row (computed once per look)."""
        key = (selected, self.has_focus)
        styles = self._style_cache.get(key)
        if styles is None:
            base = self.rich_style
            if selected:
                base += self.get_visual_style("lazy-list--cursor").rich_style
            styles = {"": base}
            for role in ROLES:
                styles[role] = base + self.get_visual_style(f"lazy-list--{role}").rich_style
            self._style_cache[key] = styles
        return styles

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        line_no = y + int(self.scroll_offset.y)
        index, part = divmod(line_no, ITEM_HEIGHT)
        if self.total is None or self.error is not None or self.total == 0:
            return self._notice_line(y, width)
        if index >= self.total:
            return Strip.blank(width, self._styles(False)[""])
        item = self._items.get(index)
        if item is None:
            self._request(index)  # an in-memory source fills it in right away
            item = self._items.get(index)
        selected = index == self.cursor
        key = (self._generation, index, part, selected, width, self.has_focus, item is None)
        strip = self._lines.get(key)
        if strip is None:
            # Strips are costly to make (each holds caches): one per line, kept while it holds.
            strip = self._draw(item, part, selected, width).apply_offsets(0, line_no)
            if item is not None:
                if len(self._lines) > 2000:
                    self._lines.clear()
                self._lines[key] = strip
        return strip

    def notify_style_update(self) -> None:
        # A theme or focus style changed: every line is drawn anew.
        self._lines.clear()
        self._style_cache.clear()
        super().notify_style_update()

    def _draw(self, item: T | None, part: int, selected: bool, width: int) -> Strip:
        styles = self._styles(selected)
        segments = [Segment("▌" if selected else " ", styles["marker"]), Segment(" ", styles[""])]
        if item is None:
            segments.append(Segment("…" if part == 0 else "", styles["notice"]))
        else:
            segments += [
                Segment(for_terminal(text), styles[role])
                for text, role in self.render_item(item)[part]
            ]
        return self._fit(segments, width, styles[""])

    @staticmethod
    def _fit(segments: list[Segment], width: int, style: Style) -> Strip:
        """Exactly ``width`` cells: padded, or cut with an ellipsis."""
        if sum(segment.cell_length for segment in segments) > width:
            kept = Segment.adjust_line_length(segments, max(0, width - 1))
            ends = next((s.style for s in reversed(kept) if s.text.strip()), style)
            segments = [*kept, Segment("…", ends)]  # in the style of the text it cuts
        return Strip(Segment.adjust_line_length(segments, width, style), width)

    def _notice_line(self, y: int, width: int) -> Strip:
        styles = self._styles(False)
        if self.error is not None:
            lines = ["Could not load this list:", self.error, "Press r to retry."]
        elif self.total is None:
            lines = ["Loading…"]
        else:
            lines = self.empty_text.splitlines()
        if y - 1 < 0 or y - 1 >= len(lines):
            return Strip.blank(width, styles[""])
        line = for_terminal("  " + lines[y - 1])  # an error's text can quote stored values
        return self._fit([Segment(line, styles["notice"])], width, styles[""])
