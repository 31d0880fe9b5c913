"""The console's one HTTP client: the health report of the `hetpool serve` it runs under."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from store import StoreError


def service_health(url: str, timeout_s: float = 2.0) -> dict[str, Any]:
    """The health report of the `hetpool serve` this console runs under (its endpoint answers 503 when
    unhealthy, with the same body)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return dict(json.load(response))
    except urllib.error.HTTPError as exc:
        if exc.code == 503:
            return dict(json.load(exc))
        raise StoreError(f"the health endpoint {url} answered HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the health endpoint {url}: {exc}") from None
