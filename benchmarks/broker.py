"""The embedded default's broker against the one it replaced: kombu's filesystem transport.

One command, loopback only, a temporary folder::

    .venv/bin/python benchmarks/broker.py [--messages 3000] [--producers 3]

For each transport, ``--producers`` processes publish ``--messages`` messages each, as fast as they
can (as web processes do when labels stream in), while one consumer process drains the queue as a
Celery worker does. Prints, per transport: publish latency (p50 / p99), delivery latency from publish
to consume (p50 / p99), messages delivered, and messages the consumer could not decode (a message
file read while it was still being written: the filesystem transport's failure, kombu issue 1551,
which made the demo's Celery worker exit). Payloads are the size of a Celery task message.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PADDING = "x" * 1500  # a Celery task message with its headers is about 1.5 kB


def connection(kind: str, folder: Path):
    from kombu import Connection

    from config import broker

    if kind == "sqlite":
        return Connection(
            broker.broker_url(folder / "broker.sqlite3"),
            transport=broker.TRANSPORT,
            transport_options=broker.TRANSPORT_OPTIONS,
        )
    (folder / "fs").mkdir(exist_ok=True)
    return Connection(
        "filesystem://",
        transport_options={
            "data_folder_in": str(folder / "fs"),
            "data_folder_out": str(folder / "fs"),
            "polling_interval": 0.1,
            "control_folder": str(folder / "fs"),  # else kombu makes ./control in the working directory
        },
    )


def produce(kind: str, folder: Path, n: int, latencies) -> None:
    with connection(kind, folder) as conn:
        queue = conn.SimpleQueue("bench")
        for i in range(n):
            sent = time.perf_counter()
            queue.put({"sent": time.time(), "i": i, "padding": PADDING})
            latencies.append(time.perf_counter() - sent)


def consume(kind: str, folder: Path, expected: int, result) -> None:
    delivered, undecodable, delays = 0, 0, []
    idle_since = time.monotonic()
    with connection(kind, folder) as conn:
        queue = conn.SimpleQueue("bench")
        while delivered < expected and time.monotonic() - idle_since < 10:
            try:
                message = queue.get(timeout=1)
            except json.JSONDecodeError:  # kombu read a message file that is still being written
                undecodable += 1
                continue
            except Exception as exc:  # queue.Empty, or a transport error
                if type(exc).__name__ != "Empty":
                    undecodable += 1
                continue
            idle_since = time.monotonic()
            delays.append(time.time() - message.payload["sent"])
            message.ack()
            delivered += 1
    result.update(delivered=delivered, undecodable=undecodable, delays=delays)


def run(kind: str, messages: int, producers: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"chorus-broker-{kind}-") as tmp:
        folder = Path(tmp)
        connection(kind, folder).SimpleQueue("bench").close()  # create the queue before anyone races for it
        with multiprocessing.Manager() as manager:
            latencies, result = manager.list(), manager.dict()
            consumer = multiprocessing.Process(target=consume, args=(kind, folder, messages * producers, result))
            consumer.start()
            started = time.perf_counter()
            workers = [
                multiprocessing.Process(target=produce, args=(kind, folder, messages, latencies))
                for _ in range(producers)
            ]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            consumer.join()
            elapsed = time.perf_counter() - started
            return {"latencies": sorted(latencies), "elapsed": elapsed, **dict(result)}


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=3000, help="messages per producer")
    parser.add_argument("--producers", type=int, default=3)
    args = parser.parse_args(argv)
    total = args.messages * args.producers
    print(f"{args.producers} producers x {args.messages} messages, one consumer; latencies in ms")
    print(
        f"{'transport':<12} {'publish p50/p99':>16} {'delivery p50/p99':>17} "
        f"{'delivered':>10} {'undecodable':>12} {'msg/s':>7}"
    )
    for kind in ("filesystem", "sqlite"):
        r = run(kind, args.messages, args.producers)
        delays = sorted(r.get("delays", []))
        print(
            f"{kind:<12} {pct(r['latencies'], 0.5):7.2f} / {pct(r['latencies'], 0.99):6.2f} "
            f"{pct(delays, 0.5):8.1f} / {pct(delays, 0.99):6.1f} {r.get('delivered', 0):>5}/{total:<4} "
            f"{r.get('undecodable', 0):>12} {r.get('delivered', 0) / r['elapsed']:7.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
