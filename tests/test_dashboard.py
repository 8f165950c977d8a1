"""`baton serve`: the lead's dashboard, served by the real command and read by a real
headless Chromium (Debian's chromium and chromium-driver, driven by Selenium).

The browser tests skip, saying why, where chromium, its driver or selenium is missing
(scripts/test installs them). Each saves a screenshot under artifacts/dashboard/.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers.common import free_port
from tests.workspace import ROOT, make_repo, run_process, two_agents

ARTIFACTS = ROOT / "artifacts" / "dashboard"
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
TOKEN = "s3cret-token-for-tests"
XSS_DECISION = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
XSS_FILE = "src/<img src=x onerror=window.__pwned=3>.py"
XSS_TICKET = "javascript:window.alert.1"
XSS_GOAL = '<a href="javascript:window.__pwned=4">go</a>'
XSS_REASON = '<img src=x onerror="window.__pwned = 5">migrating the cart schema'


def _missing_browser() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if not CHROMIUM or not DRIVER:
        return "Debian's chromium and chromium-driver are not installed (apt-get install -y chromium chromium-driver)"
    return None


browser_test = pytest.mark.skipif(_missing_browser() is not None, reason=_missing_browser() or "")


class Dashboard:
    """A `baton serve` process on a free port, ended by the test that started it."""

    def __init__(self, *args: str, cwd: Path, env: dict | None = None) -> None:
        self.port = free_port()
        self.log = cwd / f"serve-{self.port}.log"
        code = "import sys\nfrom baton.skills.frontends.cli import run\nsys.argv[0] = 'baton'\nrun()"
        self.process = subprocess.Popen([sys.executable, "-c", code, "serve", "--port", str(self.port), *args],
                                        cwd=cwd, env={**os.environ, **(env or {})},
                                        stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 20) -> Dashboard:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"baton serve did not listen within {timeout} s: {self.output()}")

    def request(self, method: str, path: str, headers: dict | None = None, body: bytes | None = None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def get(self, path: str, **headers: str):
        return self.request("GET", path, headers={key.replace("_", "-"): value for key, value in headers.items()})

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(*args: str, env: dict | None = None) -> Dashboard:
        # Started in the repository's worktree: the dashboard shows that project's tickets.
        shop = tmp_path / "shop"
        dashboard = Dashboard(*args, cwd=shop if shop.is_dir() else tmp_path, env=env)
        started.append(dashboard)
        return dashboard.wait_ready()

    yield start
    for dashboard in started:
        dashboard.stop()


@pytest.fixture
def browser(request):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1000",
                     "--disable-gpu", "--no-first-run"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{request.node.name}.png"))
    driver.quit()


def wait_for(driver, condition, timeout: float = 10):
    """condition's first truthy answer; an element the live feed replaced meanwhile (stale)
    is read again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(condition)


def seed_conflict(worktrees, cli) -> Path:
    """OMN-1 and OMN-2 in two worktrees of one repository, both on src/db.py."""
    main = two_agents(worktrees, cli)
    cli(main, "update", "--phase", "implementing", "--next", "write the migration")
    return main


def seed_leases(worktrees, cli) -> Path:
    """seed_conflict, then OMN-2 touches src/api/cart.py, which OMN-1's exclusive lease on
    src/api/** (a hostile reason) covers; OMN-1 also holds docs/** shared, for a minute."""
    main, second = worktrees
    seed_conflict(worktrees, cli)
    assert cli(second, "touch", "src/api/cart.py")[0] == 0
    assert cli(main, "claim", "--exclusive", "src/api/**", "--ttl", "2h", "--reason", XSS_REASON)[0] == 0
    assert cli(main, "claim", "docs/**", "--ttl", "1m")[0] == 0
    return main


# Without a browser: what the HTTP interface promises.

