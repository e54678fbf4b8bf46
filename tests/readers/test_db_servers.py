"""The real servers the database tests run against hold nr-llm's events table as
nr-llm declares it, loaded with the sample's rows."""

from __future__ import annotations

import pytest
from db_servers import EVENTS_TABLE, MariaDB, PostgreSQL, Server, as_event_rows, create_events_table, load_events
from site_helpers import SAMPLE, read_jsonl

pytestmark = pytest.mark.db


def loaded(server: Server) -> list[dict[str, object]]:
    rows = as_event_rows(read_jsonl(SAMPLE))
    create_events_table(server)
    load_events(server, rows)
    return rows


def test_mariadb_holds_the_sample_with_nr_llms_column_types(mariadb: MariaDB) -> None:
    rows = loaded(mariadb)
    count, runs, duration = (
        mariadb.sql(f"SELECT COUNT(*), COUNT(DISTINCT run), SUM(duration_ms) FROM {EVENTS_TABLE}")
        .decode()
        .splitlines()[1]
        .split("\t")
    )
    assert int(count) == len(rows)
    assert int(runs) == len({row["run"] for row in rows})
    assert duration == f"{sum(int(row['duration_ms'].replace('.', '')) for row in rows) / 100:.2f}"
    types = mariadb.sql(f"SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
                        f"WHERE TABLE_NAME = '{EVENTS_TABLE}'").decode()
    assert "duration_ms\tdecimal(10,2)" in types and "payload\tmediumtext" in types and "kind\tvarchar(32)" in types


def test_postgresql_holds_the_sample_with_the_counterpart_types(postgresql: PostgreSQL) -> None:
    rows = loaded(postgresql)
    out = postgresql.sql(f"\\pset format unaligned\n\\pset tuples_only on\n"
                         f"SELECT COUNT(*), COUNT(DISTINCT run) FROM {EVENTS_TABLE};").decode().strip()
    assert out == f"{len(rows)}|{len({row['run'] for row in rows})}"
    payloads = postgresql.sql(f"\\pset format unaligned\n\\pset tuples_only on\n"
                              f"SELECT payload FROM {EVENTS_TABLE} ORDER BY uid;").decode().splitlines()
    assert payloads == [row["payload"] for row in rows], "payload texts come back byte for byte"


def test_without_the_packages_the_database_tests_skip_and_say_which(monkeypatch: pytest.MonkeyPatch) -> None:
    from db_servers import require_server

    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install mariadb-server"):
        require_server("MariaDB", ["/nonexistent/mariadbd"], "mariadb-server")


def test_under_ci_missing_packages_fail_the_database_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    from db_servers import require_server

    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="postgresql"):
        require_server("PostgreSQL", ["/nonexistent/postgres"], "postgresql")
