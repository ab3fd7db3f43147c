"""The service's Prometheus metrics: ticks, the fleet queue, jobs and the budget, served on
``service.metrics_port`` (off by default) for the scraper operators already run.

Counters and the tick histogram are updated as records are written (`observe`); the queue's and the
budget's gauges are read from the queue when scraped, so they are never stale. Each service has its own
registry (several services, or tests, in one process do not collide).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from optimizer.service.fleet import FleetQueue
    from optimizer.service.record import TickRecord


class _QueueCollector(Collector):
    """The queue's state at scrape time."""

    def __init__(self, queue: FleetQueue) -> None:
        self.queue = queue

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = datetime.now(UTC)
        snapshot = self.queue.snapshot(now)
        yield GaugeMetricFamily("deltaopt_queue_waiting", "jobs waiting in the fleet queue", len(snapshot["waiting"]))
        yield GaugeMetricFamily("deltaopt_jobs_running", "OPTIMIZE jobs running", len(snapshot["running"]))
        yield GaugeMetricFamily("deltaopt_job_slots", "OPTIMIZE jobs allowed at once", self.queue.slots)
        used = GaugeMetricFamily("deltaopt_budget_used_seconds", "cluster-seconds charged", labels=["window"])
        limit = GaugeMetricFamily("deltaopt_budget_limit_seconds", "cluster-seconds allowed", labels=["window"])
        for window, span, cap in (
            ("hour", timedelta(hours=1), self.queue.budget.per_hour),
            ("day", timedelta(days=1), self.queue.budget.per_day),
        ):
            used.add_metric([window], self.queue.used(now, span))
            if cap is not None:
                limit.add_metric([window], cap)
        yield used
        yield limit


class Metrics:
    def __init__(self, queue: FleetQueue) -> None:
        self.registry = CollectorRegistry()
        self.ticks = Counter("deltaopt_ticks", "ticks by outcome", ["action", "reused"], registry=self.registry)
        self.tick_seconds = Histogram(
            "deltaopt_tick_seconds",
            "time a tick took (a repeated verdict: milliseconds; an estimate: seconds)",
            buckets=(0.005, 0.02, 0.1, 0.5, 2, 10, 30, 120, 600),
            registry=self.registry,
        )
        self.jobs = Counter("deltaopt_jobs", "OPTIMIZE jobs that ended, by outcome", ["action"], registry=self.registry)
        self.job_seconds = Counter("deltaopt_job_seconds", "cluster-seconds OPTIMIZE jobs took", registry=self.registry)
        self.registry.register(_QueueCollector(queue))

    def observe(self, record: TickRecord) -> None:
        """Count one written record (a tick's, or a job's the queue started)."""
        self.ticks.labels(record.action.value, str(record.reused).lower()).inc()
        self.tick_seconds.observe(record.tick_seconds)
        if record.job is not None:
            self.jobs.labels(record.action.value).inc()
            if record.job.outcome is not None:
                self.job_seconds.inc(record.job.outcome.seconds)

    def serve(self, port: int, address: str = "0.0.0.0") -> None:
        """Serve ``/metrics`` on `port` from a daemon thread."""
        start_http_server(port, address, registry=self.registry)

    def text(self) -> str:
        """The exposition a scrape returns."""
        return generate_latest(self.registry).decode()
