"""``ingest-git`` over a real repository: change sets (a merge carries its branch), bots,
idempotency on one machine and across two, bad input, the CLI's human and JSON output."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from engram.errors import ValidationError
from engram.ingest.git import change_sets, ingest_git, read_commits
from engram.store import Store
from tests.support import run_engram


def test_change_sets_follow_the_main_line_and_a_merge_carries_its_branch(repo) -> None:
    sets = change_sets(read_commits(repo.path, 30))
    titles = [s.title() for s in sets]
    assert titles == [
        "Bump requests from 2.31 to 2.32",
        "Merge pull request #7 from bob/cart",
        "fix: session cookie expired too early",
        "Initial layout",
    ]
    merge = sets[1]
    assert sorted(c.subject for c in merge.branch) == ["Add cart API", "Add cart model"]
    content = merge.content()
    assert "cart/api.py" in content and "cart/model.py" in content
    assert "by Bob" in content and "merge of 2 commits" in content
    assert sets[0].is_bot and not merge.is_bot


def test_ingest_saves_one_memory_per_change_set_and_skips_bots(repo, store: Store) -> None:
    report = ingest_git(store, repo.path, "shop", days=30)
    assert (report.commits_read, report.change_sets, report.skipped_bots) == (6, 4, 1)
    assert [a["title"] for a in report.added] == [
        "Initial layout",
        "fix: session cookie expired too early",
        "Merge pull request #7 from bob/cart",
    ]
    [fix] = [o for o in store.recent_observations("shop") if o.title.startswith("fix:")]
    assert fix.type == "commit" and fix.topic_key.startswith("git/")
    assert "The refresh ran after the check." in fix.content and "auth/session.py" in fix.content
    with_bots = ingest_git(store, repo.path, "shop", days=30, include_bots=True)
    assert [a["title"] for a in with_bots.added] == ["Bump requests from 2.31 to 2.32"]


def test_ingesting_twice_or_on_two_machines_adds_nothing(repo, store: Store, make_store) -> None:
    ingest_git(store, repo.path, "shop", days=30)
    journal = store.db.scalar("SELECT COUNT(*) FROM sync_journal")
    again = ingest_git(store, repo.path, "shop", days=30)
    assert again.added == [] and again.already_present == 3
    assert store.db.scalar("SELECT COUNT(*) FROM sync_journal") == journal

    # A teammate ingests the same history, then the two replicas exchange mutations.
    other = make_store("bob")
    ingest_git(other, repo.path, "shop", days=30)
    records = [e.record for e in other.journal.pending("test", projects=["shop"])]
    store.apply_mutations(records, source="test")
    assert store.count_observations("shop") == 3
    assert ingest_git(store, repo.path, "shop", days=30).added == []


def test_a_window_of_a_century_reads_the_whole_history(repo, store: Store) -> None:
    # git's own "36500 days ago" matched nothing: the window is passed as an absolute date.
    assert len(ingest_git(store, repo.path, "shop", days=36500).added) == 3


def test_an_archived_commit_memory_is_not_brought_back(repo, store: Store) -> None:
    ingest_git(store, repo.path, "shop", days=30)
    [first] = [o for o in store.recent_observations("shop") if o.title == "Initial layout"]
    store.delete_observation(first.id)
    assert ingest_git(store, repo.path, "shop", days=30).added == []


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [({"days": 0}, "between 1"), ({"days": "soon"}, "whole number"), ({"days": True}, "whole")],
)
def test_bad_days_are_refused(repo, store: Store, kwargs, words) -> None:
    with pytest.raises(ValidationError, match=words):
        ingest_git(store, repo.path, "shop", **kwargs)
    assert store.count_observations() == 0


def test_not_a_repository_is_a_clear_error(tmp_path: Path, store: Store) -> None:
    with pytest.raises(ValidationError, match="not inside a git repository"):
        ingest_git(store, tmp_path, "shop")
    with pytest.raises(ValidationError, match="not a directory"):
        ingest_git(store, tmp_path / "missing", "shop")


def test_hostile_messages_and_file_names_are_data(tmp_path: Path, store: Store) -> None:
    from tests.support.ingest import Repo

    home = tmp_path / "h"
    home.mkdir()
    repo = Repo(tmp_path / "odd", home)
    repo.commit("$(rm -rf /) `whoami`; echo \x1f\x1e pwned", {"dir with space/ñ; rm.txt": "x"})
    report = ingest_git(store, repo.path, "odd", days=30)
    [obs] = store.recent_observations("odd")
    assert obs.title.startswith("$(rm -rf /) `whoami`") and "ñ; rm.txt" in obs.content
    assert len(report.added) == 1


def test_cli_ingest_git_human_and_json(repo, tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = run_engram("ingest-git", "--repo", str(repo.path), "--days", "30", data_dir=data)
    assert done.returncode == 0, done.stderr
    assert "3 memories added" in done.stdout and "1 bot change set skipped" in done.stdout
    done = run_engram("ingest-git", "--json", data_dir=data, cwd=repo.path)
    report = orjson.loads(done.stdout)
    assert report["project"] == "shop" and report["already_present"] == 3 and not report["added"]
    bad = run_engram("ingest-git", "--days", "0", "--json", data_dir=data, cwd=repo.path)
    assert bad.returncode == 1 and "between 1" in orjson.loads(bad.stdout)["error"]
