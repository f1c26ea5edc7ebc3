// eoslab's driver for franz-go (github.com/twmb/franz-go): the lab's workload roles (the Python
// session processes) run their Kafka client through it. One driver process per session, a child
// of the session's process and in its process group (a kill -9 or a SIGSTOP of the session
// reaches both); it reads one command a line on stdin (a produce line followed by its records'
// bytes) and writes replies and events on stdout, as src/eoslab/workload/drivers/contract.py
// specifies. It holds no application logic: what to
// send, when to commit, what a record's effect is, are the host's.
//
// Built once per franz-go module version by src/eoslab/workload/drivers/franz_go (the same
// source compiles against v1.20 to v1.22; KIP-848 groups, which franz-go has from v1.22.0, with
// -tags kip848). stdin closing means the host is gone: the driver exits at once, as a crash
// would, without flushing or closing anything.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"
)

const (
	franzGoModule  = "github.com/twmb/franz-go"
	snapshotsKept  = 64
	defaultTimeout = 30 * time.Second
)

type command struct {
	Op            string            `json:"op"`
	ID            *int64            `json:"id"`
	Handle        string            `json:"handle"`
	Config        map[string]string `json:"config"`
	StatsMs       int64             `json:"stats_ms"`
	Topic         string            `json:"topic"`
	Partition     int32             `json:"partition"`
	Bytes         int               `json:"bytes"`
	records       []byte            // the Bytes after the line (produce)
	TimeoutMs     *int64            `json:"timeout_ms"`
	Offsets       [][]any           `json:"offsets"`
	GroupMetadata int64             `json:"group_metadata"`
	EOF           bool              `json:"eof"`
	Topics        []string          `json:"topics"`
	Partitions    [][]any           `json:"partitions"`
	Max           int               `json:"max"`
	Position      []any             `json:"position"`
	Consumer      string            `json:"consumer"`
	Count         int               `json:"count"`
	ValueBytes    int               `json:"value_bytes"`
}

func (c *command) timeout() time.Duration {
	if c.TimeoutMs == nil {
		return defaultTimeout
	}
	return time.Duration(*c.TimeoutMs) * time.Millisecond
}

// snapshot is a consumer's group membership as group_metadata answered it (for a transactional
// producer's offsets).
type snapshot struct {
	consumer   *consumer
	generation int32
	memberID   string
}

// rebalance is a group callback of franz-go waiting for the host to run its own (see await).
type rebalance struct {
	consumer   *consumer
	kind       string
	partitions map[string][]int32
	done       chan struct{}
}

type driver struct {
	in         chan *command
	rebalances chan *rebalance
	producers  map[string]*producer
	consumers  map[string]*consumer
	snapshots  map[int64]snapshot
	order      []int64
	next       int64
}

func main() {
	startWire()
	d := &driver{
		in:         make(chan *command, 1024),
		rebalances: make(chan *rebalance),
		producers:  map[string]*producer{},
		consumers:  map[string]*consumer{},
		snapshots:  map[int64]snapshot{},
	}
	go d.read()
	d.serve(false)
}

// read hands stdin's commands (with the bytes after a produce line) to the command loop; at its
// end the host is gone: exit at once.
func (d *driver) read() {
	stdin := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := stdin.ReadBytes('\n')
		if err != nil {
			os.Exit(0)
		}
		cmd := &command{}
		if err := json.Unmarshal(line, cmd); err != nil {
			logf("not a JSON command: %s", strings.TrimSpace(string(line)))
			continue
		}
		if cmd.Bytes > 0 {
			cmd.records = make([]byte, cmd.Bytes)
			if _, err := io.ReadFull(stdin, cmd.records); err != nil {
				os.Exit(0)
			}
		}
		d.in <- cmd
	}
}

// serve runs commands until stdin closes, or (inside a rebalance callback) until resume.
func (d *driver) serve(untilResume bool) {
	for cmd := range d.in {
		if cmd.Op == "resume" {
			if untilResume {
				return
			}
			continue
		}
		d.execute(cmd)
	}
}

// await runs a blocking client call and, while it runs, the host's rebalance callbacks: franz-go
// calls its group callbacks on a goroutine of its own, and a call (a poll above all) may wait for
// one to finish. A callback is the host's turn: a rebalance event, then commands until resume.
// Only a call with a reply serves them (the host runs callbacks only while it waits for one).
func (d *driver) await(call func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		call()
	}()
	d.awaitDone(done, nil)
}

// awaitDone waits for done (serving rebalance callbacks meanwhile) or, given one, the timer:
// false when the timer fired first.
func (d *driver) awaitDone(done <-chan struct{}, timer <-chan time.Time) bool {
	for {
		select {
		case <-done:
			return true
		case <-timer:
			return false
		case callback := <-d.rebalances:
			d.rebalanced(callback)
		}
	}
}

func (d *driver) rebalanced(callback *rebalance) {
	c := callback.consumer
	c.rebalanced(callback.kind, callback.partitions)
	event("rebalance", map[string]any{
		"handle":     c.handle,
		"kind":       callback.kind,
		"partitions": pairs(callback.partitions),
	})
	d.serve(true)
	close(callback.done)
}

