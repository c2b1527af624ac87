"""The README and docs stand on their own: a README a newcomer reads in minutes, every relative link and
every ``docs/...`` path the code names alive, nothing pointing outside the repository."""

from __future__ import annotations

import re
import subprocess

import pytest

from .conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")  # markdown links: [text](target)
DOC_PATH = re.compile(r"\bdocs/[\w./-]+\.(?:md|png)\b")


def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "--", *patterns], cwd=REPO, capture_output=True, text=True, check=True)
    return [name for name in out.stdout.splitlines() if name]


def test_the_readme_is_short():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, "README.md: at most 200 lines; details belong in docs/"
    assert len(text.split()) <= 1600, "README.md: at most 1,600 words; details belong in docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_prose_line_runs_over_500_characters(page):
    """A paragraph is wrapped (the benchmark sections by ``benchmarks._report.wrap_prose``); tables may be wide."""
    long = [n for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > 500 and not line.startswith("|")]  # fmt: skip
    assert not long, f"{page.relative_to(REPO)}: lines over 500 characters: {long}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_is_alive(page):
    dead = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):  # http(s):, mailto:, in-page anchors
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or not path.is_relative_to(REPO):
            dead.append(target)
    assert not dead, f"{page.relative_to(REPO)}: dead links {dead}"


def test_every_docs_path_the_code_and_docs_name_exists():
    named = set()
    for name in _tracked("*.py", "*.md", "*.yaml", "Makefile", "*.sh", "*.toml"):
        if name.startswith("tests/"):
            continue
        named |= {(name, path) for path in DOC_PATH.findall((REPO / name).read_text(encoding="utf-8"))}
    missing = sorted(f"{where}: {path}" for where, path in named if not (REPO / path).exists())
    assert not missing, "\n".join(missing)


# A path under the folder beside the checkout the project was built with, which users never have. The folder's
# name is joined here so that this file, scanned too, holds no such path itself.
OUTSIDE = "shared" + "/"
POINTS_OUTSIDE = re.compile(rf"(?<![\w.-])(?:\.\./)+{OUTSIDE}|(?<![\w/.-]){OUTSIDE}[\w.-]")


def test_no_file_points_outside_the_repository():
    pointing = []
    for name in _tracked():
        if not (REPO / name).is_file():
            continue
        try:
            text = (REPO / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # images, wheels
        if POINTS_OUTSIDE.search(text):
            pointing.append(name)
    assert not pointing, pointing
    assert POINTS_OUTSIDE.search(f"see {OUTSIDE}notes.md") and POINTS_OUTSIDE.search(f"../../{OUTSIDE}x")


def test_the_claims_ledger_has_one_recipe_per_row_and_no_cell_over_600_characters():
    from frugalrl.ops.claims import SEED_CLAIMS

    text = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    ledger = text.split("<!-- BEGIN claims_ledger -->", 1)[1].split("<!-- END claims_ledger -->", 1)[0]
    rows = [line for line in ledger.splitlines() if line.startswith("| ") and not line.startswith("| claim (")]
    rows = [row for row in rows if not set(row) <= set("|-: ")]
    assert len(rows) == len(SEED_CLAIMS)  # every declared claim, once
    for row in rows:
        cells = row.strip("|").split(" | ")
        assert max(len(cell) for cell in cells) <= 600, cells[0]
        recipe = cells[-1].strip()
        assert recipe == "-" or recipe.count("`") == 2, recipe  # one command (or one && sequence), not a list
