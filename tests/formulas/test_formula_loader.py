"""Finding formula files: search order, TOML before JSON, paths, and the messages when nothing is found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plangate.errors import FormulaError, FormulaNotFound
from plangate.formulas import FormulaLoader, load_formula
from plangate.formulas.loader import find_formula


def write(folder: Path, name: str, description: str, fmt: str = "toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.formula.{fmt}"
    if fmt == "toml":
        path.write_text(f'formula = "{name}"\ndescription = "{description}"\n', encoding="utf-8")
    else:
        path.write_text(json.dumps({"formula": name, "description": description}), encoding="utf-8")
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory and a home directory of their own."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_given_paths_come_before_the_defaults(home: Path) -> None:
    write(home / "work" / "formulas", "release", "local")
    write(home / "mine", "release", "given")
    assert load_formula("release", [home / "mine"]).description == "given"
    assert load_formula("release").description == "local"


def test_default_order_is_formulas_then_dot_plangate_then_home(home: Path) -> None:
    write(home / "home" / ".plangate" / "formulas", "release", "home")
    assert load_formula("release").description == "home"
    write(home / "work" / ".plangate" / "formulas", "release", "project")
    assert load_formula("release").description == "project"
    write(home / "work" / "formulas", "release", "formulas")
    assert load_formula("release").description == "formulas"


def test_toml_is_preferred_to_json_in_the_same_folder(home: Path) -> None:
    folder = home / "work" / "formulas"
    write(folder, "release", "json", fmt="json")
    assert load_formula("release").description == "json"
    write(folder, "release", "toml")
    assert load_formula("release").description == "toml"


def test_first_folder_wins_even_with_json(home: Path) -> None:
    write(home / "a", "release", "a-json", fmt="json")
    write(home / "b", "release", "b-toml")
    assert load_formula("release", [home / "a", home / "b"]).description == "a-json"


def test_a_path_to_a_file_is_loaded_directly(home: Path) -> None:
    toml_file = write(home / "elsewhere", "one", "by path")
    json_file = write(home / "elsewhere", "two", "json by path", fmt="json")
    loaded = load_formula(str(toml_file))
    assert loaded.description == "by path"
    assert loaded.source == str(toml_file)
    assert load_formula(json_file).description == "json by path"


def test_a_missing_file_path_is_not_found(home: Path) -> None:
    with pytest.raises(FormulaNotFound, match=r"no formula file at .*nope\.formula\.toml"):
        load_formula(str(home / "nope.formula.toml"))


def test_not_found_lists_the_folders_and_the_closest_name(home: Path) -> None:
    write(home / "work" / "formulas", "release", "x")
    with pytest.raises(FormulaNotFound) as caught:
        load_formula("relase")
    in_home = home / "home" / ".plangate" / "formulas"
    assert str(caught.value) == (
        f"formula 'relase' not found in formulas, .plangate/formulas, {in_home} (did you mean 'release'?)"
    )


def test_not_found_names_each_folder_once(home: Path) -> None:
    # Before, a folder on the path twice (the formula's own and a --path) was listed twice.
    with pytest.raises(FormulaNotFound) as caught:
        find_formula("nosuch", [Path("."), Path("."), Path("formulas")])
    assert str(caught.value) == "formula 'nosuch' not found in ., formulas"


def test_a_name_cannot_walk_out_of_the_search_path(home: Path) -> None:
    loader = FormulaLoader()
    with pytest.raises(FormulaNotFound, match=r"expected a formula name like 'release', got '\.\./secret'"):
        loader("../secret")


def test_errors_name_the_file(home: Path) -> None:
    folder = home / "work" / "formulas"
    folder.mkdir(parents=True)
    (folder / "broken.formula.toml").write_text('formula = "broken"\nsteps = 3\n', encoding="utf-8")
    with pytest.raises(FormulaError) as caught:
        load_formula("broken")
    assert str(caught.value) == "formulas/broken.formula.toml: steps: expected a list, got an integer (3)"


def test_undecodable_files_are_a_formula_error(home: Path) -> None:
    path = home / "bad.formula.toml"
    path.write_bytes(b"formula = '\xff'\n")
    with pytest.raises(FormulaError, match="cannot read the file"):
        load_formula(str(path))


def test_loader_reads_each_file_once_and_looks_beside_the_formula_first(home: Path) -> None:
    write(home / "work" / "formulas", "base", "default path")
    beside = write(home / "project", "base", "beside")
    child = write(home / "project", "child", "child")
    loader = FormulaLoader.beside(load_formula(str(child)))
    assert loader("base").description == "beside"
    beside.write_text('formula = "base"\ndescription = "changed"\n', encoding="utf-8")
    assert loader("base").description == "beside"
