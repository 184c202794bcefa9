"""The local SQLite store: schema and migrations, sessions, observations, prompts, search,
context, the replication journal, and applying mutations from other replicas."""

from engram.store.models import (
    ApplyResult,
    History,
    ImportResult,
    MergeResult,
    Observation,
    PassiveResult,
    ProjectInfo,
    Prompt,
    PruneResult,
    Revision,
    SaveResult,
    Session,
    Stats,
    Timeline,
)
from engram.store.store import Store

__all__ = [
    "ApplyResult",
    "History",
    "ImportResult",
    "MergeResult",
    "Observation",
    "PassiveResult",
    "ProjectInfo",
    "Prompt",
    "PruneResult",
    "Revision",
    "SaveResult",
    "Session",
    "Stats",
    "Store",
    "Timeline",
]
