package llmproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// discardWriter is a ResponseWriter that flushes nowhere.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

// benchStream is a 2,000-event Anthropic stream: text deltas, then one
// tool_use block.
func benchStream(events int) []byte {
	var b bytes.Buffer
	add := func(name string, v any) {
		j, _ := json.Marshal(v)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", name, j)
	}
	add("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "m", "type": "message", "role": "assistant", "content": []any{}}})
	add("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	for range events - 8 {
		add("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "fog clearing "}})
	}
	add("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	add("content_block_start", map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{"type": "tool_use", "id": "t", "name": "get_weather", "input": map[string]any{}}})
	add("content_block_delta", map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": `{"location":"SF"}`}})
	add("content_block_stop", map[string]any{"type": "content_block_stop", "index": 1})
	add("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use"}})
	add("message_stop", map[string]any{"type": "message_stop"})
	return b.Bytes()
}

// BenchmarkStream is the proxy's own CPU per streamed event (no network):
// SSE parsing, the checks, the held tool block and its judgement. Compare
// with BenchmarkRelay, copying the same bytes unexamined.
func BenchmarkStream(b *testing.B) {
	data := benchStream(2000)
	p := blockSendEmail()
	w := &discardWriter{h: http.Header{}}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		p.stream(context.Background(), w, bytes.NewReader(data), "anthropic", apiMessages, &requestInfo{})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2000), "ns/event")
}

func BenchmarkRelay(b *testing.B) {
	data := benchStream(2000)
	w := &discardWriter{h: http.Header{}}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		// One write per event, as the proxy writes.
		r := newSSEReader(bytes.NewReader(data), 1<<20)
		for {
			e, err := r.next()
			if err == io.EOF {
				break
			}
			_, _ = w.Write(e.raw)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2000), "ns/event")
}
