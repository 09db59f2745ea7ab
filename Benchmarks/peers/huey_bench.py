"""huey (SqliteHuey) measured the way `baton-bench durable` measures Baton's SQLite store.

Prints one JSON line per measurement:
    {"peer": "huey", "workload": "burndown", "workers": 2, "n": 100000, "jobs_per_s": ..., ...}

  burndown  N no-op tasks enqueued first, then a consumer with W worker threads drains them; rate =
            N / (consumer start -> N tasks complete). Completion is counted by huey's SIGNAL_COMPLETE.
  chain     N tasks, each enqueued by the one before when it finishes (huey has no stored dependency
            graph; this is its way of running a sequence, with each step persisted before it runs).
  latency   one idle consumer; one task enqueued at a time; enqueue -> task start, p50/p99.

Tuning (said in the README): huey's SQLite storage is polled. Its defaults (first poll after 0.1 s, backing
off to 10 s) would make it look far slower than it is; here the consumer polls every millisecond
(initial_delay = max_delay = 0.001, no backoff), which favours huey on latency and chain. Its commits
use `fsync=False` (synchronous = OFF: its only setting below FULL, less durable than Baton's NORMAL),
which favours huey on every workload.
"""

import argparse
import json
import os
import shutil
import tempfile
import threading
import time

from huey import SqliteHuey
from huey.signals import SIGNAL_COMPLETE


def make_huey(directory, name):
    return SqliteHuey(name, filename=os.path.join(directory, name + ".db"), results=False, fsync=False)


def consumer_for(huey, workers):
    return huey.create_consumer(
        workers=workers, worker_type="thread", periodic=False, initial_delay=0.001, backoff=1.0,
        max_delay=0.001, check_worker_health=False)


def burndown(directory, n, workers):
    huey = make_huey(directory, "burn%d" % workers)
    done = threading.Event()
    count = [0]
    lock = threading.Lock()

    @huey.task()
    def noop(i):
        return None

    @huey.signal(SIGNAL_COMPLETE)
    def completed(signal, task, *args, **kwargs):
        with lock:
            count[0] += 1
            if count[0] == n:
                done.set()

    for i in range(n):
        noop(i)
    consumer = consumer_for(huey, workers)
    start = time.perf_counter()
    consumer.start()
    done.wait()
    seconds = time.perf_counter() - start
    consumer.stop(graceful=True)
    return {"peer": "huey", "workload": "burndown", "workers": workers, "n": n, "seconds": seconds,
            "jobs_per_s": n / seconds}


def chain(directory, n):
    huey = make_huey(directory, "chain")
    done = threading.Event()

    @huey.task()
    def step(i):
        if i + 1 < n:
            step(i + 1)
        else:
            done.set()

    consumer = consumer_for(huey, 1)
    consumer.start()
    start = time.perf_counter()
    step(0)
    done.wait()
    seconds = time.perf_counter() - start
    consumer.stop(graceful=True)
    return {"peer": "huey", "workload": "chain", "n": n, "seconds": seconds, "jobs_per_s": n / seconds}


def latency(directory, samples):
    huey = make_huey(directory, "latency")
    started = {}
    events = {}

    @huey.task()
    def stamp(i):
        started[i] = time.perf_counter()
        events[i].set()

    consumer = consumer_for(huey, 1)
    consumer.start()
    latencies = []
    for i in range(samples):
        events[i] = threading.Event()
        submitted = time.perf_counter()
        stamp(i)
        events[i].wait()
        latencies.append((started[i] - submitted) * 1000)
        time.sleep(0.002)
    consumer.stop(graceful=True)
    latencies.sort()
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return {"peer": "huey", "workload": "latency", "samples": samples, "p50_ms": p50, "p99_ms": p99}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--burn", type=int, default=5000)
    parser.add_argument("--chain", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="huey-bench-")
    try:
        for workers in (1, 2, 4):
            print(json.dumps(burndown(directory, args.burn, workers)), flush=True)
        print(json.dumps(chain(directory, args.chain)), flush=True)
        print(json.dumps(latency(directory, args.samples)), flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
