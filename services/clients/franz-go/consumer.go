package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const endCheckInterval = 200 * time.Millisecond

type tp struct {
	topic     string
	partition int32
}

func (a tp) less(b tp) bool {
	return a.topic < b.topic || (a.topic == b.topic && a.partition < b.partition)
}

// consumer is one franz-go consumer of the session, shaped as librdkafka's:
//
//   - its client is made when it is first used: subscribe makes a group consumer, assign a
//     direct one (franz-go's two kinds of consumer), unless a transactional producer made the
//     session's GroupTransactSession with it (see producer);
//   - consume(max, timeout) is PollRecords(max): no record is buffered in the driver, so what
//     franz-go tracks as polled is what the host was handed;
//   - a group consumer blocks rebalances while the host works (kgo.BlockRebalanceOnPoll) and
//     allows them when it consumes again: franz-go's group callbacks (OnPartitionsAssigned /
//     Revoked / Lost) then run inside the consume, where the host runs its own callback (a
//     rebalance event, then commands until resume, as librdkafka runs callbacks inside its poll),
//     so a commit the host asks for in its revoke callback is done before the partitions move;
//   - an auto-committing consumer reports its commits as commit events (kgo.AutoCommitCallback);
//     franz-go commits on revoke only in its default OnPartitionsRevoked, which the driver's
//     callback replaces: it does that commit itself before the host's callback, as librdkafka
//     and Kafka's Java client do;
//   - with eof, a partition whose position reached its end offset (the last stable offset under
//     read_committed) gives one end-of-partition item each time it gets there, as librdkafka's
//     enable.partition.eof: franz-go has no such event, so the driver keeps the control records
//     (kgo.KeepControlRecords: the position then passes a transaction's marker) without
//     handing them out, and asks for the end offsets when a poll came back empty.
type consumer struct {
	d      *driver
	handle string
	opts   *options
	eof    bool
	cl     *kgo.Client
	shared bool
	group  bool
	closed bool

	assigned   map[tp]bool
	start      map[tp]int64 // a direct consumer's assigned offset (-2 beginning, -1 end)
	position   map[tp]int64 // past the last record (or control record) polled
	handedOut  map[tp]int64 // past the last record handed out to the host
	atEnd      map[tp]bool
	paused     map[tp]bool
	lastEndsAt time.Time
}

func newConsumer(d *driver, handle string, native map[string]string, eof bool) (*consumer, error) {
	o, err := parseOptions(native)
	if err != nil {
		return nil, err
	}
	return &consumer{
		d: d, handle: handle, opts: o, eof: eof,
		assigned: map[tp]bool{}, start: map[tp]int64{}, position: map[tp]int64{},
		handedOut: map[tp]int64{}, atEnd: map[tp]bool{}, paused: map[tp]bool{},
	}, nil
}

// groupOptions are the options of this consumer's client as a group member.
func (c *consumer) groupOptions() []kgo.Opt {
	opts := append(append(append([]kgo.Opt{}, c.opts.client...), c.opts.fetch...), c.opts.group...)
	opts = append(opts,
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.callback("assign")),
		kgo.OnPartitionsRevoked(c.callback("revoke")),
		kgo.OnPartitionsLost(c.callback("lost")),
	)
	if c.opts.autoCommit {
		opts = append(opts, kgo.AutoCommitCallback(c.reportCommit))
	}
	if c.eof {
		opts = append(opts, kgo.KeepControlRecords())
	}
	return opts
}

func (c *consumer) directOptions() []kgo.Opt {
	opts := append(append([]kgo.Opt{}, c.opts.client...), c.opts.fetch...)
	if c.eof {
		opts = append(opts, kgo.KeepControlRecords())
	}
	return opts
}

