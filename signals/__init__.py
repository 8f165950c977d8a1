"""Coordination signals between tickets.

Interface: SignalBus (baton.signals.base). Backends: SqliteSignalBus (baton.signals.sqlite, the
embedded default) and KafkaSignalBus (baton.signals.kafka, Apache Kafka). Models:
baton.signals.model, imported only by those who build signals.
"""
