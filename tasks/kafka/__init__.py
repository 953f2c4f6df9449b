"""The Kafka adapter: the only control-plane code that imports confluent-kafka."""
