"""docs/architecture.md against the repository: every top-level package and folder is in its tables and in the
README's layout, pyproject's lists are its layers, and its console rooms are the pages main.py serves."""

from __future__ import annotations

import ast
import re
import tomllib

import pytest

from tests.architecture import DOC, LAYERS, parse_folders, parse_rooms, read
from tests.conftest import REPO

# What .gitignore keeps out of the repository but a working tree may hold at the top.
NOT_IN_GIT = {"demo", "test-artifacts", "build"}
FOLDERS = parse_folders(read())


def top_level_dirs() -> set[str]:
    return {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")
            and p.name not in NOT_IN_GIT and not p.name.endswith(".egg-info")}


def readme_layout() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return readme.split("## Layout", 1)[1].split("\n## ", 1)[0]


def test_every_top_level_folder_is_a_layer_or_declared_beside_them() -> None:
    assert top_level_dirs() - set(LAYERS) - set(FOLDERS) == set(), f"add it to {DOC.relative_to(REPO)}"
    assert set(LAYERS) | set(FOLDERS) <= top_level_dirs() | {"scripts", "docs"}


def test_the_packages_are_the_layers_and_the_benchmarks() -> None:
    packages = {p.parent.name for p in REPO.glob("*/__init__.py")}
    assert packages == set(LAYERS) | {"benchmarks", "tests"}


@pytest.mark.parametrize("name", [*LAYERS, *FOLDERS])
def test_the_readme_layout_names_every_layer_and_folder(name: str) -> None:
    assert re.search(rf"^{name}/", readme_layout(), re.M), f"README's layout leaves out {name}/"


@pytest.mark.parametrize("part", sorted(p.parent.name + "/" for p in (REPO / "app").glob("*/__init__.py")))
def test_the_readme_and_the_architecture_name_every_package_of_app(part: str) -> None:
    assert f"app/{part}" in readme_layout(), f"README's layout leaves out app/{part}"
    assert f"`{part}`" in LAYERS["app"].holds, f"{DOC.relative_to(REPO)} leaves app/{part} out of app/'s row"


def test_pyproject_installs_and_type_checks_exactly_the_layers() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(include) == sorted(f"{name}*" for name in LAYERS)
    assert sorted(pyproject["tool"]["mypy"]["files"]) == sorted([*LAYERS, "benchmarks"])


def served_pages(hidden: bool = False) -> list[tuple[str, str, str]]:
    """(title, URL path, screen) of every st.Page the console's main.py builds (the hidden ones, out of the
    navigation, instead with `hidden`), read without running it."""
    tree = ast.parse((REPO / "app" / "console" / "main.py").read_text(encoding="utf-8"))
    pages = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Page":
            kw = {k.arg: str(k.value.value) for k in node.keywords if isinstance(k.value, ast.Constant)}
            screen = node.args[0]
            assert isinstance(screen, ast.BinOp) and isinstance(screen.right, ast.Constant), ast.dump(screen)
            if (kw.get("visibility") == "hidden") == hidden:
                pages.append((kw["title"], kw["url_path"], str(screen.right.value).removesuffix(".py")))
    return pages


def test_the_console_rooms_are_the_pages_it_serves() -> None:
    assert parse_rooms(read()) == served_pages()
    assert len(served_pages()) >= 11
    assert served_pages(hidden=True) == [("Fleet health", "", "root")]  # the root, which opens /health


def test_the_console_page_counts_the_console_pages() -> None:
    words = {9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen"}
    console = (REPO / "docs" / "console.md").read_text(encoding="utf-8")
    assert f"opens {words[len(served_pages())]} pages" in console


def test_the_readme_is_a_front_door_and_links_every_page_of_docs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for page in sorted((REPO / "docs").glob("*.md")):
        assert f"](docs/{page.name})" in readme, f"README links no docs/{page.name}"
    shot = re.search(r"!\[[^]]+\]\((docs/[^)]+\.png)\)", readme)
    assert shot and (REPO / shot[1]).is_file()


def test_nothing_cites_a_document_outside_the_repository() -> None:
    for path in [*REPO.glob("*.md"), *REPO.glob("docs/*.md"), *(REPO / "tests").glob("*.py"),
                 *(p for layer in LAYERS for p in (REPO / layer).rglob("*.py"))]:
        text = path.read_text(encoding="utf-8")
        assert "DESIGN" + ".md" not in text and "design " + "brief" not in text, path.relative_to(REPO)
