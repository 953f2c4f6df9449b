package main

import (
	"context"
	"errors"
	"io"

	"github.com/segmentio/kafka-go"
)

// runKafkaGo: a segmentio/kafka-go Reader in a group. With watch it checks
// the topic's partitions every PartitionWatchInterval and rebalances when they
// change; without it (the default) it never notices a new partition until the
// group rebalances for another reason.
func runKafkaGo(ctx context.Context, opts options, print func(int32, int64), watch bool) error {
	config := kafka.ReaderConfig{
		Brokers:               []string{opts.bootstrap},
		GroupID:               opts.group,
		Topic:                 opts.topic,
		StartOffset:           map[bool]int64{true: kafka.FirstOffset, false: kafka.LastOffset}[opts.earliest], // its default is FirstOffset
		CommitInterval:        commitInterval,
		WatchPartitionChanges: watch,
		Dialer:                &kafka.Dialer{ClientID: opts.clientID, DualStack: true},
	}
	if watch {
		config.PartitionWatchInterval = opts.refresh
	}
	reader := kafka.NewReader(config)
	defer reader.Close() // commits what was read, then leaves the group
	for {
		message, err := reader.ReadMessage(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		print(int32(message.Partition), message.Offset)
	}
}
