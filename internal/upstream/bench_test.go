package upstream

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/config"
)

// BenchmarkCall compares a call to a running server (warm) with a call to
// a stopped one (cold: start the process, handshake, call), for the Go fake
// server and, when `make deps` has installed it, the npm server-everything
// (node). Run with:
//
//	go test -run '^$' -bench Call -benchtime 100x ./internal/upstream/
func BenchmarkCall(b *testing.B) {
	servers := map[string]*config.Server{"go-fake": procConfig("fake", "bench", nil)}
	if p, err := filepath.Abs("../../node_modules/.bin/mcp-server-everything"); err == nil {
		if _, err := os.Stat(p); err == nil {
			servers["node-everything"] = &config.Server{Name: "everything", Command: p, Transport: config.TransportStdio}
		}
	}
	for _, name := range []string{"go-fake", "node-everything"} {
		cfg := servers[name]
		if cfg == nil {
			continue
		}
		args := map[string]any{"message": "hi"}
		for _, mode := range []string{"warm", "cold"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				m := NewManager(Options{})
				defer m.Close()
				s, err := m.Add(cfg)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				if _, err := s.CallTool(ctx, "echo", args); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for b.Loop() {
					if mode == "cold" {
						b.StopTimer()
						s.Stop()
						b.StartTimer()
					}
					if _, err := s.CallTool(ctx, "echo", args); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
