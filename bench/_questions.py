"""The question sets of the ask-your-data benchmark: TOML files loaded into typed, validated records.

``bench/ask_questions/*.toml`` holds the questions with their gold SQL (the file headers say the format and
how a turn is scored); ``fanout/`` holds questions that cross a one-to-many join, and ``heldout/`` a set
written before the copilot was tuned for them and never tuned on (its figures are the ones that count).
This module reads a file, checks every entry (an error names the file and the question) and runs gold SQL
read-only through plangate's own data source, so the gold rows the benchmark compares with come through
the same guard as the copilot's queries. It is not the scorer
(``_scoring.py``) and it runs no turn (the benchmark script does).

    python bench/_questions.py      # check every question file and print its counts per kind
"""

from __future__ import annotations

import re
import sys
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, cast, get_args

from plangate.errors import UserError
from plangate.tools.data import DataSource, DataSources, QueryLimits, QueryResult

QUESTIONS_DIR = Path(__file__).resolve().with_name("ask_questions")
GROUPS = ("", "fanout", "heldout")
"""The folders of ``QUESTIONS_DIR`` that hold question files: the tuned sets (the folder itself), the fan-out
questions and the held-out set. A set's label is ``<group>/<name>`` (``heldout/shop``), or its name alone."""

Kind = Literal[
    "count", "sum", "avg", "min_max", "ratio", "group_by", "top_n", "date_filter", "join2", "join3", "no_data"
]
"""What a question mainly exercises. One kind per question: a "top 3 regions in 2025" question is a top_n
question that also filters dates and joins; its kind is the one it was written for."""
Expect = Literal["rows", "no_data"]
KINDS: tuple[str, ...] = get_args(Kind)
EXPECTS: tuple[str, ...] = get_args(Expect)
MAX_PRECISION = 6

_ID = re.compile(r"[a-z0-9][a-z0-9-]*\Z")
_TOP_KEYS = frozenset({"name", "database", "questions"})
_REQUIRED = ("id", "question", "kind", "gold_sql")
_OPTIONAL = frozenset({"expect", "ordered", "precision", "gold_columns", "note"})
_Fail = Callable[[str], "QuestionFileError"]
"""Makes the error for one entry from a message (the entry's file and id are already in it)."""


class QuestionFileError(UserError):
    """A question file cannot be read, or one of its entries is wrong.

    Attributes:
        path: the file.
        question: the entry at fault as the message names it (``'orders-2024'``, or ``entry 3`` when it
            has no usable id), or ``None`` for the file as a whole.
    """

    def __init__(self, path: Path, message: str, *, question: str | None = None) -> None:
        self.path = path
        self.question = question
        where = f"{path}: question {question}: " if question else f"{path}: "
        super().__init__(where + message)


@dataclass(frozen=True, slots=True)
class Question:
    """One benchmark question.

    Attributes:
        id: unique within its file (lower-case words joined by ``-``).
        question: what a person would type.
        kind: what it mainly exercises (:data:`Kind`).
        gold_sql: the SQLite query whose result is the right answer.
        expect: ``rows``, or ``no_data`` for a period the data does not cover.
        ordered: the order of the rows is part of the answer.
        precision: decimals to which numbers must agree.
        gold_columns: the result columns that are the answer (empty: all of them).
        note: why the gold answer is what it is.
    """

    id: str
    question: str
    kind: Kind
    gold_sql: str
    expect: Expect = "rows"
    ordered: bool = False
    precision: int = 2
    gold_columns: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True, slots=True)
class QuestionSet:
    """The questions of one file, about one database.

    Attributes:
        name: the data source name the copilot registers the database under (its file stem).
        path: the question file.
        database: the SQLite file, resolved against the question file's folder.
        questions: in file order.
        group: the folder of ``GROUPS`` it is in (``""``, ``fanout``, ``heldout``).
    """

    name: str
    path: Path
    database: Path
    questions: tuple[Question, ...]
    group: str = ""

    @property
    def label(self) -> str:
        """``heldout/shop`` for a set of a group, the name alone for a tuned set."""
        return f"{self.group}/{self.name}" if self.group else self.name

    def get(self, question_id: str) -> Question:
        """The question with this id.

        Raises:
            QuestionFileError: no such id in this file.
        """
        for question in self.questions:
            if question.id == question_id:
                return question
        raise QuestionFileError(self.path, f"no question with id {question_id!r}")

    def kinds(self) -> Counter[str]:
        """How many questions there are of each kind."""
        return Counter(question.kind for question in self.questions)


