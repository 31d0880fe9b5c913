"""Every console page opened with hostile values in every query parameter renders them as text, never as a link,
an image or HTML (the Markdown of errors and captions included)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from store import ENV_DB
from tests.test_console_pages import MAIN

PAGES = ("health", "reliability", "versions", "onboarding", "cost", "replay", "export", "collectors", "fleet",
         "node", "device")
HOSTILE = {
    "phishing link": "[Your session expired - sign in again](https://evil.example/login)",
    "image": "![x](http://127.0.0.1:9/p.png)",
    "html": "<img src=x onerror=alert(1)>",
    "script link": "[click](javascript:alert(1))",
    "bare url": "sign in at https://evil.example/login or www.evil.example",
}
PARAMS = ("node", "device", "pool", "window", "from", "to", "refresh")
# what would render as a link, an image or HTML: a bracket, an angle bracket or a URL's "://" not escaped
UNESCAPED = [re.compile(p) for p in (r"(?<!\\)\]\((https?|javascript)", r"(?<!\\)<img", r"https?://(evil|127)",
                                     r"(?<![\\\w])www\.evil")]
SHOWN = ("error", "warning", "info", "success", "markdown", "caption", "title", "header", "subheader")


def rendered(at: AppTest) -> list[str]:
    """The Markdown source of every element that renders Markdown."""
    out = []
    for kind in SHOWN:
        out += [str(e.value) for e in getattr(at, kind)]
    return out


@pytest.mark.parametrize("page", PAGES)
def test_a_hostile_query_string_renders_as_text(demo_db: Path, monkeypatch: pytest.MonkeyPatch, page: str) -> None:
    monkeypatch.setenv(ENV_DB, str(demo_db))
    at = AppTest.from_file(MAIN, default_timeout=90)
    # each parameter gets every hostile value in turn, so that one run tries them all somewhere
    values = list(HOSTILE.values())
    at.query_params.update({k: " ".join(values[(i + j) % len(values)] for j in range(2))
                            for i, k in enumerate(PARAMS)})
    at.run()
    at = at.switch_page(f"screens/{page}.py").run()
    assert not at.exception, at.exception
    for text in rendered(at):
        for bad in UNESCAPED:
            assert not bad.search(text), (page, bad.pattern, text)


def test_a_rules_file_with_a_huge_number_is_one_error_without_a_traceback(demo_db: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    rules = tmp_path / "site-rules.yaml"
    rules.write_text(f"version: 1\ntemperature: {{warning: {'9' * 5000}}}\n")
    monkeypatch.setenv(ENV_DB, str(demo_db))
    monkeypatch.setenv("HETPOOL_RULES", str(rules))
    at = AppTest.from_file(MAIN, default_timeout=90).run()
    assert not at.exception, at.exception
    (error,) = [str(e.value) for e in at.error]
    assert error.startswith(f"{rules}:2: temperature.warning: expected a number, got 99999999999999999999...")
    assert "\n" not in error and ".py" not in error and "Traceback" not in error
