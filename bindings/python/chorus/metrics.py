"""Prometheus metrics of a chorus process (docs/metrics.md).

With CHORUS_METRICS_PORT=P in the environment, init() serves this process's metrics on
http://0.0.0.0:(P + local rank)/metrics, so the ranks of one host use P, P+1, ...; serve(port)
does the same by hand. Each scrape reads the runtime's batch totals (Note [Batch metrics] in
runtime/flight/batch_metrics.h: every collective this process finished, by op, over every world
of an elastic job), so it costs the training loop nothing. The metrics, each labelled with the
rank (and the op where it applies):

  chorus_info{rank, size, controller}   1
  chorus_cycles_total                   background cycles run
  chorus_batches_total{op}              collectives done (a fused batch is one)
  chorus_batches_failed_total{op}       collectives that failed
  chorus_tensors_total{op}              tensors in the done collectives
  chorus_bytes_total{op}                bytes they moved
  chorus_batch_seconds{op}              histogram of their durations (start to end on this rank)

The HTTP server and the exposition format are prometheus_client's (Debian: python3-prometheus-
client).
"""

import json
import os

from chorus import _C

PORT_VARIABLE = "CHORUS_METRICS_PORT"

_served = set()  # ports served by this process


class ChorusCollector:
    """A prometheus_client collector of this process's batch totals (chorus._C.metrics_json)."""

    def collect(self):
        from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                            HistogramMetricFamily)
        text = _C.metrics_json()
        if not text:
            return  # not initialized (yet, or any more): nothing to say
        m = json.loads(text)
        rank = str(m["rank"])
        info = GaugeMetricFamily("chorus_info", "This chorus process: its rank, world size and "
                                 "controller", labels=["rank", "size", "controller"])
        info.add_metric([rank, str(m["size"]), m["controller"]], 1)
        yield info
        cycles = CounterMetricFamily("chorus_cycles", "Background cycles run", labels=["rank"])
        cycles.add_metric([rank], m["cycles"])
        yield cycles
        families = {
            key: CounterMetricFamily(name, doc, labels=["rank", "op"])
            for key, name, doc in (
                ("batches", "chorus_batches", "Collectives done (a fused batch is one)"),
                ("failed", "chorus_batches_failed", "Collectives that failed"),
                ("tensors", "chorus_tensors", "Tensors in the done collectives"),
                ("bytes", "chorus_bytes", "Bytes the done collectives moved"))}
        seconds = HistogramMetricFamily("chorus_batch_seconds", "Durations of the done "
                                        "collectives on this rank", labels=["rank", "op"])
        bounds = m["bucket_bounds"]
        for op, t in sorted(m["ops"].items()):
            for key, family in families.items():
                family.add_metric([rank, op], t[key])
            cumulative, buckets = 0, []
            for bound, count in zip(bounds + [float("inf")], t["buckets"]):
                cumulative += count
                buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)),
                                cumulative))
            seconds.add_metric([rank, op], buckets, t["seconds"])
        yield from families.values()
        yield seconds


def serve(port, addr="0.0.0.0"):
    """Serves this process's metrics on http://addr:port/metrics (a daemon thread of
    prometheus_client's). Serving a port twice does nothing."""
    try:
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError as e:
        raise ImportError(f"chorus metrics need the prometheus_client package (Debian: "
                          f"python3-prometheus-client): {e}") from e
    if port in _served:
        return
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ChorusCollector())
    try:
        start_http_server(port, addr=addr, registry=registry)
    except OSError as e:
        raise OSError(e.errno, f"chorus metrics: cannot serve on {addr}:{port}: {e.strerror}") \
            from e
    _served.add(port)


def serve_from_environment():
    """init()'s part: serves on CHORUS_METRICS_PORT (which init checked: a port number, 0 =
    none) + this process's local rank. Returns the port, or None."""
    base = int(os.environ.get(PORT_VARIABLE, "0") or "0")
    if base == 0:
        return None
    port = base + _C.topology()["local_rank"]
    if port > 65535:
        raise ValueError(f"{PORT_VARIABLE}={base}: local rank {port - base} would serve on port "
                         f"{port}, above 65535")
    serve(port)
    return port
