"""Where the Go tool is lenient, so is the HTTP API (issue 16): hooks written for it send
``?limit=oops`` or ``?hard=maybe`` and get the default, not a 400. What it refuses (a
non-numeric ``observation_id``) stays refused."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from engram.http.lenient import go_bool, whole_number


def save(client: TestClient, n: int, session: str = "s-1") -> int:
    response = client.post(
        "/observations",
        json={"title": f"note {n}", "content": f"lenient body {n}", "session_id": session,
              "project": "acme"},
    )  # fmt: skip
    assert response.status_code == 201, response.text
    return response.json()["id"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, 7), ("oops", 7), ("", 7), ("0", 7), ("-3", 7), ("+4", 4), ("4", 4),
        (" 4", 7), ("4.5", 7), ("١٢", 7), ("99999", 50), ("9" * 40, 7),
    ],
)  # fmt: skip
def test_counts_are_read_as_the_go_tool_reads_them(raw, expected) -> None:
    assert whole_number(raw, 7, 50) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("1", True), ("T", True), ("True", True), ("TRUE", True), ("t", True),
     ("maybe", False), ("yes", False), ("", False), (None, False), ("false", False),
     (" true", False)],
)  # fmt: skip
def test_flags_are_read_as_strconv_parsebool(raw, expected) -> None:
    assert go_bool(raw) is expected


def test_odd_limits_give_the_default(client: TestClient) -> None:
    for n in range(25):
        save(client, n)
    assert len(client.get("/observations/recent?limit=oops").json()) == 20
    assert len(client.get("/observations/recent?limit=-3").json()) == 20
    assert len(client.get("/observations/recent?limit=2").json()) == 2
    page = client.get("/observations?limit=0").json()
    assert page["limit"] == 20 and len(page["observations"]) == 20
    assert client.get("/observations?limit=99999999").json()["limit"] == 1000  # the maximum
    assert len(client.get("/search?q=lenient&limit=abc").json()) == 10
    assert len(client.get("/search?q=lenient&limit=3").json()) == 3
    assert len(client.get("/sessions/recent?limit=-3").json()) == 1
    client.post("/prompts", json={"content": "why lenient?", "session_id": "s-1"})
    assert len(client.get("/prompts/recent?limit=zz").json()) == 1
    assert len(client.get("/prompts/search?q=lenient&limit=zz").json()) == 1


def test_timeline_counts_and_entries(client: TestClient) -> None:
    ids = [save(client, n) for n in range(8)]
    body = client.get(f"/timeline?observation_id={ids[6]}&before=x&after=-1").json()
    assert [e["id"] for e in body["before"]] == ids[1:6]  # the default 5
    assert [e["id"] for e in body["after"]] == [ids[7]]
    # entries carry the observation's fields, as the Go tool's do, plus is_focus
    entry = body["before"][-1]
    assert entry["is_focus"] is False
    focus = {k: v for k, v in client.get(f"/observations/{ids[5]}").json().items()}
    assert {k: entry[k] for k in focus} == focus
    assert client.get("/timeline?observation_id=abc").status_code == 400


def test_hard_is_true_only_for_what_parsebool_calls_true(client: TestClient) -> None:
    soft, hard = save(client, 1), save(client, 2)
    maybe = client.delete(f"/observations/{soft}?hard=maybe")
    assert maybe.status_code == 200 and maybe.json()["hard_delete"] is False
    one = client.delete(f"/observations/{hard}?hard=1")
    assert one.status_code == 200 and one.json()["hard_delete"] is True
    exported = client.get("/export").json()["observations"]
    assert [o["id"] for o in exported] == [soft]  # soft-deleted, still there; the other gone
    assert exported[0]["deleted_at"] is not None