func (d *driver) execute(cmd *command) {
	id := int64(-1)
	if cmd.ID != nil {
		id = *cmd.ID
	}
	result, failed := d.run(cmd)
	switch {
	case failed != nil && id >= 0:
		fail(id, failed.object())
	case failed != nil:
		logf("%s: %s", cmd.Op, failed.reason)
	case id >= 0 && result != nil:
		reply(id, result)
	}
}

// run does one command: its reply's result (nil: no reply), or its failure.
func (d *driver) run(cmd *command) (any, *failure) {
	if cmd.Op == "produce" {
		d.produce(cmd)
		return nil, nil
	}
	if p := d.producers[cmd.Handle]; p == nil && isProducerOp(cmd.Op) {
		f := refused(codeState, "no producer %q", cmd.Handle)
		return nil, &f
	}
	if c := d.consumers[cmd.Handle]; c == nil && isConsumerOp(cmd.Op) {
		f := refused(codeState, "no consumer %q", cmd.Handle)
		return nil, &f
	}
	empty := map[string]any{}
	switch cmd.Op {
	case "hello":
		return map[string]any{"client": "franz-go", "version": clientVersion()}, nil
	case "producer":
		p, failed := d.newProducer(cmd.Handle, cmd.Config, cmd.StatsMs, cmd.Consumer)
		if failed != nil {
			return nil, failed
		}
		d.producers[cmd.Handle] = p
		return empty, nil
	case "purge":
		d.producers[cmd.Handle].purge()
		return empty, nil
	case "produce_burst":
		return d.producers[cmd.Handle].burst(cmd.Topic, cmd.Partition, cmd.Count, cmd.ValueBytes), nil
	case "init_transactions", "begin_transaction", "commit_transaction", "abort_transaction":
		return empty, d.producers[cmd.Handle].transactional(cmd.Op, cmd.timeout())
	case "send_offsets_to_transaction":
		return empty, d.producers[cmd.Handle].sendOffsets(cmd.Offsets, d.snapshots[cmd.GroupMetadata])
	case "close_producer":
		d.producers[cmd.Handle].close(cmd.timeout())
		delete(d.producers, cmd.Handle)
		return empty, nil
	case "consumer":
		c, err := newConsumer(d, cmd.Handle, cmd.Config, cmd.EOF)
		if err != nil {
			f := refused(codeInvalidArg, "%v", err)
			return nil, &f
		}
		d.consumers[cmd.Handle] = c
		return empty, nil
	case "close_consumer":
		d.consumers[cmd.Handle].close()
		delete(d.consumers, cmd.Handle)
		return empty, nil
	case "group_metadata":
		return d.snapshot(d.consumers[cmd.Handle]), nil
	case "exit":
		os.Exit(0)
	}
	if isConsumerOp(cmd.Op) {
		return d.consumers[cmd.Handle].run(cmd)
	}
	f := refused(codeInvalidArg, "unknown command %q", cmd.Op)
	return nil, &f
}

func isProducerOp(op string) bool {
	switch op {
	case "produce_burst", "purge", "init_transactions", "begin_transaction", "commit_transaction",
		"abort_transaction", "send_offsets_to_transaction", "close_producer":
		return true
	}
	return false
}

func isConsumerOp(op string) bool {
	switch op {
	case "subscribe", "assign", "consume", "commit", "committed", "seek", "pause",
		"resume_partitions", "watermarks", "group_metadata", "close_consumer":
		return true
	}
	return false
}

// produce hands each record of a produce command to its producer (every token gets its outcome:
// a failed delivery when there is no such producer).
func (d *driver) produce(cmd *command) {
	p := d.producers[cmd.Handle]
	records := cmd.records
	for len(records) >= 20 {
		token := int64(binary.BigEndian.Uint64(records))
		partition := int32(binary.BigEndian.Uint32(records[8:]))
		keyLength := int32(binary.BigEndian.Uint32(records[12:]))
		valueLength := int32(binary.BigEndian.Uint32(records[16:]))
		records = records[20:]
		key, value := cut(&records, keyLength), cut(&records, valueLength)
		if p == nil {
			delivered(token, partition, refused(codeState, "no producer %q", cmd.Handle))
			continue
		}
		p.produce(token, cmd.Topic, partition, key, value)
	}
}

// cut takes length bytes off the front of records (-1: nil, a null key or value).
func cut(records *[]byte, length int32) []byte {
	if length < 0 {
		return nil
	}
	data := (*records)[:length:length]
	*records = (*records)[length:]
	return data
}

// snapshot keeps the consumer's group membership now for a transactional producer's offsets.
func (d *driver) snapshot(c *consumer) map[string]any {
	memberID, generation := c.membership()
	d.next++
	d.snapshots[d.next] = snapshot{consumer: c, generation: generation, memberID: memberID}
	d.order = append(d.order, d.next)
	for len(d.order) > snapshotsKept {
		delete(d.snapshots, d.order[0])
		d.order = d.order[1:]
	}
	return map[string]any{"id": d.next, "generation": generation, "member_id": memberID}
}

// clientVersion is the franz-go module version linked into this binary (without its "v").
func clientVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, dep := range info.Deps {
		if dep.Path == franzGoModule {
			if dep.Replace != nil {
				dep = dep.Replace
			}
			return strings.TrimPrefix(dep.Version, "v")
		}
	}
	return "unknown"
}
