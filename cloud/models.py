"""The cloud schema as SQLAlchemy Core tables (alembic in ``migrations/`` owns its history; a test
checks that the migrated database matches these definitions exactly).

Groups:

* **log** — ``cloud_mutations`` (the commit-ordered mutation log, exactly-once by ``mid``) and
  ``cloud_chunks`` (chunks pushed through the older chunk routes).
* **read model** — ``cloud_sessions``, ``cloud_observations``, ``cloud_prompts`` and
  ``cloud_relations`` keyed by ``(project, id)``, holding the winning state per entity; ``cloud_tombstones`` remembers hard
  deletes so an older upsert cannot resurrect them. Observations and prompts carry a generated
  ``search`` tsvector with a GIN index. Timestamps inside entities are the store's text
  (``YYYY-MM-DD HH:MM:SS``), copied verbatim from payloads.
* **policy** — ``cloud_project_controls`` (pause), ``cloud_sync_audit_log``.
* **identity** — ``cloud_principals`` (humans and service accounts), ``cloud_principal_tokens``
  (peppered hashes only), ``cloud_project_grants``, ``cloud_auth_audit_log``,
  ``cloud_login_attempts`` (rate limiting — dashboard logins, wrong bearer tokens, member
  heartbeats — kept in PostgreSQL so several server processes share it).
* **fleet** — ``cloud_workers``: the last heartbeat of every client machine, in either
  vocabulary (ours keyed by origin, the first seed's Worker API keyed by hostname).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Computed,
    Double,
    Float,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TIMESTAMP, TSVECTOR

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

TSTZ = TIMESTAMP(timezone=True)
#: The text-search configuration of the read model (stemming, English stop words).
TS_CONFIG = "english"


def _created_at(name: str = "created_at") -> Column:
    return Column(name, TSTZ, nullable=False, server_default=func.now())


# --- log ---------------------------------------------------------------------------------------

mutations = Table(
    "cloud_mutations",
    metadata,
    Column("seq", BigInteger, Identity(), primary_key=True),
    Column("mid", Text, nullable=False),
    Column("record_hash", LargeBinary, nullable=False),
    Column("project", Text, nullable=False),
    Column("entity", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("op", Text, nullable=False),
    Column("hlc", Text, nullable=False),
    Column("origin", Text, nullable=False),
    Column("scope", Text, nullable=False),
    Column("record", Text, nullable=False),  # the record's JSON text, as served by pull
    Column("created_by", Text, nullable=False, server_default=""),
    Column("principal_id", BigInteger),
    Column("source", Text, nullable=False, server_default="mutation_push"),
    _created_at("received_at"),
    # Why the read model leaves this record out (clock_skew: its hlc is beyond the server's
    # clock + drift; see engram_cloud.clocks). NULL for every normal record.
    Column("held", Text),
    UniqueConstraint("mid"),
    Index(None, "project", "seq"),
    Index("ix_cloud_mutations_held", "seq", postgresql_where=text("held IS NOT NULL")),
    Index(None, "project", "entity", "key"),  # a key's records (engram_cloud.purge)
)

chunks = Table(
    "cloud_chunks",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("project", Text, nullable=False),
    Column("chunk_id", Text, nullable=False),
    Column("created_by", Text, nullable=False),
    Column("client_created_at", TSTZ),
    _created_at(),
    Column("payload", Text, nullable=False),  # canonical JSON of the chunk document
    Column("sessions_count", Integer, nullable=False, server_default="0"),
    Column("observations_count", Integer, nullable=False, server_default="0"),
    Column("prompts_count", Integer, nullable=False, server_default="0"),
    Column("mutations_count", Integer, nullable=False, server_default="0"),
    Column("principal_id", BigInteger),
    UniqueConstraint("project", "chunk_id"),
)

# --- read model --------------------------------------------------------------------------------


def _weighted(*parts: tuple[str, str, int]) -> str:
    # Each field is cut to a prefix: a tsvector cannot exceed 1 MiB, and a 1 MiB memory of
    # distinct words would otherwise make its insert fail.
    return " || ".join(
        f"setweight(to_tsvector('{TS_CONFIG}'::regconfig, left(coalesce({col}, ''), {n})), '{w}')"
        for col, w, n in parts
    )


OBSERVATION_SEARCH = _weighted(
    ("title", "A", 10_000),
    ("content", "B", 100_000),
    ("topic_key", "C", 1_000),
    ("type", "C", 200),
    ("tool_name", "D", 1_000),
)
PROMPT_SEARCH = _weighted(("content", "A", 100_000))

sessions = Table(
    "cloud_sessions",
    metadata,
    Column("project", Text, nullable=False),
    Column("id", Text, nullable=False),
    Column("directory", Text, nullable=False, server_default=""),
    Column("started_at", Text, nullable=False),
    Column("ended_at", Text),
    Column("summary", Text),
    Column("hlc", Text, nullable=False),  # '' for a stub that only holds a place
    Column("contributor", Text, nullable=False, server_default=""),
    Column("applied_at", TSTZ, nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("project", "id"),
    Index(None, "project", "started_at"),
)

observations = Table(
    "cloud_observations",
    metadata,
    Column("project", Text, nullable=False),
    Column("sync_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("type", Text, nullable=False),
    Column("title", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("tool_name", Text),
    Column("scope", Text, nullable=False, server_default="project"),
    Column("topic_key", Text),
    Column("revision_count", Integer, nullable=False, server_default="1"),
    Column("duplicate_count", Integer, nullable=False, server_default="1"),
    Column("last_seen_at", Text),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("deleted_at", Text),
    Column("hlc", Text, nullable=False),
    Column("contributor", Text, nullable=False, server_default=""),
    Column("applied_at", TSTZ, nullable=False, server_default=func.now()),
    Column("search", TSVECTOR, Computed(OBSERVATION_SEARCH, persisted=True)),
    # The user's intent that travels with a memory (docs/importance.md; migration 0007).
    Column("pinned", Boolean, nullable=False, server_default=text("false")),
    Column("importance_override", Double),
    Column("valid_from", Text),
    Column("valid_to", Text),
    Column("delete_reason", Text),
    Column("superseded_by", Text),
    Column("reviewed_at", Text),
    PrimaryKeyConstraint("project", "sync_id"),
    Index(None, "project", "created_at"),
    Index(None, "project", "session_id"),
    Index("ix_cloud_observations_search", "search", postgresql_using="gin"),
    Index(
        "ix_cloud_observations_live",
        "project",
        text("created_at DESC"),
        postgresql_where=text("deleted_at IS NULL"),
    ),
)

prompts = Table(
    "cloud_prompts",
    metadata,
    Column("project", Text, nullable=False),
    Column("sync_id", Text, nullable=False),
    Column("session_id", Text, nullable=False),
    Column("content", Text, nullable=False),
    Column("created_at", Text, nullable=False),
    Column("hlc", Text, nullable=False),
    Column("contributor", Text, nullable=False, server_default=""),
    Column("applied_at", TSTZ, nullable=False, server_default=func.now()),
    Column("search", TSVECTOR, Computed(PROMPT_SEARCH, persisted=True)),
    PrimaryKeyConstraint("project", "sync_id"),
    Index(None, "project", "session_id"),
    Index(None, "project", "created_at"),
    Index("ix_cloud_prompts_search", "search", postgresql_using="gin"),
)

relations = Table(
    # Relations between two memories of one project (issue 20). Endpoints are memory sync ids
    # of the row's own project; nothing requires them to be here yet (a relation whose memory
    # has not arrived is kept and shown once it does), so no relation reaches another project.
    "cloud_relations",
    metadata,
    Column("project", Text, nullable=False),
    Column("sync_id", Text, nullable=False),
    Column("scope", Text, nullable=False, server_default="project"),
    Column("source_id", Text, nullable=False),
    Column("target_id", Text, nullable=False),
    Column("relation", Text, nullable=False),
    Column("reason", Text),
    Column("evidence", Text),
    Column("confidence", Float),
    Column("judgment_status", Text, nullable=False, server_default="pending"),
    Column("marked_by_actor", Text),
    Column("marked_by_kind", Text),
    Column("marked_by_model", Text),
    Column("session_id", Text),
    Column("superseded_at", Text),
    Column("superseded_by_relation_id", Text),
    Column("created_at", Text, nullable=False),
    Column("updated_at", Text, nullable=False),
    Column("hlc", Text, nullable=False),
    Column("contributor", Text, nullable=False, server_default=""),
    Column("applied_at", TSTZ, nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("project", "sync_id"),
    Index(None, "project", "source_id"),
    Index(None, "project", "target_id"),
)

tombstones = Table(
    "cloud_tombstones",
    metadata,
    Column("project", Text, nullable=False),
    Column("entity", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("hlc", Text, nullable=False),
    Column("deleted_at", Text),
    PrimaryKeyConstraint("project", "entity", "key"),
)

# --- policy ------------------------------------------------------------------------------------

project_controls = Table(
    "cloud_project_controls",
    metadata,
    Column("project", Text, primary_key=True),
    Column("sync_enabled", Boolean, nullable=False, server_default=text("true")),
    Column("paused_reason", Text),
    Column("updated_by", Text),
    Column("updated_at", TSTZ, nullable=False, server_default=func.now()),
)

sync_audit_log = Table(
    "cloud_sync_audit_log",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    _created_at("occurred_at"),
    Column("contributor", Text, nullable=False),
    Column("project", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("entry_count", Integer, nullable=False, server_default="0"),
    Column("reason_code", Text),
    Column("principal_id", BigInteger),
    Column("metadata", JSONB),
    Index("ix_cloud_sync_audit_log_occurred_at", text("occurred_at DESC")),
    Index(None, "contributor", "project"),
    Index(None, "outcome"),
)

# --- identity ----------------------------------------------------------------------------------

principals = Table(
    "cloud_principals",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("kind", Text, nullable=False),
    Column("username", Text, nullable=False),
    Column("email", Text),
    Column("display_name", Text, nullable=False),
    Column("role", Text, nullable=False, server_default="member"),
    Column("enabled", Boolean, nullable=False, server_default=text("true")),
    _created_at(),
    Column("updated_at", TSTZ, nullable=False, server_default=func.now()),
    UniqueConstraint("username"),
    UniqueConstraint("email"),
    CheckConstraint("kind IN ('human', 'service_account')", name="kind"),
    CheckConstraint("role IN ('admin', 'member')", name="role"),
)

principal_tokens = Table(
    "cloud_principal_tokens",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column(
        "principal_id",
        BigInteger,
        ForeignKey("cloud_principals.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("token_prefix", Text, nullable=False),
    Column("token_hash", LargeBinary, nullable=False),
    Column("name", Text, nullable=False, server_default=""),
    Column("created_by_principal_id", BigInteger),
    _created_at(),
    Column("last_used_at", TSTZ),
    Column("revoked_at", TSTZ),
    Column("revoked_by_principal_id", BigInteger),
    Column("revocation_reason", Text),
    UniqueConstraint("token_hash"),
    Index(None, "principal_id"),
)

project_grants = Table(
    "cloud_project_grants",
    metadata,
    Column(
        "principal_id",
        BigInteger,
        ForeignKey("cloud_principals.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("project", Text, nullable=False),  # a project name, or * for every allowed project
    Column("granted_by_principal_id", BigInteger),
    _created_at(),
    PrimaryKeyConstraint("principal_id", "project"),
)

auth_audit_log = Table(
    "cloud_auth_audit_log",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    _created_at("occurred_at"),
    Column("actor_principal_id", BigInteger),
    Column("actor_source", Text, nullable=False),
    Column("target_principal_id", BigInteger),
    Column("project", Text),
    Column("action", Text, nullable=False),
    Column("outcome", Text, nullable=False),
    Column("reason_code", Text),
    Column("metadata", JSONB),
    Index("ix_cloud_auth_audit_log_occurred_at", text("occurred_at DESC")),
)

login_attempts = Table(
    "cloud_login_attempts",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("key", Text, nullable=False),  # what is rate-limited: a client address, a username…
    _created_at("attempted_at"),
    Column("succeeded", Boolean, nullable=False, server_default=text("false")),
    Index(None, "key", "attempted_at"),
)

# --- fleet -------------------------------------------------------------------------------------

workers = Table(
    "cloud_workers",
    metadata,
    # The machine's database id: the first seed's ``worker_id`` / ``id``, whichever shape of
    # heartbeat created the record.
    Column("id", BigInteger, Identity(), primary_key=True),
    # Which vocabulary keys the record: ``engram`` (our clients: by ``origin``, the hostname is
    # only a display name) or ``seed`` (the first seed's workers: by ``hostname``, no origin).
    Column("kind", Text, nullable=False, server_default="engram"),
    Column("origin", Text),
    Column("hostname", Text, nullable=False),
    Column("version", Text, nullable=False, server_default=""),
    Column("projects", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    Column("pending", Integer, nullable=False, server_default="0"),
    Column("quarantined", Integer, nullable=False, server_default="0"),
    Column("last_push_at", TSTZ),
    Column("last_pull_at", TSTZ),
    Column("last_seen_at", TSTZ, nullable=False, server_default=func.now()),
    _created_at("first_seen_at"),
    Column("status", Text, nullable=False, server_default="online"),
    Column("principal_id", BigInteger),
    Column("principal_name", Text, nullable=False, server_default=""),
    # Who created the record ("principal:<id>" or a legacy credential's source): only that
    # principal's heartbeats may update it ('' = unknown, claimed by the next heartbeat).
    Column("owner", Text, nullable=False, server_default=""),
    # What the first seed's heartbeat reports (NULL for machines that never sent one).
    Column("tailscale_ip", Text),
    Column("local_ip", Text),
    Column("ram_gb", Double),
    Column("gpu_type", Text),
    CheckConstraint(
        "kind IN ('engram', 'seed') AND (kind = 'engram') = (origin IS NOT NULL)", name="kind"
    ),
    Index(None, "origin", unique=True),
    Index(
        "ix_cloud_workers_seed_hostname",
        "hostname",
        unique=True,
        postgresql_where=text("kind = 'seed'"),
    ),
    Index(None, "hostname"),
)

READ_MODEL_TABLES = (sessions, observations, prompts, relations, tombstones)
ENTITY_TABLES = {
    "session": sessions,
    "observation": observations,
    "prompt": prompts,
    "relation": relations,
}
ENTITY_KEY = {"session": "id", "observation": "sync_id", "prompt": "sync_id", "relation": "sync_id"}
