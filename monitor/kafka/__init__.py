"""Kafka at the edge: the embedded broker, topics, producers and consumers."""
