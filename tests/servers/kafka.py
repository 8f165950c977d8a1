"""Apache Kafka from Maven Central's jars: one JVM in KRaft combined mode (broker and controller)."""

from __future__ import annotations

import base64
import subprocess
import uuid
from pathlib import Path

from tests.servers.common import JvmServer, fetch_maven_jars, free_port, pom_property

POM = Path(__file__).parent / "maven" / "kafka" / "pom.xml"


def fetch_jars() -> Path:
    """The broker's runtime jars, copied once from Maven Central into a cache outside the repo."""
    # The pom is the one place the version is set; the jar cache is named after it.
    return fetch_maven_jars(POM, f"kafka-{pom_property(POM, 'kafka.version')}")


LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
"""


SCRAM = "SCRAM-SHA-256"
KEYSTORE_PASSWORD = "baton-test-keystore"  # guards a throwaway key of a loopback test broker


class KafkaServer(JvmServer):
    """scram: (user, password) turns authentication on: clients then connect with
    SASL_PLAINTEXT and SCRAM-SHA-256 as that user, whose credentials `format --add-scram`
    writes into the cluster's metadata before the first start (KRaft keeps no ZooKeeper to
    add them to). The broker's own traffic stays on a PLAINTEXT listener of another port.
    tls (with scram): that listener is SASL_SSL, its certificate self-signed for 127.0.0.1
    by keytool; `ca` is the certificate in PEM, for the clients to trust."""

    name = "Kafka"
    start_timeout = 90.0
    stop_timeout = 20.0

    def __init__(self, port: int | None = None, *, scram: tuple[str, str] | None = None, tls: bool = False) -> None:
        super().__init__(port)
        if tls and not scram:
            raise ValueError("tls needs scram: the test broker's TLS listener is its SASL_SSL one")
        self.scram = scram
        self.tls = tls
        taken = {self.port}
        self.controller_port = self._another_port(taken)
        self.internal_port = self._another_port(taken) if scram else self.port

    @staticmethod
    def _another_port(taken: set[int]) -> int:
        port = free_port()
        while port in taken:
            port = free_port()
        taken.add(port)
        return port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    address = bootstrap

    def client_config(self) -> dict[str, str]:
        """librdkafka's settings for a client of this broker (its credentials, if it has any)."""
        config = {"bootstrap.servers": self.bootstrap}
        if self.scram:
            config |= {"security.protocol": self.protocol, "sasl.mechanism": SCRAM,
                       "sasl.username": self.scram[0], "sasl.password": self.scram[1]}
        if self.tls:
            config["ssl.ca.location"] = str(self.ca)
        return config

    @property
    def protocol(self) -> str:
        """The security protocol of the clients' listener."""
        return "SASL_SSL" if self.tls else "SASL_PLAINTEXT" if self.scram else "PLAINTEXT"

    @property
    def ca(self) -> Path:
        return self.root / "ca.pem"

    def _listeners(self, controller: str) -> list[str]:
        if not self.scram:
            return [f"listeners=PLAINTEXT://{self.bootstrap},CONTROLLER://{controller}",
                    f"advertised.listeners=PLAINTEXT://{self.bootstrap},CONTROLLER://{controller}",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"]
        internal = f"127.0.0.1:{self.internal_port}"
        secure, name = self.protocol, self.protocol.lower()
        tls = [f"ssl.keystore.location={self.root / 'broker.p12'}", "ssl.keystore.type=PKCS12",
               f"ssl.keystore.password={KEYSTORE_PASSWORD}", f"ssl.key.password={KEYSTORE_PASSWORD}"]
        return [f"listeners=PLAINTEXT://{internal},{secure}://{self.bootstrap},CONTROLLER://{controller}",
                (f"advertised.listeners=PLAINTEXT://{internal},{secure}://{self.bootstrap},"
                 f"CONTROLLER://{controller}"),
                f"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,{secure}:{secure}",
                f"sasl.enabled.mechanisms={SCRAM}",
                # The listener's own login module: the credentials it checks live in the metadata.
                (f"listener.name.{name}.scram-sha-256.sasl.jaas.config="
                 "org.apache.kafka.common.security.scram.ScramLoginModule required;"),
                *(tls if self.tls else [])]

    def _server_properties(self) -> str:
        controller = f"127.0.0.1:{self.controller_port}"
        return "\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            # Static voters: `format` then needs no --standalone and the quorum is fixed.
            f"controller.quorum.voters=1@{controller}",
            *self._listeners(controller),
            "inter.broker.listener.name=PLAINTEXT",
            "controller.listener.names=CONTROLLER",
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

    def _prepare(self) -> list[str]:
        libs = fetch_jars()
        config = self.root / "server.properties"
        config.write_text(self._server_properties())
        (self.root / "log4j2.properties").write_text(LOG4J2)
        if self.tls and not self.ca.exists():
            self._make_certificate()
        if not (self.root / "data" / "meta.properties").exists():
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")  # as StorageTool random-uuid
            scram = [f"--add-scram={SCRAM}=[name={self.scram[0]},password={self.scram[1]}]"] if self.scram else []
            result = subprocess.run(
                self._java(libs, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(config),
                           *scram),
                capture_output=True, text=True, timeout=60,
            )
            if result.returncode != 0:
                raise RuntimeError(f"Kafka storage format failed:\n{result.stdout}{result.stderr}")
        # log4j logs to the console, so JVM errors and broker warnings land in the same file.
        return self._java(libs, "kafka.Kafka", str(config))

    def _make_certificate(self) -> None:
        """A key pair and self-signed certificate for 127.0.0.1 in a PKCS12 keystore (the
        broker's), and the certificate in PEM (what librdkafka trusts)."""
        keystore = self.root / "broker.p12"
        for argv in (["keytool", "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048",
                      "-dname", "CN=127.0.0.1", "-ext", "SAN=ip:127.0.0.1,dns:localhost", "-validity", "7",
                      "-storetype", "PKCS12", "-keystore", str(keystore), "-storepass", KEYSTORE_PASSWORD,
                      "-keypass", KEYSTORE_PASSWORD],
                     ["keytool", "-exportcert", "-rfc", "-alias", "broker", "-keystore", str(keystore),
                      "-storepass", KEYSTORE_PASSWORD, "-file", str(self.ca)]):
            result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            if result.returncode != 0:
                raise RuntimeError(f"keytool failed:\n{result.stdout}{result.stderr}")

    def _answers(self) -> bool:
        # Asked only once the port listens: librdkafka backs off up to 10 s between refused connects.
        # Imported here so that importing this module does not need the Kafka client.
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        try:
            AdminClient(self.client_config()).list_topics(timeout=5)
        except KafkaException:
            return False
        return True
