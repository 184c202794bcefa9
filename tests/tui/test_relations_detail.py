"""The TUI's memory detail lists the memory's relations (issue 20): what it supersedes or what
contests it, and whether it needs review; a title with escape codes stays text."""

from __future__ import annotations

import pytest

from engram.tui.detail import ObservationScreen
from tests.tui.helpers import Seeded, make_app, wait_text

pytestmark = pytest.mark.anyio
SIZE = (110, 36)


async def test_the_detail_screen_lists_relations(seeded: Seeded) -> None:
    store = seeded.store
    postgres, login = seeded.ids["postgres"], seeded.ids["login"]
    newer = store.add_observation(
        title="Moved to CockroachDB\x1b[2J", content="**What**: PostgreSQL replaced", project="acme"
    ).observation.id
    store.relate(newer, postgres, "supersedes")
    store.relate(login, postgres, "conflicts_with", status="pending")
    app = make_app(seeded.data_dir)
    async with app.run_test(size=SIZE) as pilot:
        await app.open(ObservationScreen(postgres))
        text = await wait_text(pilot, "superseded by #")
        assert f"superseded by #{newer} (Moved to CockroachDB\\x1b[2J)" in text
        assert f"contested by #{login} (Fixed login timeout) — pending review" in text
        assert "needs review: a pending conflict" in text
        await app.open(ObservationScreen(newer))
        text = await wait_text(pilot, f"supersedes #{postgres}")
        assert "needs review" not in text
