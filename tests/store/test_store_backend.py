"""What both backends share (``store/_backend.py``): the kinds of connection its methods read and write on."""

from __future__ import annotations

from store_backends import Backend

from plangate.store._backend import Backend as SharedMethods


def _count(store: object, what: str) -> int:
    assert isinstance(store, SharedMethods)
    with store._reading(what) as db:
        row = db.one("SELECT count(*) AS n FROM runs")
    assert row is not None
    return int(row["n"])


def test_reads_of_one_record_see_one_moment_while_another_handle_commits(shared_backend: Backend) -> None:
    reader, writer = shared_backend.open(), shared_backend.open()
    try:
        assert isinstance(reader, SharedMethods)
        reader.create_run("formula", "before", {})
        with reader._consistent("two reads") as db:
            first = db.one("SELECT count(*) AS n FROM runs")
            writer.create_run("formula", "meanwhile", {})  # committed between the block's two reads
            second = db.one("SELECT count(*) AS n FROM runs")
        assert first is not None and second is not None
        assert (first["n"], second["n"]) == (1, 1)
        assert _count(reader, "after the block") == 2  # the block's end lets the commit be seen
    finally:
        reader.close()
        writer.close()


def test_plain_reads_see_each_commit_as_it_lands(shared_backend: Backend) -> None:
    reader, writer = shared_backend.open(), shared_backend.open()
    try:
        counts = [_count(reader, "a read")]
        writer.create_run("formula", "one", {})
        counts.append(_count(reader, "a read"))
        assert counts == [0, 1]
    finally:
        reader.close()
        writer.close()