def test_leases_on_the_ticket_page_and_the_map(home, worktrees, cli, serve):
    """The ticket page lists the ticket's leases (kind, pattern, holder, expiry, reason as
    escaped data), marks the one expiring within the grace window, and names the other
    ticket a lease covers; the map draws the lease as an edge from its holder."""
    seed_leases(worktrees, cli)
    dashboard = serve(env={"BATON_LEASE_GRACE": "5m"})  # docs/** ends in 6 min, src/api/** in 2 h 5 min
    status, _, body = dashboard.get("/ticket/OMN-1")
    page = body.decode()
    assert status == 200
    section = page[page.index('<section id="leases">'):page.index('<section id="signals">')]
    held = section.split("<li")[1:3]
    exclusive, shared = sorted(held, key=lambda item: "docs/**" in item)
    assert "src/api/**" in exclusive and ">exclusive<" in exclusive and "held by OMN-1" in exclusive
    assert "expiring soon" not in exclusive and 'class="lease exclusive"' in exclusive
    assert "docs/**" in shared and ">shared<" in shared and "expiring soon" in shared and "expiring" in shared[:40]
    assert "&lt;img src=x onerror=&#34;window.__pwned = 5&#34;&gt;migrating the cart schema" in exclusive
    assert "<img src=x" not in page
    assert "covers" in section and "/ticket/OMN-2" in section and "src/api/cart.py" in section
    other = dashboard.get("/ticket/OMN-2")[2].decode()
    assert "OMN-1</a>'s exclusive lease <code>src/api/**</code> covers its touches of" in other
    assert "None held." in other
    found = json.loads(dashboard.get("/api/map")[2])
    assert found["leases"] == "ok"
    [edge] = [e for e in found["edges"] if e["lease"]]
    assert (edge["a"], edge["b"], edge["files"]) == ("OMN-1", "OMN-2", ["src/api/cart.py"])
    assert edge["lease"]["exclusive"] is True and edge["lease"]["pattern"] == "src/api/**"
    assert not edge["lease"]["expiring"] and edge["lease"]["reason"] == XSS_REASON, "JSON keeps the text as data"
    assert {node["id"]: node["exclusive_lease"] for node in found["nodes"]} == {"OMN-1": True, "OMN-2": False}


def test_a_lease_alone_puts_its_tickets_on_the_map(home, worktrees, cli, serve):
    """Two tickets that share no file, one leasing what the other touched: the map shows both."""
    main, second = worktrees
    cli(main, "bind", "OMN-1")
    cli(main, "touch", "src/ui/app.py")
    cli(second, "bind", "OMN-2")
    cli(second, "touch", "src/api/cart.py")
    assert cli(main, "claim", "src/api/")[0] == 0
    dashboard = serve()
    found = json.loads(dashboard.get("/api/map")[2])
    assert [node["id"] for node in found["nodes"]] == ["OMN-1", "OMN-2"] and found["in_conflict"] == 0
    [edge] = found["edges"]
    assert edge["lease"]["pattern"] == "src/api/" and not edge["lease"]["exclusive"] and edge["files"] == [
        "src/api/cart.py"]
    assert json.loads(dashboard.get("/api/map?agent=nobody")[2])["edges"] == [], "the filters apply to leases too"


def test_read_only_every_write_method_gets_405(home, worktrees, cli, serve):
    seed_conflict(worktrees, cli)
    dashboard = serve()
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for path in ("/", "/api/overview", "/ticket/OMN-1", "/events", "/static/dashboard.js", "/login", "/nowhere"):
            status, headers, _ = dashboard.request(method, path, body=b"x=1")
            assert status == 405, (method, path, status)
            assert headers.get("allow") == "GET, HEAD"
    status, _, body = dashboard.get("/api/overview")
    assert status == 200 and {row["task_id"] for row in json.loads(body)["sessions"]} == {"OMN-1", "OMN-2"}


def test_the_json_is_the_cli_json(home, worktrees, cli, serve):
    main = seed_conflict(worktrees, cli)
    dashboard = serve()
    _, out, _ = cli(main, "list", "--json")
    assert json.loads(dashboard.get("/api/overview")[2])["sessions"] == json.loads(out)
    ticket = json.loads(dashboard.get("/api/ticket/OMN-1")[2])
    _, out, _ = cli(main, "resume", "OMN-1", "--json")
    resumed = json.loads(out)
    for key in ("status", "conflicts", "related_decisions"):
        assert ticket[key] == resumed[key], key
    assert ticket["session"]["decisions"] == resumed["session"]["decisions"]
    assert ticket["bound"] is False and ticket["live_state"] == [], "the dashboard never binds nor probes"


def test_the_overview_shows_the_latest_checkpoint(home, worktrees, cli, serve):
    main = seed_conflict(worktrees, cli)
    (main / "notes.txt").write_text("work in progress\n")
    _, out, _ = cli(main, "checkpoint", "--label", "before the migration", "--json")
    taken = json.loads(out)["checkpoint"]["id"]
    dashboard = serve()
    row = next(r for r in json.loads(dashboard.get("/api/overview")[2])["sessions"] if r["task_id"] == "OMN-1")
    assert row["checkpoint"] == f"{taken[:10]} (manual)"
    assert f"{taken[:10]} (manual)" in dashboard.get("/")[2].decode()


