package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The driver's configuration: each key is the name of the kgo option it sets, each value a
// string (durations as Go durations, "5ms"); src/eoslab/workload/drivers/franz_go/config.py
// translates librdkafka's properties into them. An unknown key or a bad value is refused.

// options are a handle's kgo options, sorted by what they apply to.
type options struct {
	client []kgo.Opt // every client: producer or consumer
	fetch  []kgo.Opt // a consumer's, whether it is in a group or assigned its partitions
	group  []kgo.Opt // a group consumer's only
	// what the driver itself needs to know
	group848      bool
	groupID       string
	txnID         string
	autoCommit    bool
	readCommitted bool
	resetToEnd    bool
	balancers     bool
}

func duration(key, value string) (time.Duration, error) {
	d, err := time.ParseDuration(value)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration", key, value)
	}
	return d, nil
}

func integer(key, value string) (int, error) {
	n, err := strconv.Atoi(value)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an integer", key, value)
	}
	return n, nil
}

func parseOptions(native map[string]string) (*options, error) {
	o := &options{autoCommit: true}
	for key, value := range native {
		if err := o.add(key, value); err != nil {
			return nil, err
		}
	}
	if o.group848 && !o.balancers {
		// franz-go runs KIP-848 only with a range or sticky balancer first (the broker's
		// "range" or "uniform" assignor), else silently the classic protocol: uniform is
		// Kafka's default server-side assignor.
		o.group = append(o.group, kgo.Balancers(kgo.StickyBalancer()))
	}
	return o, nil
}

