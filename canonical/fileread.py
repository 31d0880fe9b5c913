"""A whole file read, and why it cannot be: the reasons every layer's error quotes after the file's name."""

from __future__ import annotations

import stat
from pathlib import Path


class UnreadableFile(Exception):
    """A file that cannot be read; `reason` is what the layer's message says after the file's name."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def read_bytes(path: str | Path, expected: str) -> bytes:
    """The file's bytes; a missing file, a folder, a device or FIFO, or a file without read permission raises
    UnreadableFile (`expected` names what should be there: "a YAML file")."""
    p = Path(path)
    try:
        kind = p.stat().st_mode
        if not stat.S_ISREG(kind) and not stat.S_ISDIR(kind):
            # a device (/dev/zero never ends) or a FIFO (waits for a writer forever) is no file to load
            what = "a FIFO" if stat.S_ISFIFO(kind) else "a device" if stat.S_ISCHR(kind) or stat.S_ISBLK(kind) \
                else "a socket" if stat.S_ISSOCK(kind) else "not a regular file"
            raise UnreadableFile(p, f"is {what}, expected {expected}")
        return p.read_bytes()
    except FileNotFoundError:
        raise UnreadableFile(p, "file not found") from None
    except IsADirectoryError:
        raise UnreadableFile(p, f"is a directory, expected {expected}") from None
    except PermissionError:
        raise UnreadableFile(p, f"not readable (permission denied), expected {expected}") from None
    except OSError as exc:
        raise UnreadableFile(p, f"cannot be read ({exc.strerror or exc}), expected {expected}") from None


def read_text(path: str | Path, expected: str, encoding: str = "utf-8-sig") -> str:
    """The file as text (a UTF-8 byte-order mark dropped); bytes that are not UTF-8 raise UnreadableFile too."""
    data = read_bytes(path, expected)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise UnreadableFile(Path(path), f"not UTF-8 text ({exc.reason})") from None