def test_the_dashboard_never_binds_nor_probes(home, worktrees, cli, serve):
    main = seed_conflict(worktrees, cli)
    cli(main, "handoff", "--probe", "Marker=touch probe-ran")
    (main / "probe-ran").unlink()
    dashboard = serve()
    before = cli(main, "list", "--json")[1], cli(main, "signals", "--json")[1]
    for path in ("/", "/ticket/OMN-1", "/api/ticket/OMN-1", "/api/map"):
        assert dashboard.get(path)[0] == 200
    assert not (main / "probe-ran").exists(), "a probe ran"
    assert (cli(main, "list", "--json")[1], cli(main, "signals", "--json")[1]) == before, "something was recorded"


def test_a_store_unavailable_is_said_in_place(home, worktrees, cli, serve):
    seed_conflict(worktrees, cli)
    (home / "graph.db").unlink()
    (home / "graph.db").write_bytes(b"not a database at all" * 100)
    dashboard = serve()
    status, _, body = dashboard.get("/")
    page = body.decode()
    assert status == 200 and "conflict graph unavailable" in page
    assert 'id="row-OMN-1"' in page and 'id="row-OMN-2"' in page, "the rest of the page still renders"
    status, _, body = dashboard.get("/ticket/OMN-1")
    assert (status == 200 and "Conflict graph unavailable" in body.decode()
            and "Keep carts in PostgreSQL" in body.decode())
    (home / "registry.db").unlink()
    (home / "registry.db").write_bytes(b"not a database at all" * 100)
    dashboard = serve()
    status, _, body = dashboard.get("/")
    assert status == 200 and "Session registry unavailable" in body.decode()
    status, _, body = dashboard.get("/ticket/OMN-1")
    assert status == 200 and "Session registry unavailable" in body.decode()


def test_everything_shown_is_escaped_in_the_html(home, worktrees, cli, serve):
    main, second = worktrees
    cli(main, "bind", XSS_TICKET)
    cli(main, "decide", XSS_DECISION)
    cli(main, "update", "--goal", XSS_GOAL)
    cli(main, "touch", XSS_FILE)
    cli(second, "bind", "OMN-2")
    cli(second, "touch", XSS_FILE)
    dashboard = serve()
    for path in ("/", f"/ticket/{XSS_TICKET}", "/ticket/OMN-2"):
        status, headers, body = dashboard.get(path)
        page = body.decode()
        assert status == 200, path
        assert "<script>window" not in page and "<img src=x" not in page and '<a href="javascript:' not in page, path
        assert "script-src 'self'" in headers["content-security-policy"]
    page = dashboard.get(f"/ticket/{XSS_TICKET}")[2].decode()
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert 'href="/ticket/javascript%3Awindow.alert.1"' in dashboard.get("/")[2].decode()


def test_off_loopback_needs_a_token(home, worktrees, cli, serve, tmp_path):
    seed_conflict(worktrees, cli)
    refused = run_process(tmp_path, "serve", "--host", "0.0.0.0", "--port", str(free_port()), timeout=30)
    assert refused.returncode == 2 and "needs a token" in refused.stderr
    dashboard = serve("--host", "0.0.0.0", env={"BATON_DASHBOARD_TOKEN": TOKEN})
    for path in ("/", "/api/overview", "/events", "/ticket/OMN-1", "/static/dashboard.js", "/search?q=carts"):
        assert dashboard.get(path)[0] == 401, path
        assert dashboard.get(path, authorization="Bearer wrong")[0] == 401, path
    status, _, body = dashboard.get("/", accept="text/html")
    assert status == 401 and b'action="/login"' in body and b"OMN-1" not in body
    assert dashboard.get("/api/overview", authorization=f"Bearer {TOKEN}")[0] == 200
    form = {"content-type": "application/x-www-form-urlencoded"}
    assert dashboard.request("POST", "/login", form, b"token=wrong")[0] == 401
    status, headers, _ = dashboard.request("POST", "/login", form, f"token={TOKEN}".encode())
    cookie = headers["set-cookie"]
    assert status == 303 and "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    assert dashboard.get("/", cookie=cookie.split(";")[0])[0] == 200
    assert dashboard.get("/events?v=0", cookie="baton_dashboard=forged")[0] == 401
    assert TOKEN not in dashboard.output(), "the token reached the server's log"


