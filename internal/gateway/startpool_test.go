package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/config"
)

// Configured servers connect concurrently, but no more than the pool's
// size at once.
func TestStartupPoolBoundsConnects(t *testing.T) {
	var mu sync.Mutex
	inflight, most := 0, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		most = max(most, inflight)
		mu.Unlock()
		// Long enough for every connect the pool allows to overlap.
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		inflight--
		mu.Unlock()
		http.Error(w, "not today", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	servers := map[string]*config.Server{}
	for i := range 12 {
		n := fmt.Sprintf("s%02d", i)
		servers[n] = &config.Server{Name: n, URL: srv.URL + "/" + n, Transport: config.TransportStreamableHTTP}
	}
	cfg := &config.Config{Servers: servers, Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
	g, err := New(context.Background(), Options{Config: cfg, StateDir: t.TempDir(), StartConcurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	mu.Lock()
	defer mu.Unlock()
	if most > 3 {
		t.Fatalf("%d servers connected at once, the pool allows 3", most)
	}
	if most < 2 {
		t.Fatalf("servers connected one at a time (%d at most)", most)
	}
}
