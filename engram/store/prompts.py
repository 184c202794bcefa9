"""User prompts: what the human asked, saved so later sessions know the why behind the what."""

from __future__ import annotations

from typing import Any

from engram.errors import NotFoundError, ValidationError
from engram.project import project_name
from engram.record import new_key
from engram.secrets import redact_secrets
from engram.store import fts
from engram.store.base import StoreBase, default_session_id
from engram.store.models import Prompt
from engram.store.search_context import ContextRefresh
from engram.store.sessions import check_session_id
from engram.text import require_storable, strip_private, truncate
from engram.times import now_text


class PromptsMixin(StoreBase):
    def add_prompt(
        self,
        content: str,
        *,
        session_id: str | None = None,
        project: str | None = "",
        allow_secrets: bool = False,
    ) -> Prompt:
        """Save what the user asked. Detected secrets become ``[REDACTED:kind]`` (the stored
        text shows it) unless ``allow_secrets``."""
        require_storable(content, "content")
        require_storable(project, "project")
        text = strip_private(content or "")
        if not allow_secrets:
            text = redact_secrets(text).text
        if not text:
            raise ValidationError("content is required and cannot be empty", field="content")
        text = truncate(text, self.config.max_observation_length).text
        project = self._write_project(project_name(project), session_id)
        session_id = check_session_id(session_id) if session_id else default_session_id(project)
        sync_id = new_key("prompt-")
        with self.db.write() as conn:
            self._ensure_session(conn, session_id, project)
            hlc, origin = self.journal.tick(conn)
            cursor = conn.execute(
                """INSERT INTO user_prompts(sync_id, session_id, content, project, created_at, hlc)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                (sync_id, session_id, text, project, now_text(), hlc),
            )
            rowid = int(cursor.lastrowid or 0)
            fts.add(conn, "user_prompts", rowid, {"content": text, "project": project})
            refresh = ContextRefresh(conn)
            refresh.prompt(rowid)  # memories saved after it in this second now see it
            refresh.settle()
            self._journal_state(conn, "prompt", project, sync_id, hlc, origin)
            row = conn.execute("SELECT * FROM user_prompts WHERE id = ?", (rowid,)).fetchone()
        return Prompt.from_row(row)

    def get_prompt(self, prompt_id: Any) -> Prompt:
        try:
            pid = int(prompt_id)
        except (TypeError, ValueError):
            raise ValidationError(f"invalid prompt id {prompt_id!r}", field="id") from None
        row = self.db.one("SELECT * FROM user_prompts WHERE id = ?", (pid,))
        if row is None:
            raise NotFoundError(f"prompt #{pid} not found")
        return Prompt.from_row(row)

    def recent_prompts(
        self, project: str | None = None, limit: int = 20, *, offset: int = 0
    ) -> list[Prompt]:
        clauses, params = ["1"], []
        if project:
            clauses.append("project = ?")
            params.append(project_name(project))
        rows = self.db.rows(
            f"""SELECT * FROM user_prompts WHERE {" AND ".join(clauses)}
                ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?""",
            [*params, max(1, int(limit)), max(0, int(offset))],
        )
        return [Prompt.from_row(r) for r in rows]

    def delete_prompt(self, prompt_id: Any) -> Prompt:
        prompt = self.get_prompt(prompt_id)
        with self.db.write() as conn:
            old = self._state(conn, "prompt", prompt.project, prompt.sync_id)
            if old is None:
                raise NotFoundError(f"prompt #{prompt.id} not found")
            hlc, origin = self.journal.tick(conn)
            refresh = ContextRefresh(conn)
            refresh.prompt(prompt.id)
            fts.remove(conn, "user_prompts", "id", prompt.id)
            conn.execute("DELETE FROM user_prompts WHERE id = ?", (prompt.id,))
            refresh.settle()
            self._journal_hard_delete(conn, "prompt", old, now_text(), hlc, origin)
        return prompt
