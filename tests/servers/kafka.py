"""Apache Kafka from Maven Central's jars: one JVM in KRaft combined mode (broker and controller)."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from tests.servers.common import free_port, port_open, wait_until

POM = Path(__file__).parent / "maven" / "kafka" / "pom.xml"
START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
"""


def kafka_version() -> str:
    # The pom is the one place the version is set; the jar cache is named after it.
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    version = ElementTree.parse(POM).getroot().findtext("m:properties/m:kafka.version", namespaces=ns)
    if not version:
        raise RuntimeError(f"no kafka.version property in {POM}")
    return version


def fetch_jars() -> Path:
    """The broker's runtime jars, copied once from Maven Central into a cache outside the repo."""
    libs = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "baton" / f"kafka-{kafka_version()}" / "libs"
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
            capture_output=True, text=True, timeout=600,
        )
        if result.returncode != 0:
            raise RuntimeError(f"mvn could not fetch the Kafka jars:\n{(result.stdout + result.stderr)[-4000:]}")
        try:
            scratch.rename(libs)
        except OSError:
            if not libs.is_dir():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return libs


class KafkaServer:
    def __init__(self, port: int | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="baton-kafka-"))
        self.port = port or free_port()
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.log = self.root / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _server_properties(self) -> str:
        controller = f"127.0.0.1:{self.controller_port}"
        return "\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            # Static voters: `format` then needs no --standalone and the quorum is fixed.
            f"controller.quorum.voters=1@{controller}",
            f"listeners=PLAINTEXT://{self.bootstrap},CONTROLLER://{controller}",
            f"advertised.listeners=PLAINTEXT://{self.bootstrap},CONTROLLER://{controller}",
            "inter.broker.listener.name=PLAINTEXT",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            f"log.dirs={self.root / 'data'}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            # The defaults (50 partitions, 3 s) make a test's first consumer group slow to join.
            "offsets.topic.num.partitions=1",
            "transaction.state.log.num.partitions=1",
            "group.initial.rebalance.delay.ms=0",
            # A broker killed without deregistering keeps its id until its session ends (default 9 s):
            # until then the restarted broker is refused with DUPLICATE_BROKER_REGISTRATION.
            "broker.session.timeout.ms=3000",
            "broker.heartbeat.interval.ms=500",
            "",
        ])

    def _java(self, libs: Path, *args: str) -> list[str]:
        return ["java", "-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.root / 'log4j2.properties'}",
                "-cp", str(libs / "*"), *args]

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> KafkaServer:
        if self.running():
            return self
        libs = fetch_jars()
        config = self.root / "server.properties"
        config.write_text(self._server_properties())
        (self.root / "log4j2.properties").write_text(LOG4J2)
        if not (self.root / "data" / "meta.properties").exists():
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")  # as StorageTool random-uuid
            result = subprocess.run(
                self._java(libs, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)),
                capture_output=True, text=True, timeout=60,
            )
            if result.returncode != 0:
                raise RuntimeError(f"Kafka storage format failed:\n{result.stdout}{result.stderr}")
        # log4j logs to the console, so JVM errors and broker warnings land in the same file.
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                self._java(libs, "kafka.Kafka", str(config)),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        try:
            wait_until(self._ready, timeout=START_TIMEOUT, what=f"Kafka on {self.bootstrap}")
        except (TimeoutError, RuntimeError) as error:
            self._abandon()
            raise type(error)(f"{error}; tail of {self.log}:\n{self.log_tail()}") from None
        return self

    def _ready(self) -> bool:
        if not self.running():
            raise RuntimeError("Kafka exited during start")
        # Ask a client only once the port listens: librdkafka backs off up to 10 s between refused connects.
        if not port_open(self.port):
            return False
        # Imported here so that importing this module does not need the Kafka client.
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        try:
            AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=5)
        except KafkaException:
            return False
        return True

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def _signal(self, process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
        # Only while unreaped: a reaped process's group id may already belong to someone else.
        if process.poll() is None:
            os.killpg(process.pid, signum)  # its own group: start_new_session

    def _abandon(self) -> None:
        """SIGKILL the broker and reap it, without waiting for its port: after a failed start
        another process may hold that port."""
        process, self._process = self._process, None
        if process is not None:
            self._signal(process, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT)

    def kill(self) -> None:
        """Take the broker away as a crash would; the next start() recovers its data."""
        if self._process is None:
            return
        self._abandon()
        wait_until(lambda: not port_open(self.port), timeout=STOP_TIMEOUT, what="Kafka shutdown")

    def stop(self) -> None:
        if self._process is not None:
            self._signal(self._process, signal.SIGTERM)
            try:
                self._process.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass  # kill() below ends it
        self.kill()

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