// callback is a franz-go group callback: the host runs its own in the consume that waits.
func (c *consumer) callback(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(_ context.Context, cl *kgo.Client, partitions map[string][]int32) {
		if kind == "revoke" && c.opts.autoCommit {
			ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
			cl.CommitOffsetsSync(ctx, cl.UncommittedOffsets(), c.reportCommit)
			cancel()
		}
		if count(partitions) == 0 {
			return
		}
		done := make(chan struct{})
		c.d.rebalances <- &rebalance{consumer: c, kind: kind, partitions: partitions, done: done}
		<-done
	}
}

// rebalanced: the assignment as the host's callback will see it (run on the command loop).
func (c *consumer) rebalanced(kind string, partitions map[string][]int32) {
	for topic, ps := range partitions {
		for _, p := range ps {
			where := tp{topic, p}
			delete(c.atEnd, where)
			delete(c.position, where)
			if kind == "assign" {
				c.assigned[where] = true
			} else {
				delete(c.assigned, where)
			}
		}
	}
}

// reportCommit: the client's own commit (auto-commit, or the revoke's) as a commit event.
func (c *consumer) reportCommit(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if err != nil || resp == nil {
		if err != nil {
			logf("%s: auto-commit failed: %v", c.handle, err)
		}
		return
	}
	asked := map[tp]int64{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			asked[tp{t.Topic, p.Partition}] = p.Offset
		}
	}
	var offsets [][]any
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				offsets = append(offsets, []any{t.Topic, p.Partition, asked[tp{t.Topic, p.Partition}]})
			}
		}
	}
	if len(offsets) > 0 {
		event("commit", map[string]any{"handle": c.handle, "offsets": offsets})
	}
}

func (c *consumer) membership() (string, int32) {
	if c.cl == nil || !c.group {
		return "", -1
	}
	return c.cl.GroupMetadata()
}

// run does a consumer command.
func (c *consumer) run(cmd *command) (any, *failure) {
	empty := map[string]any{}
	if cmd.Op == "subscribe" {
		return empty, c.subscribe(cmd.Topics)
	}
	if c.cl == nil { // a consumer neither subscribed nor assigned: a direct one, for offsets
		if f := c.build(nil); f != nil {
			return nil, f
		}
	}
	switch cmd.Op {
	case "assign":
		return empty, c.assign(cmd.Partitions)
	case "consume":
		return c.consume(cmd.Max, cmd.timeout())
	case "commit":
		return c.commit(cmd.Offsets)
	case "committed":
		return c.committed(cmd.Partitions, cmd.timeout())
	case "seek":
		return empty, c.seek(cmd.Position)
	case "pause", "resume_partitions":
		c.pause(cmd.Partitions, cmd.Op == "pause")
		return empty, nil
	default: // watermarks
		where := tp{fmt.Sprint(cmd.Position[0]), int32(number(cmd.Position[1]))}
		low, high, f := c.watermarks(where, cmd.timeout())
		if f != nil {
			return nil, f
		}
		return []any{low, high}, nil
	}
}

// build makes the client: a group member (topics given) or a direct consumer.
func (c *consumer) build(topics []string) *failure {
	var err error
	if topics != nil {
		c.group = true
		c.cl, err = kgo.NewClient(append(c.groupOptions(), kgo.ConsumeTopics(topics...))...)
	} else {
		c.cl, err = kgo.NewClient(c.directOptions()...)
	}
	if err != nil {
		f := classify(err, inCall)
		return &f
	}
	return nil
}

func (c *consumer) subscribe(topics []string) *failure {
	switch {
	case c.shared:
		c.group = true
		c.cl.AddConsumeTopics(topics...)
		return nil
	case c.cl != nil:
		f := refused(codeState, "the consumer is already subscribed or assigned")
		return &f
	case c.opts.groupID == "":
		f := refused(codeInvalidArg, "subscribe needs a group.id")
		return &f
	}
	return c.build(topics)
}

