"""Neo4j Community (5.26 LTS, Java 17) from Maven Central's jars: one JVM serving Bolt only.

It runs the server's own entry point, org.neo4j.server.CommunityEntryPoint, as `neo4j console`
would, configured by a neo4j.conf that we write: no launcher source to compile, and SIGTERM
triggers the server's own shutdown hook.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from xml.etree import ElementTree

from tests.servers.common import free_port, port_open, wait_until

POM = Path(__file__).parent / "maven" / "neo4j" / "pom.xml"
START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0

# The --add-opens are mandatory (the page cache links into java.nio internals); the rest follow
# the server.jvm.additional defaults of the packaged neo4j.conf.
JVM_FLAGS = [
    "-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:-OmitStackTraceInFastThrow",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Djdk.nio.maxCachedBufferSize=1024",
    "-Dlog4j2.disable.jmx=true",
    "-Dfile.encoding=UTF-8",
]


def neo4j_version() -> str:
    # The pom is the one place the version is set; the jar cache is named after it.
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    version = ElementTree.parse(POM).getroot().findtext("m:properties/m:neo4j.version", namespaces=ns)
    if not version:
        raise RuntimeError(f"no neo4j.version property in {POM}")
    return version


def fetch_jars() -> Path:
    """The server's runtime jars, copied once from Maven Central into a cache outside the repo."""
    libs = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "baton" / f"neo4j-{neo4j_version()}" / "libs"
    if libs.is_dir():
        return libs
    if not shutil.which("mvn"):
        raise RuntimeError("Maven not installed: apt-get install -y maven")
    libs.parent.mkdir(parents=True, exist_ok=True)
    # Copy into a scratch folder and rename it into place, so an interrupted or concurrent
    # fetch never leaves a half-filled libs folder behind.
    scratch = Path(tempfile.mkdtemp(prefix="libs-", dir=libs.parent))
    try:
        result = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={scratch}"],
            check=False, capture_output=True, text=True, timeout=600,
        )
        if result.returncode != 0:
            raise RuntimeError(f"mvn could not fetch the Neo4j jars:\n{(result.stdout + result.stderr)[-4000:]}")
        try:
            scratch.rename(libs)
        except OSError:
            if not libs.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return libs


class Neo4jServer:
    def __init__(self, port: int | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="baton-neo4j-"))
        self.port = port or free_port()
        self.log = self.root / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"bolt://127.0.0.1:{self.port}"

    def _config(self) -> str:
        return "\n".join([
            "dbms.security.auth_enabled=false",
            "server.bolt.enabled=true",
            f"server.bolt.listen_address=127.0.0.1:{self.port}",
            "server.http.enabled=false",
            "server.https.enabled=false",
            "server.memory.pagecache.size=64m",
            f"server.directories.data={self.root / 'data'}",
            f"server.directories.logs={self.root / 'logs'}",
            f"server.directories.run={self.root / 'run'}",
            # On by default; a test server must not try to phone home.
            "dbms.usage_report.enabled=false",
            # Otherwise every database reserves a 256 MB transaction log up front.
            "db.tx_log.preallocate=false",
            # Bolt's event loops otherwise idle 2 x 5 s before a graceful stop completes.
            "internal.dbms.bolt.netty_server_shutdown_quiet_period=0",
            "",
        ])

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> Neo4jServer:
        if self.running():
            return self
        libs = fetch_jars()
        conf = self.root / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "neo4j.conf").write_text(self._config())
        # --console-mode keeps the server's log on stdout, so JVM errors land in the same file.
        command = ["java", *JVM_FLAGS, "-cp", str(libs / "*"), "org.neo4j.server.CommunityEntryPoint",
                   f"--home-dir={self.root}", f"--config-dir={conf}", "--console-mode"]
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        try:
            wait_until(self._ready, timeout=START_TIMEOUT, what=f"Neo4j on {self.uri}")
        except TimeoutError as error:
            self.kill()  # no half-started JVM left behind
            raise TimeoutError(f"{error}; tail of {self.log}:\n{self.log_tail()}") from None
        return self

    def _ready(self) -> bool:
        if not self.running():
            self._process = None  # already reaped by poll(): nothing for stop() to wait for
            raise RuntimeError(f"Neo4j exited during start; tail of {self.log}:\n{self.log_tail()}")
        if not port_open(self.port):
            return False
        # Imported here so that importing this module does not need the driver.
        from neo4j import GraphDatabase
        from neo4j.exceptions import DriverError, Neo4jError

        # Short timeouts: a listener that accepts but never answers would hold one try for the
        # driver's 60 s acquisition default.
        try:
            with GraphDatabase.driver(self.uri, auth=None, connection_timeout=5, connection_acquisition_timeout=5) as driver:
                driver.verify_connectivity()
        except (DriverError, Neo4jError):
            return False
        return True

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def _signal(self, process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
        try:
            os.killpg(process.pid, signum)  # its own group: start_new_session
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """Take the server away as a crash would; the next start() recovers its data."""
        if self._process is not None:
            self._signal(self._process, signal.SIGKILL)
        self._reap()

    def stop(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            self._signal(process, signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._signal(process, signal.SIGKILL)
        self._reap()

    def _reap(self) -> None:
        if self._process is None:
            return
        self._process.wait(timeout=STOP_TIMEOUT)
        self._process = None
        wait_until(lambda: not port_open(self.port), timeout=STOP_TIMEOUT, what="Neo4j shutdown")

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
