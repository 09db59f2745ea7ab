"""The PostgreSQL job queues Baton is measured against, run on the same server in the same run.

Each invocation prints one JSON line per measurement, in the shape baton-bench prints its own:
    {"peer": "pgqueuer", "workload": "burndown", "workers": 2, "n": 100000, "jobs_per_s": 4800.0, ...}

Workloads
  burndown  N no-op jobs enqueued first (in batches), then W worker processes are started; each imports,
            connects and says "ready", then waits at a gate. All are released at once ("go"); the rate is
            N / (last job started - go), so interpreter start-up is not counted but everything after the
            release is (as for Baton, whose rate is N / (last start - release of its connected loops)).
            span_jobs_per_s is N / (last start - first start), the older definition, for information.
            Checked afterwards, or the run fails: every job ran exactly once in total (each process counts
            its executions), the queue table is empty and the peer's own log/state table says N succeeded;
            per_process lists each process's count, so a process that did nothing shows.
  latency   one idle worker; jobs submitted one at a time, 20 ms apart; submit->start p50/p99 from the
            wall clock (same machine, same clock).
  chain     (chancy) an N-step workflow where each step depends on the previous one.
  fanout    (chancy) 1 -> N -> 1 workflow.

Tuning (fair, and said in the README): each peer uses LISTEN/NOTIFY where it has it, and its batch and
concurrency knobs are set for no-op jobs -- pgqueuer batch_size 100 (its default is 10), procrastinate
concurrency 10 per worker with listen_notify, chancy queue and workflow polling at 1 s (its minimum
integer interval; defaults are 1 s and 30 s) and its leader election at 1 s (default 60 s; workflows
only advance on the leader). Each peer gets a fresh database per measurement.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time

import psycopg


def database_url(base: str, name: str) -> str:
    head, _, _ = base.rpartition("/")
    return f"{head}/{name}"


def fresh_database(base: str, name: str) -> str:
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(base, name)


def percentile(values, p):
    values = sorted(values)
    if not values:
        return None
    k = min(len(values) - 1, max(0, int(round(p / 100 * (len(values) - 1)))))
    return values[k]


def spawn_workers(args, url, count, extra):
    procs = []
    for _ in range(count):
        cmd = [sys.executable, __file__, "worker", "--peer", args.peer, "--url", url] + extra
        procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    return procs


def release(procs):
    """Waits until every worker said "ready" (imported, connected), then lets them all go at once."""
    for p in procs:
        line = p.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"{p.args}: expected 'ready', got {line!r}")
    go = time.time()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    return go


async def gate():
    """The worker side of release(): say ready, wait for go."""
    print("ready", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    if line.strip() != "go":
        raise SystemExit(f"worker: expected 'go', got {line!r}")


def collect(procs, timeout):
    results = []
    for p in procs:
        out, _ = p.communicate(input="", timeout=timeout)
        if p.returncode != 0:
            raise SystemExit(f"{p.args} exited with {p.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


# ---------------------------------------------------------------- pgqueuer

async def pgqueuer_install(url):
    from pgqueuer import Queries

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await Queries.from_psycopg_connection(conn).install()
    await conn.close()


async def pgqueuer_enqueue(url, n, payload=None):
    from pgqueuer import Queries

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    q = Queries.from_psycopg_connection(conn)
    chunk = 5000
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        await q.enqueue(["noop"] * m, [payload] * m, [0] * m)
    await conn.close()


async def pgqueuer_worker(url, batch, stop_after, drain):
    from pgqueuer import QueueManager, Queries
    from pgqueuer.types import QueueExecutionMode

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    qm = QueueManager(Queries.from_psycopg_connection(conn))
    stats = {"first": None, "last": None, "n": 0, "lat": []}

    @qm.entrypoint("noop")
    async def noop(job):
        now = time.time()
        if stats["first"] is None:
            stats["first"] = now
        stats["last"] = now
        stats["n"] += 1
        if job.payload:
            stats["lat"].append(now - float(job.payload.decode()))
        if stop_after and stats["n"] >= stop_after:
            qm.shutdown.set()

    mode = QueueExecutionMode.drain if drain else QueueExecutionMode.continuous
    await gate()
    await qm.run(batch_size=batch, mode=mode, dequeue_timeout=__import__("datetime").timedelta(seconds=1))
    await conn.close()
    return stats


async def pgqueuer_submit_one(conn_q):
    await conn_q.enqueue("noop", str(time.time()).encode())


# ----------------------------------------------------------- procrastinate

def procrastinate_app(url):
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))
    return app


async def procrastinate_install(url):
    app = procrastinate_app(url)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def procrastinate_enqueue(url, n):
    app = procrastinate_app(url)

    @app.task(name="noop")
    async def noop(sent=None):
        pass

    async with app.open_async():
        chunk = 5000
        for start in range(0, n, chunk):
            await noop.batch_defer_async(*[{} for _ in range(min(chunk, n - start))])


async def procrastinate_worker(url, concurrency, stop_after, drain):
    app = procrastinate_app(url)
    stats = {"first": None, "last": None, "n": 0, "lat": []}
    done = asyncio.Event()

    @app.task(name="noop")
    async def noop(sent=None):
        now = time.time()
        if stats["first"] is None:
            stats["first"] = now
        stats["last"] = now
        stats["n"] += 1
        if sent is not None:
            stats["lat"].append(now - sent)
        if stop_after and stats["n"] >= stop_after:
            done.set()

    async with app.open_async():
        await gate()
        worker = asyncio.create_task(app.run_worker_async(
            concurrency=concurrency, wait=not drain, listen_notify=True, install_signal_handlers=False,
            fetch_job_polling_interval=1.0))
        if drain:
            await worker
        else:
            await done.wait()
            worker.cancel()
            try:
                await worker
            except (asyncio.CancelledError, Exception):
                pass
    return stats


# ------------------------------------------------------------------ chancy

async def chancy_noop():
    return None


async def chancy_run(url, workload, n):
    from chancy import Chancy, Job, Queue, Worker
    from chancy.plugins.workflow import Workflow, WorkflowPlugin

    from chancy.plugins.leadership import Leadership

    plugin = WorkflowPlugin(polling_interval=1)
    # Leadership polls every 60 s by default, and the workflow plugin only runs on the leader: 1 s here.
    async with Chancy(url, plugins=[plugin, Leadership(poll_interval=1, timeout=5)]) as chancy:
        await chancy.migrate()
        await chancy.declare(Queue("default", concurrency=10, polling_interval=1,
                                   executor="chancy.executors.asyncex.AsyncExecutor"))
        async with Worker(chancy, worker_id="bench") as worker:
            job = Job(func="peers_bench.chancy_noop", queue="default")
            wf = Workflow(f"{workload}-{n}")
            if workload == "chain":
                for i in range(n):
                    wf.add(f"s{i}", job, [f"s{i-1}"] if i else [])
            else:
                wf.add("root", job)
                for i in range(n):
                    wf.add(f"m{i}", job, ["root"])
                wf.add("sink", job, [f"m{i}" for i in range(n)])
            start = time.time()
            wid = await WorkflowPlugin.push(chancy, wf)
            await WorkflowPlugin.wait_for_workflow(chancy, wid, interval=1, timeout=600)
            elapsed = time.time() - start
    return elapsed


async def burndown_check(peer, url):
    """(jobs left in the queue, jobs the peer itself recorded as succeeded) after a burn-down."""
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        if peer == "pgqueuer":
            left = (await (await conn.execute("SELECT count(*) FROM pgqueuer")).fetchone())[0]
            succeeded = (await (await conn.execute(
                "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'")).fetchone())[0]
        else:
            left = (await (await conn.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')")).fetchone())[0]
            succeeded = (await (await conn.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")).fetchone())[0]
    finally:
        await conn.close()
    return left, succeeded


# -------------------------------------------------------------------- main

def worker_main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--peer")
    p.add_argument("--url")
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--concurrency", type=int, default=10)
    p.add_argument("--stop-after", type=int, default=0)
    p.add_argument("--drain", action="store_true")
    a = p.parse_args(argv)
    if a.peer == "pgqueuer":
        stats = asyncio.run(pgqueuer_worker(a.url, a.batch, a.stop_after, a.drain))
    else:
        stats = asyncio.run(procrastinate_worker(a.url, a.concurrency, a.stop_after, a.drain))
    print(json.dumps(stats))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        return worker_main(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default=os.environ.get("BATON_POSTGRES_URL"))
    p.add_argument("--peer", required=True, choices=["pgqueuer", "procrastinate", "chancy"])
    p.add_argument("--workload", required=True, choices=["burndown", "latency", "chain", "fanout"])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--concurrency", type=int, default=10)
    args = p.parse_args()
    if not args.url:
        raise SystemExit("no server: set BATON_POSTGRES_URL (source .ci/postgres) or pass --url")
    url = fresh_database(args.url, f"bench_{args.peer}")
    tuning = {"pgqueuer": {"batch_size": args.batch}, "procrastinate": {"concurrency": args.concurrency},
              "chancy": {"polling_interval_s": 1, "leadership_poll_s": 1}}[args.peer]
    line = {"peer": args.peer, "workload": args.workload, "n": args.n, "tuning": tuning}

    if args.peer == "chancy":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        elapsed = asyncio.run(chancy_run(url, args.workload, args.n))
        line.update(seconds=round(elapsed, 3), ms_per_job=round(1000 * elapsed / max(1, args.n), 2))
        print(json.dumps(line), flush=True)
        return

    install = pgqueuer_install if args.peer == "pgqueuer" else procrastinate_install
    asyncio.run(install(url))
    extra = ["--batch", str(args.batch), "--concurrency", str(args.concurrency)]
    if args.workload == "burndown":
        if args.peer == "pgqueuer":
            asyncio.run(pgqueuer_enqueue(url, args.n))
        else:
            asyncio.run(procrastinate_enqueue(url, args.n))
        procs = spawn_workers(args, url, args.workers, extra + ["--drain"])
        go = release(procs)
        results = collect(procs, timeout=1800)
        done = sum(r["n"] for r in results)
        first = min(r["first"] for r in results if r["first"])
        last = max(r["last"] for r in results if r["last"])
        left, succeeded = asyncio.run(burndown_check(args.peer, url))
        line.update(workers=args.workers, completed=done, per_process=[r["n"] for r in results],
                    queue_left=left, recorded_succeeded=succeeded, seconds=round(last - go, 3),
                    jobs_per_s=round(done / max(1e-9, last - go), 1),
                    span_jobs_per_s=round(done / max(1e-9, last - first), 1),
                    startup_s=round(first - go, 3))
        if done != args.n or left != 0 or succeeded != args.n:
            print(json.dumps(line), file=sys.stderr)
            raise SystemExit(f"{args.peer} burn-down check failed: ran {done} of {args.n}, "
                             f"{left} left in the queue, {succeeded} recorded as succeeded")
    else:
        samples = args.n
        procs = spawn_workers(args, url, 1, extra + ["--stop-after", str(samples)])
        release(procs)
        time.sleep(2)  # the worker is up and listening before the first submission (benchmark, not a test)

        async def submit():
            if args.peer == "pgqueuer":
                from pgqueuer import Queries

                conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
                q = Queries.from_psycopg_connection(conn)
                for _ in range(samples):
                    await q.enqueue("noop", str(time.time()).encode())
                    await asyncio.sleep(0.02)
                await conn.close()
            else:
                app = procrastinate_app(url)

                @app.task(name="noop")
                async def noop(sent=None):
                    pass

                async with app.open_async():
                    for _ in range(samples):
                        await noop.defer_async(sent=time.time())
                        await asyncio.sleep(0.02)

        asyncio.run(submit())
        results = collect(procs, timeout=600)
        lat = results[0]["lat"]
        line.update(workers=1, p50_ms=round(1000 * percentile(lat, 50), 2), p99_ms=round(1000 * percentile(lat, 99), 2),
                    samples=len(lat))
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
