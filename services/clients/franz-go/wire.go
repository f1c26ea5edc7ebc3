package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The driver's half of the line protocol's output: one JSON object a line on stdout (replies and
// events), written by one goroutine so that the client's goroutines (delivery promises, group
// callbacks) never block on the pipe, and flushed whenever nothing else is waiting. A failed
// write means the host is gone: the driver exits at once, as a crash would. Acknowledgements
// waiting one after another go out as one acks line, in their order among the other lines.

// outgoing is a line, or (line nil) a record acknowledged: one entry of an acks line.
type outgoing struct {
	line      []byte
	token     int64
	partition int32
	offset    int64
}

var out = make(chan outgoing, 1<<14)

func startWire() {
	go func() {
		w := bufio.NewWriterSize(os.Stdout, 1<<16)
		acks := make([]byte, 0, 1<<12)
		for item := range out {
			if item.line == nil {
				acks = appendAck(acks, item)
			} else {
				acks = writeAcks(w, acks)
				write(w, item.line)
			}
			if len(out) == 0 {
				acks = writeAcks(w, acks)
				if err := w.Flush(); err != nil {
					os.Exit(0)
				}
			}
		}
	}()
}

func appendAck(acks []byte, ack outgoing) []byte {
	if len(acks) == 0 {
		acks = append(acks, `{"ev":"acks","acks":[`...)
	} else {
		acks = append(acks, ',')
	}
	acks = strconv.AppendInt(acks, ack.token, 10)
	acks = append(acks, ',')
	acks = strconv.AppendInt(acks, int64(ack.partition), 10)
	acks = append(acks, ',')
	if ack.offset < 0 {
		return append(acks, "null"...)
	}
	return strconv.AppendInt(acks, ack.offset, 10)
}

// writeAcks writes the acks line gathered so far, if any: the buffer, emptied.
func writeAcks(w *bufio.Writer, acks []byte) []byte {
	if len(acks) > 0 {
		write(w, append(acks, "]}\n"...))
	}
	return acks[:0]
}

func write(w *bufio.Writer, data []byte) {
	if _, err := w.Write(data); err != nil {
		os.Exit(0)
	}
}

// emit writes one line (a JSON object) to the host.
func emit(line map[string]any) {
	var buf bytes.Buffer
	encoder := json.NewEncoder(&buf)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(line); err != nil { // Encode ends the line with '\n'
		logf("cannot encode %v: %v", line, err)
		return
	}
	out <- outgoing{line: buf.Bytes()}
}

// ack reports a record acknowledged (offset -1: without one).
func ack(token int64, partition int32, offset int64) {
	out <- outgoing{token: token, partition: partition, offset: offset}
}

func event(kind string, fields map[string]any) {
	fields["ev"] = kind
	emit(fields)
}

func reply(id int64, result any) {
	emit(map[string]any{"re": id, "ok": result})
}

func fail(id int64, failure map[string]any) {
	emit(map[string]any{"re": id, "error": failure})
}

// latin1 is how the protocol carries bytes: one character per byte (nil stays nil).
func latin1(data []byte) any {
	if data == nil {
		return nil
	}
	var text strings.Builder
	text.Grow(len(data))
	for _, b := range data {
		if b < utf8.RuneSelf {
			text.WriteByte(b)
		} else {
			text.WriteRune(rune(b))
		}
	}
	return text.String()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "eoslab franz-go driver: "+format+"\n", args...)
}
