package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// producer is one franz-go producer of the session: sends (the host picks every record's
// partition: kgo.ManualPartitioner), delivery reports, the transactional calls, and the producer
// id and epoch.
//
// A transactional call runs on a goroutine of its own with no deadline of its own (franz-go
// warns that cancelling EndTransaction's context leaves the transaction's outcome unknowable),
// and the host waits for it at most the call's timeout: a call that runs out of time answers
// _TIMED_OUT (retriable) and goes on, and the same call asked again waits for that run instead
// of starting another.
//
// The producer id and epoch are read from what the client acknowledged (every record franz-go
// finishes carries the producer id and epoch it was written with) and from init_transactions'
// answer: asking franz-go for them (Client.ProducerID) loads one when there is none, a request
// of its own that the statistics must not add.
//
// A transactional producer created beside a group consumer of the same session that has not yet
// joined (the copier: consume-transform-produce) shares one client with it, made by
// kgo.NewGroupTransactSession: franz-go commits a transaction's offsets only through a client
// that both consumes in the group and produces (GroupTransactSession.End: TxnOffsetCommit with
// the group's generation, the forced heartbeat, KIP-447's stable offsets, the abort and rewind
// when the group rebalanced), never with offsets given apart. send_offsets_to_transaction then
// checks that the host's offsets are what the session commits (past every record the consumer
// handed out), and commit_transaction / abort_transaction are the session's End.
type producer struct {
	d       *driver
	handle  string
	cl      *kgo.Client
	session *kgo.GroupTransactSession
	paired  *consumer

	transactionalID string
	idempotent      bool
	purged          bool
	pending         map[string]*pendingCall
	fatalReported   atomic.Bool

	producerID    atomic.Int64
	producerEpoch atomic.Int32
	acked         atomic.Int64
	failed        atomic.Int64
	stopStats     chan struct{}
}

type pendingCall struct {
	done chan struct{}
	err  error
}

func (d *driver) newProducer(handle string, native map[string]string, statsMs int64, consumer string) (*producer, *failure) {
	o, err := parseOptions(native)
	if err != nil {
		f := refused(codeInvalidArg, "%v", err)
		return nil, &f
	}
	p := &producer{
		d:               d,
		handle:          handle,
		transactionalID: o.txnID,
		idempotent:      native["DisableIdempotentWrite"] != "true",
		pending:         map[string]*pendingCall{},
		stopStats:       make(chan struct{}),
	}
	p.producerID.Store(-1)
	p.producerEpoch.Store(-1)
	opts := append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, o.client...)
	if o.txnID != "" && consumer != "" {
		p.paired = d.consumers[consumer]
		if p.paired == nil || p.paired.cl != nil || p.paired.opts.groupID == "" {
			f := refused(codeInvalidArg, "consumer %q: not a group consumer of this session made before the producer", consumer)
			return nil, &f
		}
	}
	if p.paired != nil {
		opts = append(p.paired.groupOptions(), opts...)
		p.session, err = kgo.NewGroupTransactSession(opts...)
		if err == nil {
			p.cl = p.session.Client()
			p.paired.cl, p.paired.shared = p.cl, true
		}
	} else {
		p.cl, err = kgo.NewClient(opts...)
	}
	if err != nil {
		f := classify(err, inCall)
		return nil, &f
	}
	if statsMs > 0 {
		go p.statistics(time.Duration(statsMs) * time.Millisecond)
	}
	return p, nil
}

func (p *producer) produce(token int64, topic string, partition int32, key, value []byte) {
	if p.purged {
		delivered(token, partition, refused(codeState, "the producer was purged: it takes no more records"))
		return
	}
	record := &kgo.Record{Topic: topic, Partition: partition, Key: key, Value: value}
	p.cl.Produce(context.Background(), record, func(r *kgo.Record, err error) {
		if err != nil {
			p.failed.Add(1)
			f := classify(err, inDelivery)
			p.reportFatal(f)
			delivered(token, r.Partition, f)
			return
		}
		p.acked.Add(1)
		if p.idempotent {
			p.producerID.Store(r.ProducerID)
			p.producerEpoch.Store(int32(r.ProducerEpoch))
		}
		ack(token, r.Partition, r.Offset)
	})
}

