"""The dashboard's figures on the embedded default, at 1,000 active tickets of 20 files each
(the data set of bench/run.py: paths drawn from 20,000, so about 10,000 pairs of tickets
share a file):

  - the overview's server time, median (budget 100 ms): GET / timed inside the ASGI app,
    beside its baseline, the listing service itself (what `baton list --json` computes),
    and the first GET after a start and after a touch (the snapshot rebuilt);
  - the first page load in bytes (budget 300 KB): the page, its CSS and JS and the map's
    JSON as sent (gzip), and as the browser counted them when Debian's chromium is here;
  - a touch by the CLI to the open page (budget 2 s): from the moment `baton touch`
    returns to the moment the row changed in a headless chromium, beside the feed's poll
    interval (its floor).

    .venv/bin/python -m bench.dashboard [--sessions 1000] [--repeat 30] [--touches 10]
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import CLI, ROOT, scratch_worktree, spread
from bench.run import FILES_PER_SESSION, build_sessions
from tests.servers.common import free_port

BENCH_TASK = "BENCH-1"
BUDGETS = {"overview": 100.0, "bytes": 300 * 1024, "touch": 2000.0}


def line(name: str, samples: list[float], budget: float | None = None, unit: str = "ms") -> None:
    median, p10, p90 = spread(samples)
    verdict = "" if budget is None else ("  ok" if median <= budget else "  OVER BUDGET")
    limit = f" (budget {budget:.0f} {unit})" if budget is not None else ""
    print(f"  {name:58} {median:8.1f} {unit}  p10 {p10:7.1f}  p90 {p90:7.1f}{limit}{verdict}")


def bench_server_time(home: Path, worktree: Path, env: dict, repeat: int) -> None:
    from starlette.testclient import TestClient

    from baton.skills.core.commit import apply_events
    from baton.skills.frontends.web.app import create_app
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores
    from baton.skills.services.listing import list_sessions

    settings = Settings.from_env()
    baseline = []
    for _ in range(max(3, repeat // 5)):
        began = time.perf_counter()
        stores = Stores(settings, projection=apply_events)
        list_sessions(stores)
        stores.close()
        baseline.append((time.perf_counter() - began) * 1000)

    spent: list[float] = []
    inner = create_app(settings, token=None, loopback=True)

    async def timed(scope, receive, send):
        began = time.perf_counter()
        await inner(scope, receive, send)
        spent.append((time.perf_counter() - began) * 1000)

    client = TestClient(timed, base_url="http://127.0.0.1")
    assert client.get("/").status_code == 200
    cold = spent[-1]
    for _ in range(repeat):
        client.get("/")
    warm = spent[-repeat:]
    after_touch = []
    for n in range(max(3, repeat // 5)):
        subprocess.run([*CLI, "touch", f"src/bench-{n}.py"], cwd=worktree, env=env, check=True, capture_output=True)
        client.get("/")
        after_touch.append(spent[-1])
    print("Overview server time (GET /, inside the app):")
    line("GET /, the snapshot current (what a page load costs)", warm, BUDGETS["overview"])
    line("baseline: list_sessions() itself (`baton list --json`)", baseline)
    line("GET / after a touch (snapshot rebuilt, one row re-rendered)", after_touch)
    print(f"  {'first GET / after the start (imports, snapshot, every row)':58} {cold:8.1f} ms")


def start_server(env: dict, cwd: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    code = "import sys\nfrom baton.skills.frontends.cli import run\nsys.argv[0] = 'baton'\nrun()"
    server = subprocess.Popen([sys.executable, "-c", code, "serve", "--port", str(port)], cwd=cwd, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return server, port
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise SystemExit("baton serve did not start within 30 s")


def fetch(port: int, path: str) -> bytes:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path, headers={"Accept-Encoding": "gzip"})
        return connection.getresponse().read()
    finally:
        connection.close()


def bench_bytes(port: int) -> None:
    sent = {path: fetch(port, path) for path in ("/", "/static/dashboard.css", "/static/dashboard.js", "/api/map")}
    total = sum(len(body) for body in sent.values())
    unpacked = sum(len(gzip.decompress(body)) if body[:2] == b"\x1f\x8b" else len(body) for body in sent.values())
    verdict = "ok" if total <= BUDGETS["bytes"] else "OVER BUDGET"
    print("First page load (the page, its CSS and JS, the map's JSON):")
    print(f"  {'as sent (gzip)':58} {total / 1024:8.1f} KB  (budget 300 KB)  {verdict}")
    print(f"  {'unpacked':58} {unpacked / 1024:8.1f} KB")


def chromium():
    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        return None
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


WATCH_ROW = """
window.__changedAt = null;
new MutationObserver(() => { if (window.__changedAt === null) window.__changedAt = Date.now(); })
  .observe(document.querySelector('#tickets tbody'), {childList: true});
