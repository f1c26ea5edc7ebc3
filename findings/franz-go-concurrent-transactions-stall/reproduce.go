// One record through franz-go (idempotent, the default), its first Produce answered with
// CONCURRENT_TRANSACTIONS: the time until it is acknowledged. kgo's debug log goes to stderr.
//
//	reproduce BOOTSTRAP TOPIC [METADATA_MIN_AGE]
//
// Built and run by reproduce.py beside it.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	opts := []kgo.Opt{
		kgo.SeedBrokers(os.Args[1]),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, func() string {
			return time.Now().Format("15:04:05.000 ")
		})),
	}
	if len(os.Args) > 3 {
		age, err := time.ParseDuration(os.Args[3])
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		opts = append(opts, kgo.MetadataMinAge(age))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	result := client.ProduceSync(ctx, &kgo.Record{Topic: os.Args[2], Value: []byte("one")})
	if err := result.FirstErr(); err != nil {
		fmt.Println("failed:", err)
		os.Exit(1)
	}
	fmt.Printf("acknowledged after %d ms\n", time.Since(start).Milliseconds())
}
