// A franz-go group consumer for the tests: it joins GROUP, reads COUNT records of TOPIC from
// the committed offsets (or the start), prints each as "partition:offset", commits, and leaves.
// With -regex, TOPIC is a regular expression (franz-go's regex consumption, which skips the
// topics Metadata flags internal): it prints each topic of its first assignment as
// "assigned TOPIC" and leaves without reading.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9192", "bootstrap servers, comma-separated")
	group := flag.String("group", "", "consumer group")
	topic := flag.String("topic", "", "topic to consume")
	count := flag.Int("count", 1, "records to read before committing and leaving")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	regex := flag.Bool("regex", false, "TOPIC is a regular expression: print the topics assigned")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	assignedCtx, assignedDone := context.WithCancel(ctx)
	var assigned []string
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
	}
	if *regex {
		opts = append(opts, kgo.ConsumeRegex(), kgo.OnPartitionsAssigned(
			func(_ context.Context, _ *kgo.Client, topics map[string][]int32) {
				for name := range topics {
					assigned = append(assigned, name)
				}
				assignedDone()
			}))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(2)
	}
	defer client.Close() // leaves the group
	if *regex {
		for assignedCtx.Err() == nil {
			client.PollFetches(assignedCtx)
		}
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "no assignment:", ctx.Err())
			os.Exit(1)
		}
		sort.Strings(assigned)
		for _, name := range assigned {
			fmt.Printf("assigned %s\n", name)
		}
		return
	}
	for read := 0; read < *count; {
		fetches := client.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			fmt.Fprintf(os.Stderr, "read %d of %d records: %v\n", read, *count, err)
			os.Exit(1)
		}
		fetches.EachError(func(t string, p int32, err error) {
			fmt.Fprintf(os.Stderr, "fetch %s[%d]: %v\n", t, p, err)
		})
		fetches.EachRecord(func(r *kgo.Record) {
			fmt.Printf("%d:%d\n", r.Partition, r.Offset)
			read++
		})
	}
	if err := client.CommitUncommittedOffsets(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "commit:", err)
		os.Exit(1)
	}
}