def load_question_set(path: str | Path) -> QuestionSet:
    """Read and check one question file.

    Raises:
        QuestionFileError: the file is unreadable or not TOML, a key is unknown or missing, a value has the
            wrong type or is not one of the allowed values, an id repeats, or the database is not there.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise QuestionFileError(path, f"cannot read the file ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise QuestionFileError(path, f"not valid TOML: {exc}") from None
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        expected = ", ".join(sorted(_TOP_KEYS))
        raise QuestionFileError(path, f"unknown top-level key {unknown[0]!r} (expected {expected})")
    name = _top_string(path, data, "name")
    database = (path.parent / _top_string(path, data, "database")).resolve()
    if not database.is_file():
        raise QuestionFileError(path, f"database: expected an existing SQLite file, got {str(database)!r}")
    entries = data.get("questions")
    if not isinstance(entries, list) or not entries:
        raise QuestionFileError(path, "expected at least one [[questions]] entry")
    questions: list[Question] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries, start=1):
        question = _question(path, index, entry)
        if question.id in seen:
            message = f"the id is used twice (again in entry {index})"
            raise QuestionFileError(path, message, question=repr(question.id))
        seen.add(question.id)
        questions.append(question)
    return QuestionSet(name, path, database, tuple(questions))


def question_sets(directory: Path = QUESTIONS_DIR, *, group: str = "") -> list[QuestionSet]:
    """Every ``*.toml`` file of ``directory`` (or of its ``group`` folder), loaded and checked, in name
    order."""
    folder = directory / group if group else directory
    return [replace(load_question_set(path), group=group) for path in sorted(folder.glob("*.toml"))]


def every_question_set(directory: Path = QUESTIONS_DIR) -> list[QuestionSet]:
    """The sets of every group of ``GROUPS``: the tuned ones, then the fan-out ones, then the held-out."""
    return [question_set for group in GROUPS for question_set in question_sets(directory, group=group)]


def _top_string(path: Path, data: Mapping[str, object], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise QuestionFileError(path, f"{key}: expected a non-empty string, got {value!r}")
    return value


def _question(path: Path, index: int, raw: object) -> Question:
    entry, question_id, label = _identify(path, index, raw)

    def fail(message: str) -> QuestionFileError:
        return QuestionFileError(path, message, question=label)

    kind = _choice(entry, "kind", KINDS, None, fail)
    expect = _choice(entry, "expect", EXPECTS, "rows", fail)
    if (kind == "no_data") != (expect == "no_data"):
        raise fail(f"kind {kind!r} with expect {expect!r}: a no-data question has kind and expect no_data")
    ordered = entry.get("ordered", False)
    if not isinstance(ordered, bool):
        raise fail(f"ordered: expected true or false, got {ordered!r}")
    precision = entry.get("precision", 2)
    if not isinstance(precision, int) or isinstance(precision, bool) or not 0 <= precision <= MAX_PRECISION:
        raise fail(f"precision: expected a whole number from 0 to {MAX_PRECISION}, got {precision!r}")
    columns = entry.get("gold_columns", [])
    if not isinstance(columns, list) or not all(isinstance(item, str) and item for item in columns):
        raise fail(f"gold_columns: expected a list of column names, got {columns!r}")
    note = entry.get("note", "")
    if not isinstance(note, str):
        raise fail(f"note: expected a string, got {note!r}")
    return Question(
        id=question_id,
        question=_text(entry, "question", fail),
        kind=cast(Kind, kind),
        gold_sql=_text(entry, "gold_sql", fail),
        expect=cast(Expect, expect),
        ordered=ordered,
        precision=precision,
        gold_columns=tuple(columns),
        note=note,
    )


def _identify(path: Path, index: int, entry: object) -> tuple[dict[str, object], str, str]:
    """The entry as a table, its id and the label errors name it by, once its keys are the right ones."""
    label = f"entry {index}"
    if not isinstance(entry, dict):
        raise QuestionFileError(path, f"expected a table of keys, got {entry!r}", question=label)
    raw_id = entry.get("id")
    if raw_id is not None and not (isinstance(raw_id, str) and _ID.match(raw_id)):
        message = f"id: expected lower-case letters, digits and '-', got {raw_id!r}"
        raise QuestionFileError(path, message, question=label)
    if raw_id is not None:
        label = repr(raw_id)
    missing = [key for key in _REQUIRED if key not in entry]
    if missing:
        raise QuestionFileError(path, f"missing {', '.join(missing)}", question=label)
    unknown = sorted(set(entry) - set(_REQUIRED) - _OPTIONAL)
    if unknown:
        allowed = ", ".join(sorted({*_REQUIRED, *_OPTIONAL}))
        message = f"unknown key {unknown[0]!r} (expected one of {allowed})"
        raise QuestionFileError(path, message, question=label)
    return cast(dict[str, object], entry), cast(str, raw_id), label


def _text(entry: Mapping[str, object], key: str, fail: _Fail) -> str:
    value = entry[key]
    if not isinstance(value, str) or not value.strip():
        raise fail(f"{key}: expected a non-empty string, got {value!r}")
    return value.strip()


def _choice(
    entry: Mapping[str, object], key: str, allowed: Sequence[str], default: str | None, fail: _Fail
) -> str:
    value = entry.get(key, default)
    if value not in allowed:
        raise fail(f"{key}: expected one of {', '.join(allowed)}, got {value!r}")
    return cast(str, value)


def open_source(question_set: QuestionSet) -> DataSource:
    """The set's database as a plangate data source named after the set (read-only, behind the SQL guard)."""
    return DataSources().register(question_set.name, question_set.database)


