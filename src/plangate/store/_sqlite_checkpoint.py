"""Checkpoints of a SQLite store's write-ahead log, made by a thread of their own, off the commit path.

For: ``Checkpointer``. SQLite folds the log back into the database file (a checkpoint, which syncs both to
disk) in the connection that commits, once the log has grown past a thousand pages: that one commit then
waits for two fsyncs, milliseconds among commits of tens of microseconds (a formula chain of 1,000 steps
met three or four of them). The store turns that off on its write connection and has this thread
checkpoint instead, after every ``every`` commits, in ``PASSIVE`` mode: it never waits for a writer or a
reader, nor holds one up. What a commit promises is unchanged: it is in the log, synced or not, either way.

The log starts over from its beginning (rather than growing) at the first commit after a checkpoint that
folded all of it in. While commits never stop (a busy server, a long chain of quick steps), no checkpoint
made beside them ever does: each ends a few commits behind. So once a checkpoint finds the log past
``MAX_LOG_FRAMES``, the next commit folds in the few frames committed since, itself (two syncs, in one
commit of thousands), and the one after starts the log over. Not for: ``VACUUM`` (``SQLiteStore._compact``),
or a store in memory (it has no log).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger("plangate.store")

#: Commits between two checkpoints: about the thousand pages at which SQLite would make one itself.
CHECKPOINT_EVERY = 256

#: The frames (pages) the log may hold at a checkpoint before the next commit folds in the rest and the log
#: starts over: 16 MiB of 4 KiB pages, a few checkpoints' worth.
MAX_LOG_FRAMES = 4096


class Checkpointer:
    """Checkpoints the log of the SQLite file ``path`` in a daemon thread, woken every ``every`` commits
    (started at the first checkpoint due: a store that commits little never starts it).

    ``committed`` is called by the store after each of its commits, under its write lock.
    """

    def __init__(
        self, path: Path, busy_timeout: float, every: int | None = None, max_frames: int | None = None
    ) -> None:
        self._path = path
        self._busy_timeout = busy_timeout
        self._every = CHECKPOINT_EVERY if every is None else every
        self._max_frames = MAX_LOG_FRAMES if max_frames is None else max_frames
        self._commits = 0
        self._catch_up = False  # the last checkpoint found the log too long: the next commit folds the rest
        self._due = threading.Event()
        self._working = threading.Lock()  # held while a checkpoint is made, and by ``paused``
        self._closed = False
        self._thread: threading.Thread | None = None

    def committed(self, conn: sqlite3.Connection) -> None:
        """One more commit, made on ``conn`` (the store's write connection, under its write lock); past
        ``every`` of them, a checkpoint is due. When the last checkpoint found the log too long, ``conn``
        first folds in what was committed since (``MAX_LOG_FRAMES``)."""
        if self._catch_up:
            self._catch_up = False  # once: the next checkpoint asks again if the log is still too long
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error as exc:  # the commit stands; the log stays long until the next try
                logger.warning("a checkpoint of %s failed: %s", self._path, exc)
        self._commits += 1
        if self._commits < self._every or self._closed:
            return
        self._commits = 0
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="plangate-checkpoint", daemon=True)
            self._thread.start()
        self._due.set()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No checkpoint of this thread's in this block (waiting for the one being made, if any): for work
        on the whole log, a ``VACUUM`` and the checkpoint that truncates the log after it."""
        with self._working:
            yield

    def close(self) -> None:
        """Stop the thread (after the checkpoint it is making, if any); closing twice is harmless."""
        self._closed = True
        self._due.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(str(self._path), timeout=self._busy_timeout, isolation_level=None)
        except sqlite3.Error as exc:
            logger.warning("no checkpoints of %s: %s (SQLite makes them itself on close)", self._path, exc)
            return
        try:
            while True:
                self._due.wait()
                self._due.clear()
                if self._closed:
                    return
                try:
                    self.fold(conn)
                except sqlite3.Error as exc:  # the next one is tried after the next ``every`` commits
                    logger.warning("a checkpoint of %s failed: %s", self._path, exc)
        finally:
            conn.close()

    def fold(self, conn: sqlite3.Connection) -> None:
        """One checkpoint beside the store's commits, on ``conn`` (this thread's own connection); when it
        found the log too long, the next commit folds in the rest."""
        with self._working:
            _, logged, _ = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        self._catch_up = logged > self._max_frames


__all__ = ["CHECKPOINT_EVERY", "MAX_LOG_FRAMES", "Checkpointer"]
