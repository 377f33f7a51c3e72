package gateway

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/llmproxy"
)

// seer records the calls its filter sees and refuses those in deny.
type seer struct {
	deny map[string]bool
	mu   sync.Mutex
	seen []*extension.CallRequest
}

func (*seer) ID() string { return "dev.test/seer" }
func (s *seer) WrapCall(next extension.CallHandler) extension.CallHandler {
	return func(ctx context.Context, c *extension.CallRequest) (*extension.CallResult, error) {
		s.mu.Lock()
		s.seen = append(s.seen, c)
		s.mu.Unlock()
		if s.deny[c.ToolName] {
			return nil, extension.Deny("seer", "denied by the test")
		}
		return next(ctx, c)
	}
}

func (s *seer) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.seen {
		out = append(out, c.ToolName)
	}
	s.seen = nil
	return out
}

// TestEvaluateLLMCall: the registry lookup finds the server of a tool name
// from the tools map, a qualified name, Claude Code's mcp__server__tool or
// a bare catalogued name (every server that offers it is judged); an
// unknown name is skipped, or refused with fail_closed.
func TestEvaluateLLMCall(t *testing.T) {
	a, b := echoUpstream(t), echoUpstream(t)
	s := &seer{deny: map[string]bool{"b__echo": true, "mail__send_email": true}}
	ctx := context.Background()
	servers := map[string]*config.Server{"a": {URL: a + "/", Transport: config.TransportStreamableHTTP}, "b": {URL: b + "/", Transport: config.TransportStreamableHTTP}}
	for n, sv := range servers {
		sv.Name = n
	}
	lp := &config.LLMProxy{Tools: map[string]string{"send_email": "mail", "post_note": "notes"}}
	cfg := &config.Config{Servers: servers, Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}, LLMProxy: lp}
	state := t.TempDir()
	g, err := New(ctx, Options{Config: cfg, StateDir: state, Extensions: []extension.Extension{s}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	cases := []struct {
		name   string
		action string
		seen   []string
	}{
		{"echo", llmproxy.Block, []string{"a__echo", "b__echo"}},
		{"a__echo", llmproxy.Allow, []string{"a__echo"}},
		{"mcp__a__echo", llmproxy.Allow, []string{"a__echo"}},
		{"mcp__b__echo", llmproxy.Block, []string{"b__echo"}},
		{"send_email", llmproxy.Block, []string{"mail__send_email"}},
		{"post_note", llmproxy.Allow, []string{"notes__post_note"}},
		{"Read", llmproxy.Skip, nil},
		{"a__nope", llmproxy.Skip, nil},
	}
	for _, c := range cases {
		d := g.EvaluateLLMCall(ctx, llmproxy.Call{Provider: "anthropic", Session: "conv", Name: c.name, Arguments: map[string]any{"x": 1},
			Def: &mcp.Tool{Name: c.name, Description: "as declared"}})
		if d.Action != c.action {
			t.Errorf("%s: action %q (%s), want %q", c.name, d.Action, d.Rule, c.action)
		}
		if got := s.take(); !slices.Equal(got, c.seen) {
			t.Errorf("%s: filters saw %v, want %v", c.name, got, c.seen)
		}
	}
	lp.FailClosed = true
	if d := g.EvaluateLLMCall(ctx, llmproxy.Call{Name: "Read"}); d.Action != llmproxy.Block || d.Rule != "llm_proxy.fail_closed" {
		t.Errorf("fail_closed: %+v", d)
	}
	audit, err := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(audit), `"phase":"llm_response"`); n < 7 {
		t.Errorf("%d llm_response decisions in the audit log, want one per judged owner", n)
	}
}