"""


def bench_browser(port: int, worktree: Path, env: dict, touches: int) -> None:
    from baton.skills.frontends.web.app import POLL

    driver = chromium()
    if driver is None:
        print("Browser figures skipped: Debian's chromium, chromium-driver or selenium is missing.")
        return
    try:
        driver.get(f"http://127.0.0.1:{port}/")
        deadline = time.monotonic() + 30
        while driver.execute_script("return document.getElementById('live').textContent") != "live":
            if time.monotonic() > deadline:
                raise SystemExit("the page's live feed did not connect within 30 s")
            time.sleep(0.05)
        counted = driver.execute_script(
            "return performance.getEntries().filter(e => e.transferSize !== undefined && !e.name.includes('/events'))"
            ".reduce((sum, e) => sum + e.transferSize, 0)")
        print(f"  {'as chromium counted it (transferSize, headers included)':58} {counted / 1024:8.1f} KB")
        latencies = []
        for n in range(touches):
            driver.execute_script(WATCH_ROW)
            subprocess.run([*CLI, "touch", f"src/watched-{n}.py"], cwd=worktree, env=env, check=True,
                           capture_output=True)
            returned = time.time() * 1000
            deadline = time.monotonic() + 10
            while (changed := driver.execute_script("return window.__changedAt")) is None:
                if time.monotonic() > deadline:
                    raise SystemExit("a touch did not reach the page within 10 s")
                time.sleep(0.02)
            latencies.append(changed - returned)
            time.sleep(0.3)  # let the page settle before the next touch
        print("A touch by the CLI to the open page (from `baton touch` returning to the row changing):")
        line("touch to page", latencies, BUDGETS["touch"])
        print(f"  {'floor: the feed looks every':58} {POLL * 1000:8.1f} ms (half of it on average)")
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--touches", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="baton-bench-dashboard-") as scratch:
        root = Path(scratch)
        home = root / "home"
        worktree = scratch_worktree(root)
        env = {**os.environ, "BATON_HOME": str(home), "BATON_RESIDENT": "off", "PYTHONPATH": str(ROOT),
               "BATON_BACKGROUND_INDEXING": "off"}
        os.environ.update(BATON_HOME=str(home), BATON_BACKGROUND_INDEXING="off")
        started = time.perf_counter()
        build_sessions(home, args.sessions, with_registry=True)
        subprocess.run([*CLI, "bind", BENCH_TASK], cwd=worktree, env=env, check=True, capture_output=True)
        subprocess.run([*CLI, "touch", "src/m1.py", "src/m2.py"], cwd=worktree, env=env, check=True,
                       capture_output=True)
        print(f"data set: {args.sessions} active sessions x {FILES_PER_SESSION} files "
              f"(built in {time.perf_counter() - started:.1f} s)\n")
        bench_server_time(home, worktree, env, args.repeat)
        server, port = start_server(env, root)
        try:
            fetch(port, "/")  # the server's first snapshot
            bench_bytes(port)
            bench_browser(port, worktree, env, args.touches)
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