def test_the_overview_follows_writes_on_every_backend(shared_home, worktrees, cli, serve):
    """On the embedded default the marker says when to list again; with servers, whose
    writes leave no mark here, the snapshot is listed again once it is a second old."""
    main = seed_conflict(worktrees, cli)
    dashboard = serve()
    rows = {row["task_id"]: row for row in json.loads(dashboard.get("/api/overview")[2])["sessions"]}
    assert rows["OMN-1"]["conflicts_with"] == ["OMN-2"] and rows["OMN-1"]["files_touched"] == ["src/db.py"]
    cli(main, "touch", "src/later.py")
    cli(main, "deliver")
    cli(main, "list")  # with Kafka, the cli fixture's projector applies the delivered touch first
    deadline = time.monotonic() + 10
    while True:
        rows = {row["task_id"]: row for row in json.loads(dashboard.get("/api/overview")[2])["sessions"]}
        if "src/later.py" in rows["OMN-1"]["files_touched"]:
            break
        assert time.monotonic() < deadline, rows["OMN-1"]
        time.sleep(0.1)
    status, _, body = dashboard.get("/ticket/OMN-1")
    assert status == 200 and "Keep carts in PostgreSQL" in body.decode() and "src/later.py" in body.decode()


def test_the_registry_watermark_moves_with_writes_not_reads(home, worktrees, cli):
    from baton.skills.core.commit import apply_events
    from baton.skills.runtime.settings import Settings
    from baton.skills.runtime.stores import Stores

    main = seed_conflict(worktrees, cli)
    stores = Stores(Settings.from_env(), projection=apply_events)
    try:
        before = stores.registry.watermark()
        run_process(main, "touch", "src/later.py")  # a pending event, applied by the next read
        touched = stores.registry.watermark()
        stores.registry.list_sessions()
        assert before != touched == stores.registry.watermark()
    finally:
        stores.close()


def test_loopback_refuses_a_foreign_host_header(home, serve):
    dashboard = serve()
    assert dashboard.get("/", host="attacker.example")[0] == 400
    assert dashboard.get("/", host=f"localhost:{dashboard.port}")[0] == 200


# In a real browser.

@browser_test
def test_overview_shows_both_tickets_with_the_conflict(home, worktrees, cli, serve, browser):
    from selenium.webdriver.common.by import By

    seed_conflict(worktrees, cli)
    dashboard = serve()
    browser.get(dashboard.url + "/")

    def read_rows(driver) -> dict[str, tuple[list[str], str, str]]:
        # Read in one go: the live feed may replace a row between two reads of it.
        return {row.get_attribute("data-task"): (row.get_attribute("class").split(), row.text,
                                                 row.value_of_css_property("background-color"))
                for row in driver.find_elements(By.CSS_SELECTOR, "#tickets tbody tr")}

    rows = wait_for(browser, read_rows)
    assert set(rows) == {"OMN-1", "OMN-2"}
    for task, other in (("OMN-1", "OMN-2"), ("OMN-2", "OMN-1")):
        classes, text, _ = rows[task]
        assert "conflict" in classes and other in text
    assert rows["OMN-1"][2] != "rgba(255, 255, 255, 1)"
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#map .edge"))
    assert wait_for(browser, lambda d: d.find_element(By.ID, "live").text == "live" and "live") == "live"


@browser_test
def test_the_conflict_edge_lists_its_files(home, worktrees, cli, serve, browser):
    from selenium.webdriver.common.by import By

    main, second = worktrees
    seed_conflict(worktrees, cli)
    cli(main, "touch", "src/cart.py", "src/only-mine.py")
    cli(second, "touch", "src/cart.py")
    dashboard = serve()
    browser.get(dashboard.url + "/")
    hit = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#map .hit"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#map circle")) == 2
    hit.click()
    panel = wait_for(browser, lambda d: d.find_element(By.ID, "edge-files").is_displayed()
                     and d.find_element(By.ID, "edge-files"))
    assert [item.text for item in panel.find_elements(By.CSS_SELECTOR, "li")] == ["src/cart.py", "src/db.py"]
    assert "OMN-1 ↔ OMN-2" in panel.text