def run_gold(
    question_set: QuestionSet,
    question: Question,
    source: DataSource | None = None,
    *,
    limits: QueryLimits | None = None,
) -> QueryResult:
    """Run a question's gold SQL read-only and keep its answer columns (``gold_columns``).

    Args:
        question_set: the set the question belongs to (its database, its file for errors).
        question: the question.
        source: the data source to query; by default the set's database (:func:`open_source`).
        limits: the query limits; by default plangate's defaults.

    Raises:
        QueryRefused: the read-only guard refused the gold SQL.
        DataSourceError: the database rejected it.
        QuestionFileError: a gold column is not in the result (names compare case-insensitively).
    """
    source = source or open_source(question_set)
    result = source.query(question.gold_sql, limits or QueryLimits())
    if not question.gold_columns:
        return result
    lowered = [column.lower() for column in result.columns]
    picked: list[int] = []
    for column in question.gold_columns:
        if column.lower() not in lowered:
            message = f"gold_columns: {column!r} is not a column of the gold result {result.columns}"
            raise QuestionFileError(question_set.path, message, question=repr(question.id))
        picked.append(lowered.index(column.lower()))
    rows = [tuple(row[index] for index in picked) for row in result.rows]
    return QueryResult([result.columns[index] for index in picked], rows, result.more_rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Check every question file (or those named) and print its counts per kind."""
    paths = [Path(arg) for arg in (sys.argv[1:] if argv is None else argv)]
    try:
        sets = [load_question_set(path) for path in paths] if paths else every_question_set()
    except QuestionFileError as exc:
        print(exc, file=sys.stderr)
        return 1
    for question_set in sets:
        counts = ", ".join(f"{kind} {count}" for kind, count in sorted(question_set.kinds().items()))
        where = f"{question_set.group}/" if question_set.group else ""
        print(f"{where}{question_set.path.name}: {len(question_set.questions)} questions ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