// burst sends count values of size bytes to one partition from here, as fast as the client takes
// them, and waits for every acknowledgement: the client's own rate, without the line protocol
// (make bench's comparison point for the driver).
func (p *producer) burst(topic string, partition int32, count, size int) map[string]any {
	value := bytes.Repeat([]byte("x"), size)
	var failed atomic.Int64
	start := time.Now()
	for i := 0; i < count; i++ {
		record := &kgo.Record{Topic: topic, Partition: partition, Value: value}
		p.cl.Produce(context.Background(), record, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := p.cl.Flush(context.Background()); err != nil {
		logf("burst: %v", err)
	}
	return map[string]any{"seconds": time.Since(start).Seconds(), "failed": failed.Load()}
}

// delivered reports a record that failed.
func delivered(token int64, partition int32, f failure) {
	event("delivery", map[string]any{"token": token, "partition": partition, "offset": nil, "error": f.object()})
}

// reportFatal says, once, that the client went fatal (librdkafka's error_cb).
func (p *producer) reportFatal(f failure) {
	if f.fatal && p.fatalReported.CompareAndSwap(false, true) {
		event("error", map[string]any{"handle": p.handle, "error": f.object()})
	}
}

// purge abandons everything outstanding (librdkafka's purge of the queue and what is in flight:
// franz-go's UnsafeAbortBufferedRecords, which does not wait for answers to requests in flight).
// The producer takes no more records after it.
func (p *producer) purge() {
	p.purged = true
	p.cl.UnsafeAbortBufferedRecords()
}

func (p *producer) close(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p.d.await(func() { _ = p.cl.Flush(ctx) })
	close(p.stopStats)
	if p.paired == nil || p.paired.closed {
		p.cl.Close()
	}
}

// transactional runs init/begin/commit/abort within the host's timeout (see the type's comment).
func (p *producer) transactional(op string, timeout time.Duration) *failure {
	if p.transactionalID == "" {
		f := refused(codeState, "%s: not a transactional producer (no transactional.id)", op)
		return &f
	}
	run := p.pending[op]
	if run == nil {
		run = &pendingCall{done: make(chan struct{})}
		p.pending[op] = run
		body := p.body(op)
		go func() {
			defer close(run.done)
			run.err = body()
		}()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	if !p.d.awaitDone(run.done, timer.C) {
		f := timedOut(op, timeout.Milliseconds())
		return &f
	}
	delete(p.pending, op)
	if run.err == nil {
		return nil
	}
	f := classify(run.err, inCall)
	if op == "commit_transaction" {
		f = commitFailure(run.err, f)
	}
	p.reportFatal(f)
	return &f
}

func (p *producer) body(op string) func() error {
	background := context.Background()
	switch op {
	case "init_transactions":
		// franz-go has no call of its own: it sends InitProducerId (fencing the transactional
		// id's earlier sessions) when the producer id is first needed; ProducerID asks for it.
		return func() error {
			id, epoch, err := p.cl.ProducerID(background)
			if err == nil {
				p.producerID.Store(id)
				p.producerEpoch.Store(int32(epoch))
			}
			return err
		}
	case "begin_transaction":
		return func() error {
			if p.session != nil {
				return p.session.Begin()
			}
			return p.cl.BeginTransaction()
		}
	case "commit_transaction":
		if p.session != nil {
			return func() error { return p.endSession(background, kgo.TryCommit) }
		}
		return func() error {
			if err := p.cl.Flush(background); err != nil {
				return err
			}
			return p.cl.EndTransaction(background, kgo.TryCommit)
		}
	default: // abort_transaction
		if p.session != nil {
			return func() error { return p.endSession(background, kgo.TryAbort) }
		}
		return func() error {
			if err := p.cl.AbortBufferedRecords(background); err != nil {
				return err
			}
			return p.cl.EndTransaction(background, kgo.TryAbort)
		}
	}
}

// errSessionAborted: GroupTransactSession.End asked to commit aborted instead (the group
// rebalanced during the transaction, or the offsets' commit failed abortably).
var errSessionAborted = errors.New("franz-go's GroupTransactSession aborted the transaction " +
	"instead of committing it (the group rebalanced, or the offset commit failed abortably); " +
	"it rewound the consumer to the committed offsets")

func (p *producer) endSession(ctx context.Context, commit kgo.TransactionEndTry) error {
	committed, err := p.session.End(ctx, commit)
	if err == nil && bool(commit) && !committed {
		return errSessionAborted
	}
	return err
}

// commitFailure: how a failed commit must be treated. franz-go's EndTransaction(TryCommit)
// either did not commit for certain (OPERATION_NOT_ATTEMPTED, TRANSACTION_ABORTABLE, a
// definitive refusal by the coordinator, the session's own abort): the transaction must be
// aborted; or it does not know (a broken connection, UNKNOWN_SERVER_ERROR, a retriable error
// that outlived its retries): franz-go refuses to retry such a commit ("retry with TryAbort"),
// and the outcome stays unknown to the application: neither retriable nor abortable (the host
// records it indeterminate).
func commitFailure(err error, f failure) failure {
	if f.fatal {
		return f
	}
	definite := errors.Is(err, errSessionAborted) || errors.Is(err, kerr.OperationNotAttempted) ||
		f.code == kafkaTransactionAbortable || strings.Contains(f.reason, "recreated") ||
		(f.kafka && !f.retriable && f.code != kafkaUnknownServerError)
	f.retriable = false
	f.abortable = definite
	if errors.Is(err, errSessionAborted) {
		f.code = kafkaTransactionAbortable
	}
	if !definite {
		f.reason = "the commit's outcome is unconfirmed (franz-go retries it only as an abort): " + f.reason
	}
	return f
}

// sendOffsets: franz-go commits a transaction's offsets in GroupTransactSession.End, those of
// every record the paired consumer handed out; the host's must be the same.
func (p *producer) sendOffsets(offsets [][]any, metadata snapshot) *failure {
	switch {
	case p.session == nil:
		f := refused(codeState, "franz-go commits offsets in a transaction only through a "+
			"GroupTransactSession: a transactional producer made beside its group consumer, "+
			"before the consumer subscribed")
		return &f
	case metadata.consumer != p.paired:
		f := refused(codeInvalidArg, "the group metadata is not of this producer's consumer")
		return &f
	}
	if mismatch := p.paired.handedOutMismatch(offsets); mismatch != "" {
		f := refused(codeInvalidArg, "franz-go commits the offsets past every record its "+
			"consumer handed out; the host's differ: %s", mismatch)
		f.abortable = true
		return &f
	}
	return nil
}

func (p *producer) statistics(interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-p.stopStats:
			return
		case <-ticker.C:
		}
		event("stats", map[string]any{"handle": p.handle, "stats": map[string]any{
			"producer_id":      p.producerID.Load(),
			"producer_epoch":   p.producerEpoch.Load(),
			"records-acked":    p.acked.Load(),
			"records-failed":   p.failed.Load(),
			"records-buffered": p.cl.BufferedProduceRecords(),
		}})
	}
}
