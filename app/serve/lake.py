"""The lake export of `hetpool serve`: `hetpool export --partition` on a schedule, with its last run for /health."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.serve.config import ExportPlan
from app.serve.schedule import Log, RunStatus, Schedule
from canonical.redact import redact
from store import Access, StoreError
from store.exports import ExportFilter, check_names
from store.lake import LakeResult, write_lake

Export = Callable[..., LakeResult]


@dataclass
class ExportStatus(RunStatus):
    """The export's life so far, with its last result."""

    last: LakeResult | None = None


class LakeExport(Schedule[LakeResult, ExportStatus]):
    """Runs the export at once, then every `every_s` seconds, in its own thread; stops between partitions."""

    def __init__(self, store: Access, plan: ExportPlan, *, log: Log | None = None,
                 clock: Callable[[], float] = time.time, export: Export = write_lake):
        super().__init__("export", plan.every_s, ExportStatus(), log=log, clock=clock)
        self.store = store
        self.plan = plan
        self.filter = ExportFilter(pools=plan.pools, metrics=plan.metrics)
        self.export = export

    def check(self) -> None:
        """Refuse at start a pool or metric the store does not know, rather than fail every run."""
        with self.store.read() as con:
            check_names(con, self.filter)

    def work(self) -> LakeResult:
        """One export, stopping between partitions when asked."""
        return self.export(self.store, self.plan.out, self.filter, stop=self.stopping.is_set)

    def error_text(self, exc: Exception) -> str:
        """A store's or the file system's error as it reads; anything else with its type."""
        return redact(str(exc)) if isinstance(exc, (StoreError, OSError)) else super().error_text(exc)

    def keep(self, result: LakeResult) -> None:
        """The last result, for /health."""
        self.status.last = result

    def announce(self, result: LakeResult, started: float) -> None:
        """What the export wrote."""
        if result.upgraded:
            self.log(f"export: rewrote {result.upgraded} partitions of an earlier lake schema version in "
                     f"{result.path}")
        if result.written:
            self.log(f"export: wrote {result.rows} rows in {result.written} partitions to {result.path}")

    def report(self) -> dict[str, Any]:
        """The schedule's status as plain data, for /health."""
        common = self.common_report()
        with self._lock:
            s = self.status.last
        last = None if s is None else {
            "rows": s.rows, "partitions_written": s.written, "partitions_unchanged": s.unchanged,
            "partitions_kept": s.kept, "resolution": s.resolution}
        return {"out": str(self.plan.out), "every_s": common.pop("every_s"), "pools": list(self.plan.pools),
                "metrics": list(self.plan.metrics), **common, "last": last}