@browser_test
def test_the_ticket_page_shows_its_decisions(home, worktrees, cli, serve, browser):
    from selenium.webdriver.common.by import By

    seed_conflict(worktrees, cli)
    dashboard = serve()
    browser.get(dashboard.url + "/")
    wait_for(browser, lambda d: d.find_element(By.LINK_TEXT, "OMN-1").click() or True)
    wait_for(browser, lambda d: d.find_element(By.TAG_NAME, "h1").text == "OMN-1")
    # Each read is whole or again: the live feed may replace a section between two reads.
    decisions = wait_for(browser, lambda d: [item.text for item in d.find_elements(By.CSS_SELECTOR, "#decisions li")])
    assert decisions == ["reported Keep carts in PostgreSQL"]
    conflicts = wait_for(browser, lambda d: d.find_element(By.ID, "conflicts").text)
    assert "OMN-2" in conflicts and "src/db.py" in conflicts
    assert "Persist payments in PostgreSQL" in wait_for(browser, lambda d: d.find_element(By.ID, "related").text)
    assert "write the migration" in wait_for(browser, lambda d: d.find_element(By.TAG_NAME, "main").text)


@browser_test
def test_a_touch_from_the_cli_updates_the_open_page(home, worktrees, cli, serve, browser):
    from selenium.webdriver.common.by import By

    main, _ = worktrees
    seed_conflict(worktrees, cli)
    dashboard = serve()
    browser.get(dashboard.url + "/")
    wait_for(browser, lambda d: d.find_element(By.ID, "live").text == "live")
    browser.execute_script("window.__samePage = true")
    count = lambda: browser.find_element(By.CSS_SELECTOR, "#row-OMN-1 td.n").text  # noqa: E731
    assert count() == "1"
    touched = run_process(main, "touch", "src/new-file.py")
    assert touched.returncode == 0, touched.stderr
    started = time.monotonic()
    wait_for(browser, lambda d: count() == "2", timeout=10)
    elapsed = time.monotonic() - started
    assert browser.execute_script("return window.__samePage") is True, "the page was reloaded"
    feed = wait_for(browser, lambda d: "src/new-file.py" in d.find_element(By.ID, "feed").text
                    and d.find_element(By.ID, "feed"))
    assert "OMN-1 touched" in feed.text
    first = browser.find_element(By.CSS_SELECTOR, "#tickets tbody tr").get_attribute("data-task")
    assert first == "OMN-1", "the row touched last moves to the top"
    print(f"touch to page: {elapsed:.2f} s after the CLI returned")


@browser_test
def test_an_xss_payload_is_inert(home, worktrees, cli, serve, browser):
    from selenium.webdriver.common.by import By

    main, second = worktrees
    cli(main, "bind", XSS_TICKET)
    cli(main, "decide", XSS_DECISION)
    cli(main, "update", "--goal", XSS_GOAL)
    cli(main, "touch", XSS_FILE)
    cli(second, "bind", "OMN-2")
    cli(second, "touch", XSS_FILE)
    dashboard = serve()
    browser.get(dashboard.url + "/")
    assert XSS_TICKET in browser.find_element(By.ID, "tickets").text
    wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#map .hit")).click()
    assert XSS_FILE in wait_for(browser, lambda d: d.find_element(By.ID, "edge-list").text)
    assert browser.execute_script("return window.__pwned") is None
    browser.find_element(By.LINK_TEXT, XSS_TICKET).click()
    wait_for(browser, lambda d: d.find_element(By.TAG_NAME, "h1").text == XSS_TICKET)
    text = browser.find_element(By.TAG_NAME, "main").text
    assert XSS_DECISION in text and XSS_FILE in text and XSS_GOAL in text
    assert not browser.find_elements(By.CSS_SELECTOR, "main img, main script, main a[href^='javascript']")
    assert browser.execute_script("return window.__pwned") is None
    assert browser.current_url == f"{dashboard.url}/ticket/javascript%3Awindow.alert.1"


