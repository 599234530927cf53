"""The store on Citus (distributed PostgreSQL): detected, and distributed by itself.

A database with the ``citus`` extension is a Citus coordinator (or worker). Opened
there, the store runs its migrations as on plain PostgreSQL and then places every
table of its schema that is not placed yet (so a later migration's new table is
placed by the open that creates it): the tables that hold a namespace's data are
distributed by ``namespace`` and co-located with ``records`` (one namespace, one
shard), the global ones are reference tables (a copy on every node), and the
store's own bookkeeping stays on the coordinator. What changes on Citus besides
(docs/postgres.md, "On Citus"): no row triggers (Citus refuses to distribute a table
with triggers, and a trigger would run on the worker, stamping the worker's
transaction ids), so the change tracking of m009 is not installed and the
per-process scope copy that reads it is off: every search runs by SQL.
"""

from __future__ import annotations

from erstwhile.domain.errors import InvalidInput
from erstwhile.store.postgres.connection import Connection

#: Global and small: a copy on every node, joined in the shard's own task.
REFERENCE = ("namespaces", "tokens")
#: The store's bookkeeping, read and written by the coordinator only (job ids and
#: migration versions are global, and no statement joins them to a namespace's data).
LOCAL = ("jobs", "schema_migrations")
#: Distributed first: the other tables' foreign keys point at these.
FIRST = ("records", "record_past")


def active(conn: Connection) -> bool:
    """Whether this database is a Citus one. A worker is refused: the store's DDL and
    its key claims (advisory locks) belong on the coordinator."""
    row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone()
    if row is None:
        return False
    coordinator = conn.execute("SELECT citus_is_coordinator()").fetchone()
    if not coordinator or not coordinator[0]:
        raise InvalidInput(
            "storage url: this is a Citus worker node; open the store on the coordinator "
            "(Citus routes each namespace's statements to its worker from there)"
        )
    return True


def _tables(conn: Connection) -> list[str]:
    """The store schema's tables that Citus does not place yet, but those that stay
    on the coordinator (:data:`LOCAL`)."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace"
        " AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND NOT EXISTS"
        " (SELECT 1 FROM pg_dist_partition d WHERE d.logicalrelid = c.oid) ORDER BY c.relname"
    ).fetchall()
    return [str(row[0]) for row in rows if str(row[0]) not in LOCAL]


def unplaced(conn: Connection) -> bool:
    """Whether a table of the store still waits to be placed (a cheap check)."""
    return bool(_tables(conn))


def distribute(conn: Connection) -> list[str]:
    """Places every table of the store's schema not placed yet (in the migrations'
    transaction). Returns their names."""
    pending = _tables(conn)
    first = [table for table in FIRST if table in pending]
    order = first + [table for table in pending if table not in FIRST]
    # each name qualified by the server (format's %I), in the store's own schema
    qualified = "format('%%I.%%I', current_schema(), %s::text)"
    for table in order:
        if table in REFERENCE:
            conn.execute(f"SELECT create_reference_table({qualified}::regclass)", (table,))
        elif table == "records":
            conn.execute(
                f"SELECT create_distributed_table({qualified}::regclass, 'namespace')", (table,)
            )
        else:
            conn.execute(
                f"SELECT create_distributed_table({qualified}::regclass, 'namespace',"
                f" colocate_with => {qualified})",
                (table, "records"),
            )
    return order


def placement(conn: Connection) -> dict[str, tuple[str, int]]:
    """Each placed table of the store's schema: ``("distributed" | "reference",
    colocation id)`` (for tests and inspection)."""
    rows = conn.execute(
        "SELECT c.relname, d.partmethod, d.colocationid, d.repmodel FROM pg_dist_partition d"
        " JOIN pg_class c ON c.oid = d.logicalrelid"
        " WHERE c.relnamespace = current_schema()::regnamespace"
    ).fetchall()
    kinds = {"h": "distributed", "n": "reference"}
    return {
        str(name): (kinds.get(str(method), f"other ({method})"), int(colocation))
        for name, method, colocation, _ in rows
    }
