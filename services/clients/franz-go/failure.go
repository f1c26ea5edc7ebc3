package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A franz-go error as the protocol's error object: code (Kafka's error code, or librdkafka's
// number for a condition local to the client, so that every driver's errors have one
// vocabulary: the host names them with librdkafka's names), reason, exception (the Go type), and
// how the application must treat it: fatal (the client is unusable), retriable (the same call
// may be tried again), abortable (the transaction must be aborted).
//
// How franz-go's errors map:
//
//	kgo.ErrRecordTimeout (RecordDeliveryTimeout) in a delivery   _MSG_TIMED_OUT   -192
//	a call that ran out of the host's time (context deadline)    _TIMED_OUT       -185, retriable
//	kgo.ErrAborting (the host's purge), kgo.ErrClientClosed      _PURGE_INFLIGHT  -151 (franz-go
//	  (records abandoned)                                          cannot tell a record never
//	                                                               sent from one in flight)
//	kgo.ErrMaxBuffered                                           _QUEUE_FULL      -184
//	a *kerr.Error (the broker's answer)                          its Kafka code; PRODUCER_FENCED
//	                                                               is _FENCED -144 (librdkafka's name)
//	a connection that broke (net.Error, EOF)                     _TRANSPORT       -195, retriable
//	"producer ID has a fatal, unrecoverable error" without a     _FATAL           -150, fatal
//	  Kafka code (BeginTransaction)
//	anything else                                                _STATE           -172
//	GroupTransactSession.End asked to commit, aborting instead   TRANSACTION_ABORTABLE 120
//	  (franz-go's own decision: the group rebalanced, or the       (abortable; the reason says
//	  offsets' commit failed abortably)                             it was franz-go's)
//
// A failed commit_transaction is abortable when franz-go knows it did not commit, and neither
// retriable nor abortable when it does not know (producer.go's commitFailure).
//
// Fatal: PRODUCER_FENCED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
// UNSUPPORTED_VERSION, UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_TXN_STATE, FENCED_INSTANCE_ID:
// franz-go cannot recover its producer id (or group membership) from them (its
// maybeRecoverProducerID recovers UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING,
// INVALID_PRODUCER_EPOCH and TRANSACTION_ABORTABLE by bumping the epoch: those are abortable).
const (
	codeMsgTimedOut   = -192
	codeTransport     = -195
	codeTimedOut      = -185
	codeQueueFull     = -184
	codeInvalidArg    = -186
	codeState         = -172
	codePurgeInflight = -151
	codeFatal         = -150
	codeFenced        = -144

	kafkaUnknownServerError   = -1
	kafkaProducerFenced       = 90
	kafkaTransactionAbortable = 120
)

var fatalCodes = map[int16]bool{
	90: true, // PRODUCER_FENCED
	53: true, // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
	31: true, // CLUSTER_AUTHORIZATION_FAILED
	35: true, // UNSUPPORTED_VERSION
	43: true, // UNSUPPORTED_FOR_MESSAGE_FORMAT
	48: true, // INVALID_TXN_STATE
	82: true, // FENCED_INSTANCE_ID
}

// failure is one error, classified.
type failure struct {
	code      int
	reason    string
	exception string
	fatal     bool
	retriable bool
	abortable bool
	kafka     bool // the code is the broker's (a *kerr.Error)
}

func (f failure) object() map[string]any {
	return map[string]any{
		"code":      f.code,
		"reason":    f.reason,
		"exception": f.exception,
		"fatal":     f.fatal,
		"retriable": f.retriable,
		"abortable": f.abortable,
	}
}

// where an error happened decides how a timeout is named.
type where int

const (
	inDelivery where = iota
	inCall
)

func classify(err error, at where) failure {
	f := failure{reason: err.Error(), exception: fmt.Sprintf("%T", err)}
	var ke *kerr.Error
	switch {
	case errors.Is(err, kgo.ErrRecordTimeout):
		f.code = codeMsgTimedOut
		if at == inCall {
			f.code = codeTimedOut
		}
	case errors.Is(err, kgo.ErrAborting), errors.Is(err, kgo.ErrClientClosed):
		f.code = codePurgeInflight
	case errors.Is(err, kgo.ErrMaxBuffered):
		f.code = codeQueueFull
	case errors.Is(err, context.DeadlineExceeded):
		f.code, f.retriable = codeTimedOut, true
	case errors.As(err, &ke):
		f.code, f.retriable, f.kafka = int(ke.Code), ke.Retriable, true
		f.fatal = fatalCodes[ke.Code]
		if ke.Code == kafkaProducerFenced {
			f.code = codeFenced
		}
	case strings.Contains(f.reason, "fatal, unrecoverable"):
		f.code, f.fatal = codeFatal, true
	case isBrokenConnection(err):
		f.code, f.retriable = codeTransport, true
	default:
		f.code = codeState
	}
	f.abortable = !f.fatal && !f.retriable
	return f
}

func isBrokenConnection(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection")
}

// timedOut is the answer to a call still running when the host's timeout ran out (it goes on:
// the same call asked again waits for that run).
func timedOut(op string, timeoutMs int64) failure {
	return failure{
		code:      codeTimedOut,
		reason:    fmt.Sprintf("%s did not complete within %d ms", op, timeoutMs),
		retriable: true,
	}
}

// refused is an error of the driver's own: a command the client cannot do.
func refused(code int, format string, args ...any) failure {
	return failure{code: code, reason: fmt.Sprintf(format, args...), exception: "eoslab"}
}
