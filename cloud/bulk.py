"""Set-based statements over arrays: a whole batch is one statement whose text does not depend
on the batch size (``INSERT … SELECT … FROM unnest(:col0, :col1, …)``), so it is built once,
prepared once by psycopg, and its arrays travel in PostgreSQL's binary format (``%(name)b``: no
per-element text escaping, which dominated the cost of large batches).

Table and column names come from :mod:`engram_cloud.models` (never from input); every value
travels as a bound array parameter. Statements go through SQLAlchemy's ``exec_driver_sql``, so
they run in the caller's transaction and driver errors arrive wrapped as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Row, Table
from sqlalchemy.dialects import postgresql

_DIALECT = postgresql.dialect()


def _sql_type(table: Table, column: str) -> str:
    return table.c[column].type.compile(dialect=_DIALECT)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _unnest(table: Table, columns: Sequence[str]) -> str:
    arrays = ", ".join(f"CAST(%(a{i})b AS {_sql_type(table, c)}[])" for i, c in enumerate(columns))
    names = ", ".join(_quote(c) for c in columns)
    return f"unnest({arrays}) WITH ORDINALITY AS u({names}, ord)"


def _params(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> dict[str, list[Any]]:
    return {f"a{i}": [row[c] for row in rows] for i, c in enumerate(columns)}


@lru_cache(maxsize=128)
def _insert_sql(
    table: Table,
    columns: tuple[str, ...],
    conflict: tuple[str, ...],
    update: tuple[str, ...],
    touch: str | None,
    returning: tuple[str, ...],
) -> str:
    names = ", ".join(_quote(c) for c in columns)
    sql = f"INSERT INTO {_quote(table.name)} ({names}) SELECT {names} FROM {_unnest(table, columns)} ORDER BY ord"
    if conflict:
        target = ", ".join(_quote(c) for c in conflict)
        sets = [f"{_quote(c)} = EXCLUDED.{_quote(c)}" for c in update]
        if touch:
            sets.append(f"{_quote(touch)} = now()")
        sql += f" ON CONFLICT ({target}) DO " + (
            f"UPDATE SET {', '.join(sets)}" if sets else "NOTHING"
        )
    if returning:
        sql += " RETURNING " + ", ".join(_quote(c) for c in returning)
    return sql


def insert(
    conn: Connection,
    table: Table,
    rows: Sequence[dict[str, Any]],
    *,
    conflict: tuple[str, ...] = (),
    touch: str | None = None,
    returning: tuple[str, ...] = (),
) -> list[Row[*tuple[Any, ...]]]:
    """Insert ``rows`` (dicts with the same keys) in their order. With ``conflict``, an
    existing row is updated with every other column (and ``touch`` set to now())."""
    if not rows:
        return []
    columns = tuple(rows[0])
    update = tuple(c for c in columns if c not in conflict)
    sql = _insert_sql(table, columns, conflict, update, touch, returning)
    result = conn.exec_driver_sql(sql, _params(rows, columns))
    return list(result) if returning else []


@lru_cache(maxsize=128)
def _match_sql(table: Table, keys: tuple[str, ...], select: tuple[str, ...], delete: bool) -> str:
    on = " AND ".join(f"t.{_quote(k)} = u.{_quote(k)}" for k in keys)
    source = _unnest(table, keys)
    if delete:
        return f"DELETE FROM {_quote(table.name)} t USING {source} WHERE {on}"
    columns = ", ".join(f"t.{_quote(c)}" for c in select)
    return f"SELECT {columns} FROM {_quote(table.name)} t JOIN {source} ON {on}"


def select_matching(
    conn: Connection,
    table: Table,
    keys: tuple[str, ...],
    values: Sequence[tuple[Any, ...]],
    columns: tuple[str, ...],
) -> list[Row[*tuple[Any, ...]]]:
    """``columns`` of the rows whose ``keys`` equal one of ``values``."""
    if not values:
        return []
    rows = [dict(zip(keys, v, strict=True)) for v in values]
    return list(conn.exec_driver_sql(_match_sql(table, keys, columns, False), _params(rows, keys)))


def delete_matching(
    conn: Connection, table: Table, keys: tuple[str, ...], values: Sequence[tuple[Any, ...]]
) -> None:
    """Delete the rows whose ``keys`` equal one of ``values``."""
    if values:
        rows = [dict(zip(keys, v, strict=True)) for v in values]
        conn.exec_driver_sql(_match_sql(table, keys, (), True), _params(rows, keys))
