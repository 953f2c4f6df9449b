package main

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

func resetOffset(earliest bool) kgo.Offset {
	if earliest {
		return kgo.NewOffset().AtStart()
	}
	return kgo.NewOffset().AtEnd()
}

// runFranzGo: a franz-go client in a group (classic protocol, cooperative
// sticky). A metadata refresh that shows more partitions of a subscribed topic
// makes it rejoin; metadata is refreshed at least every MetadataMaxAge.
func runFranzGo(ctx context.Context, opts options, print func(int32, int64)) error {
	client, err := kgo.NewClient(
		kgo.SeedBrokers(opts.bootstrap),
		kgo.ClientID(opts.clientID),
		kgo.ConsumerGroup(opts.group),
		kgo.ConsumeTopics(opts.topic),
		kgo.ConsumeResetOffset(resetOffset(opts.earliest)), // its default is the start
		kgo.AutoCommitInterval(commitInterval),
		kgo.MetadataMaxAge(opts.refresh),
	)
	if err != nil {
		return err
	}
	defer client.Close() // commits what was polled, then leaves the group
	for {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		fetches.EachRecord(func(record *kgo.Record) { print(record.Partition, record.Offset) })
	}
}
