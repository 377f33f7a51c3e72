package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/relay"
	"github.com/toolgate/toolgate/internal/upstream/fakeserver"
)

func rawParams(tool string, args string) []byte {
	return relay.AppendCallParams(nil, tool, []byte(args), nil)
}

// A raw call answers what the SDK's call answers, while the SDK's own
// traffic (calls, listing) shares the connection.
func TestRawCallAnswersLikeCallTool(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close()
	s, _ := m.Add(procConfig("raw", newMarker(t), nil))
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			msg := fmt.Sprintf("raw %d \"quoted\" \u00e9", i)
			args, _ := json.Marshal(map[string]any{"message": msg})
			got, err := s.RawCall(ctx, rawParams("echo", string(args)))
			if err != nil {
				errs <- err
				return
			}
			var res mcp.CallToolResult
			if err := json.Unmarshal(got.Result, &res); err != nil || got.Error != nil {
				errs <- fmt.Errorf("raw answer %s / %s: %v", got.Result, got.Error, err)
				return
			}
			sdk, err := s.CallTool(ctx, "echo", map[string]any{"message": msg})
			if err != nil {
				errs <- err
				return
			}
			if a, b := res.Content[0].(*mcp.TextContent).Text, sdk.Content[0].(*mcp.TextContent).Text; a != b || a != "echo: "+msg {
				errs <- fmt.Errorf("raw %q, sdk %q", a, b)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := s.ListTools(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// An unknown tool is the server's JSON-RPC error or isError result,
	// relayed as sent.
	got, err := s.RawCall(ctx, rawParams("nope", `{}`))
	if err != nil || (got.Error == nil && !strings.Contains(string(got.Result), `"isError":true`)) {
		t.Fatalf("unknown tool: %s %s %v", got.Result, got.Error, err)
	}
}

// A raw call the server leaves unanswered times out with the SDK's
// error, and the log says what the leg saw (calls still waiting, when the
// reader last delivered a line), which tells a server that never answered
// from a connection whose reader stopped.
func TestRawCallTimeoutIsLogged(t *testing.T) {
	logs := &logSink{}
	m := NewManager(Options{Logger: slog.New(logs)})
	defer m.Close()
	cfg := procConfig("raw", newMarker(t), nil)
	timeout := 0.3
	cfg.CallTimeout = &timeout
	s, _ := m.Add(cfg)
	_, err := s.RawCall(context.Background(), rawParams("sleep", `{"ms":60000}`))
	if err == nil || !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Fatalf("err %v, want the call timeout", err)
	}
	if !logs.has("a raw tool call went unanswered", "calls_still_waiting=0", "last_line_read=", " ago") {
		t.Fatalf("log %v: want the unanswered call with the leg's state", logs.recs)
	}
}

func TestRawCallTimeoutAndCancelReachUpstream(t *testing.T) {
	log := filepath.Join(t.TempDir(), "events")
	m := NewManager(Options{})
	defer m.Close()
	s, _ := m.Add(procConfig("raw", newMarker(t), map[string]string{fakeserver.EnvLog: log}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := s.RawCall(ctx, rawParams("sleep", `{"ms":60000}`))
		done <- err
	}()
	if !waitUntil(10*time.Second, func() bool { b, _ := os.ReadFile(log); return strings.Contains(string(b), "call sleep") }) {
		t.Fatal("the call never reached the server")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if !waitUntil(10*time.Second, func() bool {
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), "notify notifications/cancelled") && strings.Contains(string(b), "cancelled sleep")
	}) {
		b, _ := os.ReadFile(log)
		t.Fatalf("upstream events %s: want notifications/cancelled received and the handler cancelled", b)
	}
	if st := s.Status(); st.ConsecutiveFailures != 0 {
		t.Fatalf("a cancelled call counted as a failure: %+v", st)
	}
	// Still usable.
	if got, err := s.RawCall(context.Background(), rawParams("echo", `{"message":"x"}`)); err != nil || !strings.Contains(string(got.Result), "echo: x") {
		t.Fatalf("%s %v", got.Result, err)
	}
}

func TestRawCallCrashInFlight(t *testing.T) {
	m := NewManager(Options{})
	defer m.Close()
	s, _ := m.Add(procConfig("raw", newMarker(t), nil))
	_, err := s.RawCall(context.Background(), rawParams("crash", `{}`))
	if err == nil || !strings.Contains(err.Error(), `server "raw" exited or closed the connection while the call was in flight`) {
		t.Fatalf("err %v", err)
	}
	// The next call starts the server again.
	if got, err := s.RawCall(context.Background(), rawParams("echo", `{"message":"back"}`)); err != nil || !strings.Contains(string(got.Result), "echo: back") {
		t.Fatalf("%s %v", got.Result, err)
	}
}

func TestRawCallNeedsStdio(t *testing.T) {
	ct, st := mcp.NewInMemoryTransports()
	srv := fakeserver.New(fakeserver.Options{})
	go srv.Run(context.Background(), st)
	m := NewManager(Options{Transport: func(*config.Server) mcp.Transport { return ct }})
	defer m.Close()
	s, _ := m.Add(&config.Server{Name: "mem", Command: "unused"})
	if _, err := s.RawCall(context.Background(), rawParams("echo", `{}`)); !errors.Is(err, ErrNoRaw) {
		t.Fatalf("err %v, want ErrNoRaw", err)
	}
}

// BenchmarkRawCall compares one echo call on a stdio server through the
// SDK client (typed params and result) and through the raw leg (bytes
// out, bytes back, the result decoded once as the gateway would).
func BenchmarkRawCall(b *testing.B) {
	m := NewManager(Options{})
	defer m.Close()
	s, _ := m.Add(procConfig("fake", "bench", nil))
	ctx := context.Background()
	params := rawParams("echo", `{"message":"hi"}`)
	if _, err := s.RawCall(ctx, params); err != nil {
		b.Fatal(err)
	}
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.CallTool(ctx, "echo", map[string]any{"message": "hi"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.RawCall(ctx, params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw+decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			got, err := s.RawCall(ctx, params)
			if err != nil {
				b.Fatal(err)
			}
			var res mcp.CallToolResult
			if err := json.Unmarshal(got.Result, &res); err != nil {
				b.Fatal(err)
			}
		}
	})
}
