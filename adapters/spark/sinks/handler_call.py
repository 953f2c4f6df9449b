"""How a handler is loaded and called in Spark's Python workers: the
function ``mapInArrow`` runs on each Spark partition, and what it reports.
Pickled by reference to this module, so the workers import it (on Spark
Connect from ``code_archive``)."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from typing import Any


def load_handler(dotted: str) -> Callable[[Iterator[dict]], Any]:
    """``package.module.function`` or ``package.module:function``."""
    module_name, _, attribute = dotted.partition(":") if ":" in dotted else dotted.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"handler {dotted!r} is not a dotted path to a function")
    handler = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(handler):
        raise ValueError(f"handler {dotted!r} is not a callable")
    return handler


HANDLER_RESULT_SCHEMA = "topic string, partition int, pulled long, runs string"


def handler_partition(dotted: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` runs on each Spark partition (Arrow
    batches of RECORD_COLUMNS): it calls the handler with the records as
    dicts and yields, per (topic, partition), how many records the handler
    pulled and the runs of consecutive offsets it pulled (JSON)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        handler = load_handler(dotted)
        # Counted as the handler pulls each record: what it did not pull was not delivered.
        runs: dict[tuple[str, int], list[list[int]]] = {}
        pulled: dict[tuple[str, int], int] = {}

        def records() -> Iterator[dict]:
            for batch in batches:
                for row in batch.to_pylist():
                    key = (row["topic"], row["partition"])
                    pulled[key] = pulled.get(key, 0) + 1
                    spans = runs.setdefault(key, [])
                    if spans and spans[-1][1] == row["offset"]:
                        spans[-1][1] = row["offset"] + 1
                    else:
                        spans.append([row["offset"], row["offset"] + 1])
                    yield {
                        "key": row["key"], "value": row["value"], "topic": row["topic"],
                        "partition": row["partition"], "offset": row["offset"], "timestamp": row["timestamp"],
                        "headers": [(h["key"], h["value"]) for h in row["headers"] or []],
                    }

        handler(records())
        keys = sorted(runs)
        yield pa.RecordBatch.from_pydict({
            "topic": [topic for topic, _ in keys],
            "partition": pa.array([partition for _, partition in keys], pa.int32()),
            "pulled": pa.array([pulled[key] for key in keys], pa.int64()),
            "runs": [json.dumps(runs[key]) for key in keys],
        })

    return run
