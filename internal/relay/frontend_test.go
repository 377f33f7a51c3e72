package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The frontend serves the calls Peel accepts (answers and errors written
// whole, with the client's id), passes everything else on, and a
// client's cancellation ends the call it names.
func TestFrontend(t *testing.T) {
	out := &syncBuffer{}
	started := make(chan string, 4)
	f := &Frontend{
		Ctx:  context.Background(),
		Out:  &LockedWriter{W: out},
		Peel: func(name string) bool { return name != "sdk_tool" },
		Serve: func(ctx context.Context, c Call) Answer {
			switch c.Name {
			case "slow":
				started <- string(c.ID)
				<-ctx.Done()
				return Answer{Error: &jsonrpc.Error{Code: -32800, Message: "cancelled"}}
			case "fails":
				return Answer{Error: &jsonrpc.Error{Code: -32602, Message: "bad \"args\""}}
			}
			text, _ := json.Marshal(c.Name + ":" + string(c.Arguments))
			return Answer{Result: []byte(`{"content":[{"type":"text","text":` + string(text) + `}]}`)}
		},
	}
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"slow"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sdk_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"a":[1,2]}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fails"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","name":"dup"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"s1"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`,
	}, "\n") + "\n"
	pr, pw := io.Pipe()
	go func() {
		lines := strings.SplitAfter(in, "\n")
		pw.Write([]byte(lines[0]))
		<-started // the slow call is being served before its cancellation arrives
		for _, l := range lines[1:] {
			pw.Write([]byte(l))
		}
		pw.Close()
	}()
	passed, err := io.ReadAll(&Lines{R: pr, Claim: f.Claim})
	if err != nil {
		t.Fatal(err)
	}
	f.Wait()
	wantPassed := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sdk_tool","arguments":{}}}` + "\n" +
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","name":"dup"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}` + "\n"
	if string(passed) != wantPassed {
		t.Fatalf("passed on to the SDK:\n%s\nwant:\n%s", passed, wantPassed)
	}
	answers := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("answer %q: %v", l, err)
		}
		answers[strings.Trim(string(must(json.Marshal(m["id"]))), `"`)] = m
	}
	if len(answers) != 3 {
		t.Fatalf("answers %v, want s1, 3 and 4", answers)
	}
	if r := answers["3"]["result"].(map[string]any); r["content"].([]any)[0].(map[string]any)["text"] != `echo:{"a":[1,2]}` {
		t.Fatalf("answer 3: %v", answers["3"])
	}
	if e := answers["4"]["error"].(map[string]any); e["message"] != `bad "args"` || e["code"] != float64(-32602) {
		t.Fatalf("answer 4: %v", answers["4"])
	}
	if e := answers["s1"]["error"].(map[string]any); e["code"] != float64(-32800) {
		t.Fatalf("answer s1: %v", answers["s1"])
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The frontend serves calls on a bounded set of long-lived workers: calls
// one after another reuse one worker, calls beyond MaxWorkers at once are
// still served at once (none waits for another, so a cancellation is never
// stuck behind a slow call), and the workers stop when Ctx ends.
func TestFrontendWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	f := &Frontend{
		Ctx: ctx, Out: &LockedWriter{W: out}, MaxWorkers: 2,
		Peel: func(string) bool { return true },
		Serve: func(ctx context.Context, c Call) Answer {
			if c.Name == "block" {
				started <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return Answer{Result: []byte(`{}`)}
		},
	}
	call := func(id int, name string) {
		if !f.Claim([]byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + name + `"}}`)) {
			t.Fatalf("call %d not claimed", id)
		}
	}
	for i := range 50 {
		call(i, "quick")
		f.Wait()
	}
	// The worker that answered may not be waiting again yet when the next
	// call comes: at most two serve them all.
	if f.workers > 2 || f.extra != 0 {
		t.Fatalf("50 calls one after another started %d workers and %d goroutines, want at most 2 workers", f.workers, f.extra)
	}
	// Four calls at once with two workers: all four run together.
	for i := range 4 {
		call(100+i, "block")
	}
	for range 4 {
		<-started
	}
	if f.workers != 2 || f.extra < 2 {
		t.Fatalf("%d workers and %d goroutines of their own, want MaxWorkers (2) and the rest", f.workers, f.extra)
	}
	// A cancellation still reaches one of them.
	if !f.Claim([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":103}}`)) {
		t.Fatal("cancellation not claimed")
	}
	close(release)
	f.Wait()
	if n := strings.Count(out.String(), "\n"); n != 54 {
		t.Fatalf("%d answers, want 54", n)
	}
	cancel()
	done := make(chan struct{})
	go func() { f.Wait(); close(done) }()
	<-done // the workers stopped (a leak would hang here)
}
