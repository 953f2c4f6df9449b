package main

import (
	"context"

	"github.com/IBM/sarama"
)

// runSarama: a sarama ConsumerGroup. It compares the subscribed topics'
// partition counts with its cached metadata every Metadata.RefreshFrequency
// (the cache refreshes on the same period) and rebalances when they grew.
func runSarama(ctx context.Context, opts options, print func(int32, int64)) error {
	config := sarama.NewConfig()
	config.Version = sarama.V3_0_0_0
	config.ClientID = opts.clientID
	config.Metadata.RefreshFrequency = opts.refresh
	config.Consumer.Offsets.Initial = map[bool]int64{true: sarama.OffsetOldest, false: sarama.OffsetNewest}[opts.earliest]
	config.Consumer.Offsets.AutoCommit.Enable = true
	config.Consumer.Offsets.AutoCommit.Interval = commitInterval
	group, err := sarama.NewConsumerGroup([]string{opts.bootstrap}, opts.group, config)
	if err != nil {
		return err
	}
	defer group.Close() // commits what was marked, then leaves the group
	handler := saramaHandler{print: print}
	for ctx.Err() == nil {
		// Returns at every rebalance; the loop joins again.
		if err := group.Consume(ctx, []string{opts.topic}, handler); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

type saramaHandler struct{ print func(int32, int64) }

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h saramaHandler) ConsumeClaim(session sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case message, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.print(message.Partition, message.Offset)
			session.MarkMessage(message, "")
		case <-session.Context().Done():
			return nil
		}
	}
}
