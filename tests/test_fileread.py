"""Whole-file reads and the reasons they fail, as every layer's loader quotes them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from canonical.fileread import UnreadableFile, read_bytes, read_text
from pool_registry import RegistryError, load_registry
from replay import BenchTableError, read_bench_table, read_traffic
from traces.exceptions import TrafficError


@pytest.mark.parametrize("make, reason", [
    (lambda p: None, "file not found"),
    (lambda p: p.mkdir(), "is a directory, expected a thing"),
    (lambda p: p.write_bytes(b"ok \xff\xfe"), "not UTF-8 text (invalid start byte)"),
])
def test_unreadable_files_say_why(tmp_path: Path, make, reason: str) -> None:
    p = tmp_path / "f.txt"
    make(p)
    with pytest.raises(UnreadableFile) as exc:
        read_text(p, "a thing")
    assert exc.value.reason == reason and str(exc.value) == f"{p}: {reason}" and exc.value.path == p


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file without read permission")
def test_a_file_without_read_permission(tmp_path: Path) -> None:
    p = tmp_path / "secret.yaml"
    p.write_text("x: 1\n")
    p.chmod(0)
    with pytest.raises(UnreadableFile, match=r"not readable \(permission denied\), expected a YAML file"):
        read_bytes(p, "a YAML file")


def test_text_drops_a_byte_order_mark_unless_asked_to_keep_it(tmp_path: Path) -> None:
    p = tmp_path / "bom.csv"
    p.write_bytes(b"\xef\xbb\xbfa,b\n")
    assert read_text(p, "a CSV table") == "a,b\n"
    assert read_text(p, "a YAML file", encoding="utf-8") == "\ufeffa,b\n"
    assert read_bytes(p, "x") == b"\xef\xbb\xbfa,b\n"


@pytest.mark.parametrize("read, error, expected", [
    (load_registry, RegistryError, "a YAML file"),
    (read_bench_table, BenchTableError, "a CSV table"),
    (read_traffic, TrafficError, "a traffic file"),
])
def test_each_loader_names_the_folder_it_was_given(tmp_path: Path, read, error: type[Exception],
                                                   expected: str) -> None:
    with pytest.raises(error) as exc:
        read(tmp_path)
    assert f"{tmp_path}: is a directory, expected {expected}" in str(exc.value)
