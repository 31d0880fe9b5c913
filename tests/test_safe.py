"""Untrusted names render as text in the console's Markdown."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from app.console.safe import md


@pytest.mark.parametrize(("text", "expected"), [
    ("h100-a-01", "h100-a-01"),
    ("mi300x-a · driver: 2 versions", "mi300x-a · driver: 2 versions"),
    ("![x](http://evil/p.png)", "!\\[x\\](http\u200b://evil/p.png)"),
    # a bare URL is a link in the browser's Markdown whatever is escaped; a zero-width space breaks it
    ("see https://evil.example or www.evil.example", "see https\u200b://evil.example or www\u200b.evil.example"),
    ("a:b and x://y, awww.z", "a:b and x\u200b://y, awww.z"),
    ("<img src=x onerror=alert(1)>", "\\<img src=x onerror=alert(1)\\>"),
    ("**bold** _it_ `code`", "\\*\\*bold\\*\\* \\_it\\_ \\`code\\`"),
])
def test_md_escapes(text: str, expected: str) -> None:
    assert md(text) == expected


def script(name: str) -> None:
    import streamlit as st

    from app.console.safe import md
    st.markdown(f"**{md(name)}** · chip")


@pytest.mark.parametrize("name", ["![x](http://127.0.0.1:9/p.png)", "<img src=x onerror=alert(1)>",
                                  "[click](javascript:alert(1))", "go to https://evil.example/login"])
def test_a_hostile_name_renders_as_the_text_it_is(name: str) -> None:
    at = AppTest.from_function(script, args=(name,)).run()
    assert not at.exception
    shown = at.markdown[0].value
    # Markdown renders the escaped text back to the name itself, and nothing is a link or an image any more
    assert shown == f"**{md(name)}** · chip" and "](" not in shown.replace("\\](", "")
