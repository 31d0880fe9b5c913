"""The console's one HTTP client: the health report of the `hetpool serve` it runs under."""

from __future__ import annotations

import json
from typing import Any

from collectors.outbound import Limits, OutboundError, request
from store import StoreError

MAX_REPORT_BYTES = 4 << 20  # a health report is a few KiB


def service_health(url: str, timeout_s: float = 2.0) -> dict[str, Any]:
    """The health report of the `hetpool serve` this console runs under (its endpoint answers 503 when
    unhealthy, with the same body)."""
    try:
        with request("GET", url, limits=Limits(deadline_s=timeout_s, max_body_bytes=MAX_REPORT_BYTES)) as got:
            if got.status not in (200, 503):
                raise StoreError(f"the health endpoint {url} answered HTTP {got.status}")
            return dict(json.loads(got.read()))
    except OutboundError as exc:
        raise StoreError(f"cannot read the health endpoint {url}: {exc.why}") from None
    except ValueError as exc:
        raise StoreError(f"cannot read the health endpoint {url}: {exc}") from None