func (c *consumer) assign(partitions [][]any) *failure {
	if c.group {
		f := refused(codeState, "a group member's partitions are the group's to assign")
		return &f
	}
	previous := map[string][]int32{}
	for where := range c.assigned {
		previous[where.topic] = append(previous[where.topic], where.partition)
	}
	c.cl.RemoveConsumePartitions(previous)
	c.assigned, c.start, c.position, c.handedOut, c.atEnd = map[tp]bool{}, map[tp]int64{}, map[tp]int64{}, map[tp]int64{}, map[tp]bool{}
	offsets := map[string]map[int32]kgo.Offset{}
	for _, position := range partitions {
		where, at := tp{fmt.Sprint(position[0]), int32(number(position[1]))}, int64(number(position[2]))
		if offsets[where.topic] == nil {
			offsets[where.topic] = map[int32]kgo.Offset{}
		}
		offsets[where.topic][where.partition] = c.offset(at)
		c.assigned[where] = true
		c.start[where] = at
		if at >= 0 {
			c.position[where] = at
		}
	}
	c.cl.AddConsumePartitions(offsets)
	return nil
}

// offset is librdkafka's logical offset as franz-go's.
func (c *consumer) offset(at int64) kgo.Offset {
	switch {
	case at >= 0:
		return kgo.NewOffset().At(at)
	case at == -2:
		return kgo.NewOffset().AtStart()
	case at == -1 || c.opts.resetToEnd:
		return kgo.NewOffset().AtEnd()
	}
	return kgo.NewOffset().AtStart()
}

func (c *consumer) consume(max int, timeout time.Duration) (any, *failure) {
	if c.group {
		c.cl.AllowRebalance() // the host is done with what it was handed
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var fetches kgo.Fetches
	c.d.await(func() { fetches = c.cl.PollRecords(ctx, max) })
	fetches.EachError(func(topic string, partition int32, err error) {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		f := classify(err, inCall)
		f.reason = fmt.Sprintf("%s[%d]: %s", topic, partition, f.reason)
		event("error", map[string]any{"handle": c.handle, "error": f.object()})
	})
	items := []any{}
	// "hw": the partition's high watermark as the fetch that brought its records said
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		for _, r := range p.Records {
			where := tp{r.Topic, r.Partition}
			c.position[where] = r.Offset + 1
			delete(c.atEnd, where) // the position moved: its end is to be reached again
			if r.Attrs.IsControl() {
				continue
			}
			c.handedOut[where] = r.Offset + 1
			items = append(items, map[string]any{
				"t": r.Topic, "p": r.Partition, "o": r.Offset,
				"k": latin1(r.Key), "v": latin1(r.Value), "ts": r.Timestamp.UnixMilli(),
				"hw": p.HighWatermark,
			})
		}
	})
	if c.eof && len(items) == 0 {
		items = append(items, c.reachedEnds(max)...)
	}
	return items, nil
}

// reachedEnds: an end-of-partition item for every partition whose position reached its end
// offset since it last gave one (asked at most every endCheckInterval), at most max of them
// (a consume's items are at most max: the others come with a later consume).
func (c *consumer) reachedEnds(max int) []any {
	if time.Since(c.lastEndsAt) < endCheckInterval {
		return nil
	}
	c.lastEndsAt = time.Now()
	var candidates []tp
	for where := range c.assigned {
		if !c.atEnd[where] && !c.paused[where] {
			candidates = append(candidates, where)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].less(candidates[j]) })
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	ends, err := c.listOffsets(ctx, candidates, -1)
	if err != nil {
		logf("%s: end offsets: %v", c.handle, err)
		return nil
	}
	var items []any
	for _, where := range candidates {
		if len(items) >= max {
			break
		}
		position, known := c.knownPosition(ctx, where)
		if !known || position < ends[where] {
			continue
		}
		c.atEnd[where] = true
		items = append(items, map[string]any{"t": where.topic, "p": where.partition, "o": position, "eof": true})
	}
	return items
}

