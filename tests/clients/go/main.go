// Command gapwatch-go-consumer runs one real Go Kafka client as a member of a
// consumer group that starts at latest and picks new partitions up on its
// own metadata refresh, as the teams who reported the loss ran them. It
// prints "Partition:P\tOffset:O" for every record it receives, one line at a
// time (the format of Kafka's console consumer with print.partition and
// print.offset), and leaves its group and exits on SIGTERM.
//
// Each client: no committed offset means the end of the partition; offsets
// are auto-committed every 5 s (or its equivalent); metadata is refreshed
// every -refresh-ms.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

const commitInterval = 5 * time.Second

// options is what every client is given.
type options struct {
	bootstrap string
	group     string
	topic     string
	refresh   time.Duration
	clientID  string
	// earliest: a partition without a committed offset starts at its beginning, not its end.
	earliest bool
}

// consume runs one client until ctx ends, handing every record to print.
type consume func(ctx context.Context, opts options, print func(partition int32, offset int64)) error

var clients = map[string]consume{
	"sarama":             runSarama,
	"kafka-go":           func(ctx context.Context, o options, p func(int32, int64)) error { return runKafkaGo(ctx, o, p, true) },
	"kafka-go-nowatch":   func(ctx context.Context, o options, p func(int32, int64)) error { return runKafkaGo(ctx, o, p, false) },
	"franz-go":           runFranzGo,
	"confluent-kafka-go": runConfluent,
}

func main() {
	client := flag.String("client", "", "sarama, kafka-go, kafka-go-nowatch, franz-go or confluent-kafka-go")
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "bootstrap server, HOST:PORT")
	group := flag.String("group", "", "consumer group id")
	topic := flag.String("topic", "", "topic to subscribe to")
	refreshMs := flag.Int("refresh-ms", 5000, "metadata refresh interval in milliseconds")
	earliest := flag.Bool("earliest", false, "start partitions without a commit at their beginning (default: the end)")
	flag.Parse()
	run, ok := clients[*client]
	if !ok || *group == "" || *topic == "" || *refreshMs <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	log.SetPrefix(*client + ": ")
	opts := options{bootstrap: *bootstrap, group: *group, topic: *topic,
		refresh: time.Duration(*refreshMs) * time.Millisecond, clientID: *group + "-" + *client, earliest: *earliest}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// os.Stdout is unbuffered: each line is written (flushed) as one call; the
	// lock keeps lines whole when a client consumes partitions in goroutines.
	var mu sync.Mutex
	print := func(partition int32, offset int64) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, "Partition:%d\tOffset:%d\n", partition, offset)
	}
	if err := run(ctx, opts, print); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
