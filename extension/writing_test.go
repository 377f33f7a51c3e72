package extension_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
)

// The code of docs/writing-extensions.md, compiled with the tests;
// TestWritingExtensionsDoc checks the document shows it unchanged.

// Timer logs how long each tool call took and how it ended.
type Timer struct{ log *slog.Logger }

func (*Timer) ID() string { return "com.example/timer" }

func (t *Timer) Provision(_ context.Context, h extension.Host) error {
	t.log = h.Logger
	return nil
}

func (t *Timer) WrapCall(next extension.CallHandler) extension.CallHandler {
	return func(ctx context.Context, req *extension.CallRequest) (*extension.CallResult, error) {
		start := time.Now()
		res, err := next(ctx, req)
		_, refused := extension.AsDenial(err)
		// Names only: never log argument values.
		t.log.InfoContext(ctx, "call", "tool", req.ToolName, "refused", refused, "duration", time.Since(start))
		return res, err
	}
}

// Quota refuses calls to a server once it has had its daily allowance.
type Quota struct {
	mu   sync.Mutex
	used map[string]int
	max  int
}

func (*Quota) ID() string             { return "com.example/quota" }
func (*Quota) Phase() extension.Phase { return extension.PhaseAdmit }

func (q *Quota) WrapCall(next extension.CallHandler) extension.CallHandler {
	return extension.Before(func(_ context.Context, req *extension.CallRequest) error {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.used[req.ServerName] >= q.max {
			return extension.Deny("quota.daily", "the daily call quota is used up")
		}
		q.used[req.ServerName]++
		return nil
	})(next)
}

// QuotaConfig is filters.quota.
type QuotaConfig struct {
	Max int `json:"max"`
}

func init() { extension.Register("quota", NewQuota) }

// NewQuota builds the extension from its decoded config. No side effects.
func NewQuota(c QuotaConfig) (*Quota, error) {
	if c.Max <= 0 {
		return nil, fmt.Errorf("max: want a positive number, got %d", c.Max)
	}
	return &Quota{max: c.Max, used: map[string]int{}}, nil
}

// StatsParams are the params of com.example/stats.
type StatsParams struct {
	mcp.ParamsBase
	Server string `json:"server"`
}

// StatsResult is its result.
type StatsResult struct {
	mcp.ResultBase
	Calls int `json:"calls"`
}

func (q *Quota) Methods() []extension.Method {
	return []extension.Method{
		extension.NewMethod("com.example/stats", nil, func(_ context.Context, p *StatsParams) (*StatsResult, error) {
			q.mu.Lock()
			defer q.mu.Unlock()
			return &StatsResult{Calls: q.used[p.Server]}, nil
		}),
	}
}

func (q *Quota) Capabilities() map[string]any {
	return map[string]any{"max": q.max}
}

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

func TestWritingExtensionsDoc(t *testing.T) {
	doc, err := os.ReadFile("../docs/writing-extensions.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("writing_test.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlock.FindAllSubmatch(doc, -1)
	if len(blocks) < 3 {
		t.Fatalf("%d Go blocks in the document", len(blocks))
	}
	for _, b := range blocks {
		code := strings.TrimSpace(string(b[1]))
		// The interface, a one-line denial and a main are shown for
		// reading; everything else must be code this file compiles.
		if strings.HasPrefix(code, "type Extension interface") || strings.HasPrefix(code, "return ") || strings.HasPrefix(code, "package main") {
			continue
		}
		if !strings.Contains(string(src), code) {
			t.Errorf("docs/writing-extensions.md shows code that extension/writing_test.go does not compile:\n%s", code)
		}
	}

	// And it works: the quota refuses the call after the allowance.
	f, ok := extension.Lookup("quota")
	if !ok {
		t.Fatal("quota not registered")
	}
	if _, err := f([]byte(`{"max": 1, "maxx": 2}`)); err == nil || !strings.Contains(err.Error(), `unknown field "maxx"`) {
		t.Errorf("strict decoding: %v", err)
	}
	e, err := f([]byte(`{"max": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	h := e.(extension.CallMiddleware).WrapCall(func(context.Context, *extension.CallRequest) (*extension.CallResult, error) {
		return extension.NewCallResult(nil), nil
	})
	req := &extension.CallRequest{ToolName: "s__t", ServerName: "s"}
	if _, err := h(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := h(context.Background(), req); err == nil {
		t.Error("quota did not refuse")
	}
	for _, m := range e.(extension.MethodProvider).Methods() {
		if err := extension.CheckMethod(m); err != nil {
			t.Error(err)
		}
	}
}
