"""kafkapy: a Kafka-compatible broker in Python that speaks the real Kafka wire protocol."""

__version__ = "0.1.0"
