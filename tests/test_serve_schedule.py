"""The schedule `hetpool serve` runs its jobs on: results and errors kept for /health, an error logged once until
it changes, credentials never logged, and a stop that ends the thread."""

from __future__ import annotations

import threading

from app.serve.schedule import RunStatus, Schedule


class Job(Schedule[int, RunStatus]):
    """Runs the next outcome of a script: an int is a result, an exception is raised."""

    def __init__(self, outcomes: list[object], log: list[str]) -> None:
        super().__init__("job", 3600.0, RunStatus(), log=log.append, clock=lambda: 1_800_000_000.0)
        self.outcomes = outcomes
        self.kept: list[int] = []
        self.ran = threading.Event()

    def work(self) -> int:
        self.ran.set()
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        assert isinstance(outcome, int)
        return outcome

    def keep(self, result: int) -> None:
        self.kept.append(result)

    def announce(self, result: int, started: float) -> None:
        self.log(f"job: did {result}")


def test_errors_are_kept_logged_once_until_they_change_and_cleared_by_a_success() -> None:
    lines: list[str] = []
    job = Job([ValueError("disk full"), ValueError("disk full"), ValueError("token=s3cr3t rejected"), 7], lines)
    for _ in range(3):
        job.run_once()
    report = job.common_report()
    assert (report["runs"], report["failures"], report["healthy"]) == (3, 3, False)
    assert report["problems"] == [f"last run failed: {report['last_error']}"]
    assert report["last_ok_at"] is None and report["last_run_at"] == "2027-01-15T08:00:00.000Z"
    assert lines[0] == "job: ValueError: disk full" and len(lines) == 2  # the repeat is not logged again
    assert "s3cr3t" not in lines[1] and "s3cr3t" not in str(report)
    job.run_once()
    report = job.common_report()
    assert (report["runs"], report["failures"], report["healthy"], report["last_error"]) == (4, 3, True, None)
    assert report["last_ok_at"] == report["last_run_at"] and job.kept == [7] and lines[-1] == "job: did 7"
    assert report["every_s"] == 3600.0


def test_a_started_schedule_runs_at_once_and_stops_between_runs() -> None:
    job = Job([1, 2], [])
    job.start()
    assert job.ran.wait(10)
    assert job.stop(10) is True
    assert job.status.runs == 1 and job.kept == [1]  # the next run was an hour away
