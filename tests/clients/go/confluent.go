package main

import (
	"context"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// runConfluent: confluent-kafka-go (librdkafka, classic protocol), isolation
// left at librdkafka's default (read_committed). A metadata refresh every
// topic.metadata.refresh.interval.ms that shows more partitions triggers a
// rebalance.
func runConfluent(ctx context.Context, opts options, print func(int32, int64)) error {
	consumer, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers":                  opts.bootstrap,
		"group.id":                           opts.group,
		"client.id":                          opts.clientID,
		"auto.offset.reset":                  map[bool]string{true: "earliest", false: "latest"}[opts.earliest],
		"enable.auto.commit":                 true,
		"auto.commit.interval.ms":            int(commitInterval.Milliseconds()),
		"topic.metadata.refresh.interval.ms": int(opts.refresh.Milliseconds()),
	})
	if err != nil {
		return err
	}
	defer consumer.Close() // commits the stored offsets, then leaves the group
	if err := consumer.Subscribe(opts.topic, nil); err != nil {
		return err
	}
	for ctx.Err() == nil {
		switch event := consumer.Poll(200).(type) {
		case *kafka.Message:
			if event.TopicPartition.Error == nil {
				print(event.TopicPartition.Partition, int64(event.TopicPartition.Offset))
			}
		case kafka.Error:
			if event.IsFatal() {
				return event
			}
		}
	}
	return nil
}
