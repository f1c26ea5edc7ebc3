package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode/utf8"
)

// The driver's half of the line protocol's output: one JSON object a line on stdout (replies and
// events), written by one goroutine so that the client's goroutines (delivery promises, group
// callbacks) never block on the pipe, and flushed whenever nothing else is waiting. A failed
// write means the host is gone: the driver exits at once, as a crash would.

var out = make(chan []byte, 1<<14)

func startWire() {
	go func() {
		w := bufio.NewWriterSize(os.Stdout, 1<<16)
		for line := range out {
			if _, err := w.Write(line); err != nil {
				os.Exit(0)
			}
			if len(out) == 0 {
				if err := w.Flush(); err != nil {
					os.Exit(0)
				}
			}
		}
	}()
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
	out <- buf.Bytes()
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

// raw is the bytes a latin-1 string of the protocol carries (nil for JSON null).
func raw(text *string) []byte {
	if text == nil {
		return nil
	}
	data := make([]byte, 0, len(*text))
	for _, r := range *text {
		data = append(data, byte(r))
	}
	return data
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "eoslab franz-go driver: "+format+"\n", args...)
}
