package catcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

func TestKeyChangesWithConfigNotName(t *testing.T) {
	base := func() *config.Server {
		return &config.Server{Name: "a", Command: "srv", Args: []string{"x"}, Env: map[string]string{"TOKEN": "s3cret"}, Transport: "stdio"}
	}
	k := Key(base())
	for name, mod := range map[string]func(*config.Server){
		"args":    func(s *config.Server) { s.Args = []string{"y"} },
		"env":     func(s *config.Server) { s.Env["TOKEN"] = "other" },
		"command": func(s *config.Server) { s.Command = "srv2" },
		"cwd":     func(s *config.Server) { s.Dir = "/tmp" },
	} {
		s := base()
		mod(s)
		if Key(s) == k {
			t.Errorf("changing %s kept the key", name)
		}
	}
	s := base()
	s.Name, s.Lazy = "b", true
	if Key(s) != k {
		t.Error("the name or lazy changed the key; only what decides the tools should")
	}
}

func TestSaveLoadPruneNoSecrets(t *testing.T) {
	dir := t.TempDir()
	c := New(dir)
	cfg := &config.Server{Name: "a", Command: "srv", Env: map[string]string{"TOKEN": "canary-s3cret"}, Headers: nil}
	if _, ok, err := c.Load(cfg); ok || err != nil {
		t.Fatalf("empty cache: ok %v err %v", ok, err)
	}
	tools := []*mcp.Tool{{Name: "echo", Description: "Echo a message", InputSchema: map[string]any{"type": "object"}}}
	if err := c.Save(cfg, tools); err != nil {
		t.Fatal(err)
	}
	e, ok, err := c.Load(cfg)
	if !ok || err != nil || len(e.Tools) != 1 || e.Tools[0].Name != "echo" || e.Server != "a" {
		t.Fatalf("load: %+v %v %v", e, ok, err)
	}
	// A new config of the same server replaces the old entry.
	cfg2 := &config.Server{Name: "a", Command: "srv", Env: map[string]string{"TOKEN": "canary-rotated"}}
	if err := c.Save(cfg2, tools); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Load(cfg); ok {
		t.Error("the old config's entry is still there")
	}
	files, _ := filepath.Glob(filepath.Join(dir, Dir, "*"))
	if len(files) != 1 {
		t.Fatalf("files %v, want one entry", files)
	}
	b, _ := os.ReadFile(files[0])
	if strings.Contains(string(b), "canary") {
		t.Fatalf("an env value is stored in clear: %s", b)
	}
	if st, _ := os.Stat(files[0]); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	// A damaged entry is an error, not a crash, and not a hit.
	os.WriteFile(files[0], []byte("{"), 0o600)
	if _, ok, err := c.Load(cfg2); ok || err == nil {
		t.Errorf("damaged entry: ok %v err %v", ok, err)
	}
}
