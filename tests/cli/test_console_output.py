"""``cli/_console.py``: a command printed for the person to run next starts as they started plangate."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from plangate.cli import _console


def test_prog_is_what_ran_plangate_when_that_is_not_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / ".venv" / "bin" / "plangate"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.delenv("PLANGATE_PROG", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [".venv/bin/plangate", "approve"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert _console.prog() == ".venv/bin/plangate"  # `plangate approve …` would not be found

    monkeypatch.setenv("PATH", str(script.parent))
    assert _console.prog() == "plangate"  # on the PATH (an activated virtualenv): its short name

    monkeypatch.setenv("PLANGATE_PROG", "./dev plangate")
    assert _console.prog() == "./dev plangate"  # ./dev says how it was run


def test_a_users_text_is_printed_as_written_never_as_an_emoji(capsys: pytest.CaptureFixture[str]) -> None:
    # Before, rich read ":smile" in "--tools foo:smile" as an emoji code: the message changed what was typed.
    _console.err.print("error: --tools foo:smile: cannot import 'foo'; --tools nosuchmodule:x:")
    _console.out.print("a:thumbs_up: b")

    said = capsys.readouterr()
    assert "foo:smile: cannot import" in said.err and "nosuchmodule:x:" in said.err
    assert "a:thumbs_up: b" in said.out