// knownPosition is where the consumer reads next: past what it polled, else where it starts (a
// direct consumer's assigned offset, a group member's committed offset, else the reset policy's).
func (c *consumer) knownPosition(ctx context.Context, where tp) (int64, bool) {
	if position, ok := c.position[where]; ok {
		return position, true
	}
	at := int64(-1001)
	if c.group {
		if committed, ok := c.cl.CommittedOffsets()[where.topic][where.partition]; ok && committed.Offset >= 0 {
			return committed.Offset, true
		}
	} else {
		at = c.start[where]
	}
	timestamp := int64(-2)
	if at == -1 || (at == -1001 && c.opts.resetToEnd) {
		timestamp = -1
	}
	offsets, err := c.listOffsets(ctx, []tp{where}, timestamp)
	if err != nil {
		return 0, false
	}
	return offsets[where], true
}

// listOffsets: ListOffsets at a timestamp (-2 earliest, -1 latest: the last stable offset under
// read_committed, the high watermark otherwise).
func (c *consumer) listOffsets(ctx context.Context, partitions []tp, timestamp int64) (map[tp]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	if c.opts.readCommitted {
		req.IsolationLevel = 1
	}
	byTopic := map[string][]int32{}
	for _, where := range partitions {
		byTopic[where.topic] = append(byTopic[where.topic], where.partition)
	}
	for topic, ps := range byTopic {
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = topic
		for _, p := range ps {
			part := kmsg.NewListOffsetsRequestTopicPartition()
			part.Partition = p
			part.Timestamp = timestamp
			part.CurrentLeaderEpoch = -1
			t.Partitions = append(t.Partitions, part)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, err
	}
	offsets := map[tp]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", t.Topic, p.Partition, err)
			}
			offsets[tp{t.Topic, p.Partition}] = p.Offset
		}
	}
	for _, where := range partitions {
		if _, ok := offsets[where]; !ok {
			return nil, fmt.Errorf("%s[%d]: no offset in the answer", where.topic, where.partition)
		}
	}
	return offsets, nil
}

func (c *consumer) watermarks(where tp, timeout time.Duration) (int64, int64, *failure) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var low, high map[tp]int64
	var err error
	c.d.await(func() {
		if low, err = c.listOffsets(ctx, []tp{where}, -2); err == nil {
			high, err = c.listOffsets(ctx, []tp{where}, -1)
		}
	})
	if err != nil {
		f := classify(err, inCall)
		return 0, 0, &f
	}
	return low[where], high[where], nil
}

// commit: CommitOffsetsSync, one result per partition.
func (c *consumer) commit(offsets [][]any) (any, *failure) {
	request := map[string]map[int32]kgo.EpochOffset{}
	for _, position := range offsets {
		topic := fmt.Sprint(position[0])
		if request[topic] == nil {
			request[topic] = map[int32]kgo.EpochOffset{}
		}
		request[topic][int32(number(position[1]))] = kgo.EpochOffset{Epoch: -1, Offset: int64(number(position[2]))}
	}
	errorsOf := map[tp]error{}
	var whole error
	ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
	defer cancel()
	c.d.await(func() {
		c.cl.CommitOffsetsSync(ctx, request, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				whole = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					errorsOf[tp{t.Topic, p.Partition}] = kerr.ErrorForCode(p.ErrorCode)
				}
			}
		})
	})
	results := []any{}
	for _, position := range offsets {
		err := whole
		if err == nil {
			err = errorsOf[tp{fmt.Sprint(position[0]), int32(number(position[1]))}]
		}
		var answer any
		if err != nil {
			f := classify(err, inCall)
			f.abortable = false
			answer = f.object()
		}
		results = append(results, []any{position[0], position[1], position[2], answer})
	}
	return results, nil
}

