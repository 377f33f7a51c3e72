package catcache

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

// A replica with an empty state directory starts warm: what another
// replica saved is found in Redis and copied into its directory.
func TestSharedWarmStart(t *testing.T) {
	a, b := redistest.Shared(t)
	cfg := &config.Server{Name: "s", Command: "srv", Transport: "stdio"}
	ca, cb := New(t.TempDir()), New(t.TempDir())
	ca.Share(a)
	cb.Share(b)
	if _, ok, _ := cb.Load(cfg); ok {
		t.Fatal("entry before any save")
	}
	if err := ca.Save(cfg, []*mcp.Tool{{Name: "read", Description: "Read it."}}); err != nil {
		t.Fatal(err)
	}
	e, ok, err := cb.Load(cfg)
	if err != nil || !ok || len(e.Tools) != 1 || e.Tools[0].Name != "read" {
		t.Fatalf("new replica's load = %+v, %v, %v; want the other replica's entry", e, ok, err)
	}
	if _, err := os.Stat(filepath.Join(cb.dir, Key(cfg)+".json")); err != nil {
		t.Fatalf("entry not copied into the new replica's directory: %v", err)
	}
	// A different config of the server is not served the old entry.
	other := &config.Server{Name: "s", Command: "srv2", Transport: "stdio"}
	if _, ok, _ := New(t.TempDir()).Load(other); ok {
		t.Fatal("entry of another config loaded")
	}
}
