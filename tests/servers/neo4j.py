"""Neo4j Community (5.26 LTS, Java 17) from Maven Central's jars: one JVM serving Bolt only.

It runs the server's own entry point, org.neo4j.server.CommunityEntryPoint, as `neo4j console`
would, configured by a neo4j.conf that we write: no launcher source to compile, and SIGTERM
triggers the server's own shutdown hook.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

from tests.servers.common import JvmServer, fetch_maven_jars, pom_property

POM = Path(__file__).parent / "maven" / "neo4j" / "pom.xml"


def fetch_jars() -> Path:
    """The server's runtime jars, copied once from Maven Central into a cache outside the repo."""
    # The pom is the one place the version is set; the jar cache is named after it.
    return fetch_maven_jars(POM, f"neo4j-{pom_property(POM, 'neo4j.version')}")


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


class Neo4jServer(JvmServer):
    """Authentication on, as a team's server runs: user `neo4j` with a password of its own."""

    name = "Neo4j"
    start_timeout = 120.0
    stop_timeout = 30.0
    user = "neo4j"

    def __init__(self, port: int | None = None) -> None:
        super().__init__(port)
        self.password = secrets.token_hex(12)

    @property
    def address(self) -> str:
        """The Bolt address, without credentials (the driver's own form)."""
        return f"bolt://127.0.0.1:{self.port}"

    @property
    def auth(self) -> tuple[str, str]:
        return self.user, self.password

    @property
    def uri(self) -> str:
        """The address with the credentials in it, as a user may give BATON_GRAPH_URL."""
        return f"bolt://{self.user}:{self.password}@127.0.0.1:{self.port}"

    def _config(self) -> str:
        return "\n".join([
            "dbms.security.auth_enabled=true",
            # A test that logs in wrongly must not lock the user out of every other test.
            "dbms.security.auth_max_failed_attempts=0",
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

    def _prepare(self) -> list[str]:
        libs = fetch_jars()
        conf = self.root / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "neo4j.conf").write_text(self._config())
        if not (self.root / "data" / "dbms" / "auth.ini").exists():  # before the first start only
            subprocess.run(["java", "-cp", str(libs / "*"), "org.neo4j.cli.AdminTool", "dbms", "set-initial-password",
                            self.password], env={**os.environ, "NEO4J_HOME": str(self.root), "NEO4J_CONF": str(conf)},
                           check=True, capture_output=True, timeout=120)
        # --console-mode keeps the server's log on stdout, so JVM errors land in the same file.
        return ["java", *JVM_FLAGS, "-cp", str(libs / "*"), "org.neo4j.server.CommunityEntryPoint",
                f"--home-dir={self.root}", f"--config-dir={conf}", "--console-mode"]

    def _answers(self) -> bool:
        # Imported here so that importing this module does not need the driver.
        from neo4j import GraphDatabase
        from neo4j.exceptions import DriverError, Neo4jError

        # Short timeouts: a listener that accepts but never answers would hold one try for the
        # driver's 60 s acquisition default.
        try:
            with GraphDatabase.driver(self.address, auth=self.auth, connection_timeout=5,
                                      connection_acquisition_timeout=5) as driver:
                driver.verify_connectivity()
        except (DriverError, Neo4jError):
            return False
        return True