// committed: the group's committed offsets as the coordinator has them (OffsetFetch, stable).
func (c *consumer) committed(partitions [][]any, timeout time.Duration) (any, *failure) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = c.opts.groupID
	req.RequireStable = true
	byTopic := map[string][]int32{}
	var asked []tp
	for _, position := range partitions {
		where := tp{fmt.Sprint(position[0]), int32(number(position[1]))}
		asked = append(asked, where)
		byTopic[where.topic] = append(byTopic[where.topic], where.partition)
	}
	for topic, ps := range byTopic {
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic, t.Partitions = topic, ps
		req.Topics = append(req.Topics, t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var resp *kmsg.OffsetFetchResponse
	var err error
	c.d.await(func() { resp, err = req.RequestWith(ctx, c.cl) })
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		f := classify(err, inCall)
		return nil, &f
	}
	found := map[tp]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
				f := classify(perr, inCall)
				return nil, &f
			}
			found[tp{t.Topic, p.Partition}] = p.Offset
		}
	}
	answer := []any{}
	for _, where := range asked {
		offset, ok := found[where]
		if !ok || offset < 0 {
			offset = -1001
		}
		answer = append(answer, []any{where.topic, where.partition, offset})
	}
	return answer, nil
}

func (c *consumer) seek(position []any) *failure {
	where, at := tp{fmt.Sprint(position[0]), int32(number(position[1]))}, int64(number(position[2]))
	if at < 0 {
		ctx, cancel := context.WithTimeout(context.Background(), defaultTimeout)
		defer cancel()
		offsets, err := c.listOffsets(ctx, []tp{where}, at)
		if err != nil {
			f := classify(err, inCall)
			return &f
		}
		at = offsets[where]
	}
	c.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{where.topic: {where.partition: {Epoch: -1, Offset: at}}})
	c.position[where], c.handedOut[where] = at, at
	delete(c.atEnd, where)
	return nil
}

func (c *consumer) pause(partitions [][]any, paused bool) {
	chosen := map[string][]int32{}
	for _, position := range partitions {
		where := tp{fmt.Sprint(position[0]), int32(number(position[1]))}
		chosen[where.topic] = append(chosen[where.topic], where.partition)
		if paused {
			c.paused[where] = true
		} else {
			delete(c.paused, where)
		}
	}
	if paused {
		c.cl.PauseFetchPartitions(chosen)
	} else {
		c.cl.ResumeFetchPartitions(chosen)
	}
}

// close leaves the group (its revoke callback run by the host) and closes the client, unless a
// transactional producer shares it (it then only leaves the group).
func (c *consumer) close() {
	c.closed = true
	if c.cl == nil {
		return
	}
	switch {
	case c.shared:
		c.cl.AllowRebalance()
		c.d.await(c.cl.LeaveGroup)
	case c.group:
		c.d.await(c.cl.CloseAllowingRebalance)
	default:
		c.cl.Close()
	}
}

// handedOutMismatch: how the host's offsets differ from past-every-record handed out ("" if not).
func (c *consumer) handedOutMismatch(offsets [][]any) string {
	for _, position := range offsets {
		where, at := tp{fmt.Sprint(position[0]), int32(number(position[1]))}, int64(number(position[2]))
		if handed, ok := c.handedOut[where]; !ok || handed != at {
			return fmt.Sprintf("%s[%d] at %d, handed out up to %d", where.topic, where.partition, at, handed)
		}
	}
	return ""
}

func number(value any) float64 {
	n, _ := value.(float64)
	return n
}

func count(partitions map[string][]int32) int {
	n := 0
	for _, ps := range partitions {
		n += len(ps)
	}
	return n
}

// pairs is a partition map as the protocol's [[topic, partition], ...] (sorted).
func pairs(partitions map[string][]int32) [][]any {
	var list [][]any
	for topic, ps := range partitions {
		for _, p := range ps {
			list = append(list, []any{topic, p})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a[0] != b[0] {
			return a[0].(string) < b[0].(string)
		}
		return a[1].(int32) < b[1].(int32)
	})
	return list
}
