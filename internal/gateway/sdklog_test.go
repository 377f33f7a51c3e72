package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// The SDK's per-session lines are debug: at info a client connecting and
// leaving logs nothing; at debug the lines are there.
func TestSDKSessionChatterIsDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var logs lockedBuffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))
		cfg := &config.Config{Servers: map[string]*config.Server{}, Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
		g, err := New(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		ct, st := mcp.NewInMemoryTransports()
		ss, err := g.Connect(context.Background(), st)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs.Close()
		_ = ss.Wait()
		g.Close()
		got := strings.Contains(logs.String(), "server session connected")
		if want := level == slog.LevelDebug; got != want {
			t.Errorf("at %v: session chatter logged = %v, want %v\n%s", level, got, want, logs.String())
		}
	}
}