func (o *options) add(key, value string) error {
	var (
		d   time.Duration
		n   int
		err error
	)
	switch key {
	case "SeedBrokers":
		o.client = append(o.client, kgo.SeedBrokers(strings.Split(value, ",")...))
	case "ClientID":
		o.client = append(o.client, kgo.ClientID(value))
	case "RetryBackoff":
		if d, err = duration(key, value); err == nil {
			o.client = append(o.client, kgo.RetryBackoffFn(func(int) time.Duration { return d }))
		}
	case "MetadataMaxAge":
		if d, err = duration(key, value); err == nil {
			o.client = append(o.client, kgo.MetadataMaxAge(d))
		}
	case "RequestTimeoutOverhead":
		if d, err = duration(key, value); err == nil {
			o.client = append(o.client, kgo.RequestTimeoutOverhead(d))
		}
	case "WithLogger":
		// kgo's own log on stderr (the session's log), at this level
		levels := map[string]kgo.LogLevel{
			"error": kgo.LogLevelError, "warn": kgo.LogLevelWarn,
			"info": kgo.LogLevelInfo, "debug": kgo.LogLevelDebug,
		}
		level, ok := levels[value]
		if !ok {
			return fmt.Errorf("WithLogger: %q is not error, warn, info or debug", value)
		}
		o.client = append(o.client, kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil)))
	// ------------------------------------------------------------------ producer
	case "RequiredAcks":
		acks := map[string]kgo.Acks{"all": kgo.AllISRAcks(), "leader": kgo.LeaderAck(), "none": kgo.NoAck()}
		chosen, ok := acks[value]
		if !ok {
			return fmt.Errorf("RequiredAcks: %q is not all, leader or none", value)
		}
		o.client = append(o.client, kgo.RequiredAcks(chosen))
	case "DisableIdempotentWrite":
		if value == "true" {
			o.client = append(o.client, kgo.DisableIdempotentWrite())
		}
	case "MaxProduceRequestsInflightPerBroker":
		if n, err = integer(key, value); err == nil {
			o.client = append(o.client, kgo.MaxProduceRequestsInflightPerBroker(n))
		}
	case "RecordRetries":
		if n, err = integer(key, value); err == nil {
			o.client = append(o.client, kgo.RecordRetries(n))
		}
	case "ProducerLinger":
		if d, err = duration(key, value); err == nil {
			o.client = append(o.client, kgo.ProducerLinger(d))
		}
	case "RecordDeliveryTimeout":
		if d, err = duration(key, value); err == nil {
			o.client = append(o.client, kgo.RecordDeliveryTimeout(d))
		}
	case "ProduceRequestTimeout":
		if d, err = duration(key, value); err == nil {
			o.client = append(o.client, kgo.ProduceRequestTimeout(d))
		}
	case "TransactionalID":
		o.txnID = value
		o.client = append(o.client, kgo.TransactionalID(value))
	case "TransactionTimeout":
		if d, err = duration(key, value); err == nil {
			o.client = append(o.client, kgo.TransactionTimeout(d))
		}
	case "ProducerBatchCompression":
		codecs := map[string]kgo.CompressionCodec{
			"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
			"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
		}
		codec, ok := codecs[value]
		if !ok {
			return fmt.Errorf("ProducerBatchCompression: %q is not a codec", value)
		}
		o.client = append(o.client, kgo.ProducerBatchCompression(codec))
	case "ProducerBatchMaxBytes":
		if n, err = integer(key, value); err == nil {
			o.client = append(o.client, kgo.ProducerBatchMaxBytes(int32(n)))
		}
	// ------------------------------------------------------------------ consumer
	case "FetchIsolationLevel":
		switch value {
		case "read_committed":
			o.readCommitted = true
			o.fetch = append(o.fetch, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		case "read_uncommitted":
			o.fetch = append(o.fetch, kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
		default:
			return fmt.Errorf("FetchIsolationLevel: %q is not read_committed or read_uncommitted", value)
		}
	case "ConsumeResetOffset":
		switch value {
		case "start":
			o.fetch = append(o.fetch, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		case "end":
			o.resetToEnd = true
			o.fetch = append(o.fetch, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
		default:
			return fmt.Errorf("ConsumeResetOffset: %q is not start or end", value)
		}
	case "ConsumerGroup":
		o.groupID = value
		o.group = append(o.group, kgo.ConsumerGroup(value))
	case "InstanceID":
		o.group = append(o.group, kgo.InstanceID(value))
	case "ServerSideBalancer":
		if value == "true" {
			opt, ok := serverSideBalancer()
			if !ok {
				return fmt.Errorf("ServerSideBalancer: KIP-848 consumer groups need franz-go v1.22.0 or later")
			}
			o.group848 = true
			o.group = append(o.group, opt)
		}
	case "DisableAutoCommit":
		if value == "true" {
			o.autoCommit = false
			o.group = append(o.group, kgo.DisableAutoCommit())
		}
	case "AutoCommitInterval":
		if d, err = duration(key, value); err == nil {
			o.group = append(o.group, kgo.AutoCommitInterval(d))
		}
	case "SessionTimeout":
		if d, err = duration(key, value); err == nil {
			o.group = append(o.group, kgo.SessionTimeout(d))
		}
	case "HeartbeatInterval":
		if d, err = duration(key, value); err == nil {
			o.group = append(o.group, kgo.HeartbeatInterval(d))
		}
	case "RebalanceTimeout":
		if d, err = duration(key, value); err == nil {
			o.group = append(o.group, kgo.RebalanceTimeout(d))
		}
	case "Balancers":
		known := map[string]kgo.GroupBalancer{
			"range": kgo.RangeBalancer(), "roundrobin": kgo.RoundRobinBalancer(),
			"sticky": kgo.StickyBalancer(), "cooperative-sticky": kgo.CooperativeStickyBalancer(),
		}
		var balancers []kgo.GroupBalancer
		for _, name := range strings.Split(value, ",") {
			balancer, ok := known[strings.TrimSpace(name)]
			if !ok {
				return fmt.Errorf("Balancers: %q is not range, roundrobin, sticky or cooperative-sticky", name)
			}
			balancers = append(balancers, balancer)
		}
		o.balancers = true
		o.group = append(o.group, kgo.Balancers(balancers...))
	default:
		return fmt.Errorf("%s: not a driver option", key)
	}
	return err
}
