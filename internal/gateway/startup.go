package gateway

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/passthrough"
)

// startup tracks the configured servers that are still being connected
// and indexed after New returned (Options.StartInBackground).
type startup struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	pending map[string]bool
}

func (s *startup) begin(n int) { s.wg.Add(n) }

func (s *startup) add(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[string]bool{}
	}
	s.pending[name] = true
}

// done marks name as started (or failed) and reports whether it was pending.
func (s *startup) done(name string) bool {
	s.mu.Lock()
	was := s.pending[name]
	delete(s.pending, name)
	s.mu.Unlock()
	if was {
		s.wg.Done()
	}
	return was
}

func (s *startup) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.pending))
	for n := range s.pending {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Starting returns the configured servers that are still being connected
// and indexed, sorted.
func (g *Gateway) Starting() []string { return g.startup.names() }

// WaitStarted blocks until every configured server has been indexed or has
// failed to start, or ctx ends.
func (g *Gateway) WaitStarted(ctx context.Context) error {
	done := make(chan struct{})
	go func() { g.startup.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// serverStarted is called once a configured server's startup ends. In
// passthrough and hybrid modes, clients that listed the tools before are
// told the list changed, so they see the new server's tools.
func (g *Gateway) serverStarted(name string) {
	if !g.startup.done(name) || g.pt == nil || g.ctx.Err() != nil {
		return
	}
	g.toolsChanged()
}

// toolsChanged makes the SDK send notifications/tools/list_changed to
// every client session: it adds and removes a placeholder tool, which the
// list handlers hide.
func (g *Gateway) toolsChanged() {
	for _, s := range g.servers {
		s.AddTool(&mcp.Tool{Name: passthrough.PlaceholderTool, InputSchema: map[string]any{"type": "object"}}, passthrough.PlaceholderToolHandler)
		s.RemoveTools(passthrough.PlaceholderTool)
	}
}

// startingNote tells a searcher which servers are not indexed yet.
func (g *Gateway) startingNote() string {
	names := g.startup.names()
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("%d server(s) are still starting and their tools are not searchable yet: %s. Search again in a moment if nothing here fits.",
		len(names), strings.Join(names, ", "))
}

// toolCount is the number of a server's tools in the catalogue: what the
// list filters admitted, not what the server listed.
func (g *Gateway) toolCount(server string) int {
	n := 0
	for _, t := range g.cat.All() {
		if t.Server == server {
			n++
		}
	}
	return n
}