@browser_test
def test_an_exclusive_lease_is_a_highlighted_edge_and_its_reason_stays_inert(home, worktrees, cli, serve, browser):
    from selenium.webdriver.common.by import By

    seed_leases(worktrees, cli)
    dashboard = serve(env={"BATON_LEASE_GRACE": "5m"})
    browser.get(dashboard.url + "/")
    line = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#map .edge.lease.exclusive"))
    assert line.get_attribute("data-a") == "OMN-1" and line.get_attribute("data-b") == "OMN-2"
    assert browser.find_elements(By.CSS_SELECTOR, "#map circle.exclusive-lease")
    hit = browser.execute_script("return document.querySelector('#map .edge.lease.exclusive').previousSibling")
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click'))", hit)
    title = wait_for(browser, lambda d: d.find_element(By.ID, "edge-title").text)
    assert title.startswith("OMN-1 holds exclusive lease src/api/** (until ") and "OMN-2 touched" in title
    assert [item.text for item in browser.find_elements(By.CSS_SELECTOR, "#edge-list li")] == ["src/api/cart.py"]
    browser.get(dashboard.url + "/ticket/OMN-1")
    leases = wait_for(browser, lambda d: d.find_element(By.ID, "leases").text)
    assert XSS_REASON in leases and "expiring soon" in leases  # docs/** ends in 6 minutes
    assert not browser.find_elements(By.CSS_SELECTOR, "main img, main script")
    assert browser.execute_script("return window.__pwned") is None


@browser_test
def test_off_loopback_the_browser_needs_the_token(home, worktrees, cli, serve, browser):
    from selenium.webdriver.common.by import By

    seed_conflict(worktrees, cli)
    dashboard = serve("--host", "0.0.0.0", "--token", TOKEN)
    browser.get(dashboard.url + "/")
    assert "OMN-1" not in browser.page_source and browser.find_element(By.ID, "token")
    assert browser.execute_script("return fetch('/api/overview').then(r => r.status)") == 401
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(browser, lambda d: d.find_elements(By.ID, "row-OMN-1"))
    assert browser.current_url == dashboard.url + "/"
    wait_for(browser, lambda d: d.find_element(By.ID, "live").text == "live")
    assert TOKEN not in dashboard.output()


def test_search_shows_the_dashboards_project_only(home, worktrees, cli, serve, tmp_path):
    """The same ticket id and decision text in another project never reach this one's search."""
    main, _ = worktrees
    rival = make_repo(tmp_path / "rival", "https://github.com/rival/shop.git")
    for worktree, context in ((rival, "rival"), (main, "acme")):  # the other team first: its point came first
        assert cli(worktree, "bind", "OMN-1")[0] == 0
        assert cli(worktree, "decide", "Keep carts in PostgreSQL", "--context", context)[0] == 0
    assert cli(rival, "decide", "Cache carts in Redis", "--context", "rival")[0] == 0
    assert cli(main, "index")[0] == 0
    dashboard = serve()
    status, _, body = dashboard.get("/api/recall?q=carts")
    found = json.loads(body)
    assert status == 200 and found["recall"] == "ok"
    assert [(hit["task_id"], hit["context"]) for hit in found["hits"]] == [("OMN-1", "acme")]


def test_a_ticket_bound_then_restored_elsewhere_counts_the_same_runs_everywhere(shared_home, worktrees, cli, serve,
                                                                                tmp_path):
    """One notion of a run: the bind and the restore each start one, and `baton list --json`,
    the dashboard (overview and ticket), `resume --json` and `baton runs` all count those two."""
    main, _ = worktrees
    assert cli(main, "bind", "OMN-1")[0] == 0
    (main / "notes.txt").write_text("work in progress\n")
    assert cli(main, "checkpoint")[0] == 0
    elsewhere = tmp_path / "elsewhere"
    code, _, err = cli(main, "restore", "OMN-1", "--into", str(elsewhere))
    assert code == 0, err
    cli(elsewhere, "deliver")
    _, out, _ = cli(main, "list", "--json")  # with Kafka, the cli fixture's projector applies the writes first
    [listed] = [row for row in json.loads(out) if row["task_id"] == "OMN-1"]
    assert listed["runs"] == 2
    _, out, _ = cli(main, "runs", "OMN-1", "--json")
    assert [(run["task_id"], run["kind"]) for run in json.loads(out)["runs"]] == [("OMN-1", "bind"),
                                                                                  ("OMN-1", "restore")]
    _, out, _ = cli(elsewhere, "resume", "OMN-1", "--json")
    assert json.loads(out)["session"]["runs"] == 2
    dashboard = serve()
    [row] = [r for r in json.loads(dashboard.get("/api/overview")[2])["sessions"] if r["task_id"] == "OMN-1"]
    assert row["runs"] == 2
    assert json.loads(dashboard.get("/api/ticket/OMN-1")[2])["session"]["runs"] == 2
    assert "run 2" in dashboard.get("/ticket/OMN-1")[2].decode() and "run 2" in dashboard.get("/")[2].decode()
