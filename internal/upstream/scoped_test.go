package upstream

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/internal/config"
)

func TestScopedConnections(t *testing.T) {
	m := NewManager(Options{})
	if _, err := m.Add(&config.Server{Name: "local", Command: "true"}); err != nil {
		t.Fatal(err)
	}
	local, _ := m.Get("local")
	if _, err := local.Scoped("alice", nil); err == nil {
		t.Fatal("a stdio server got per-principal connections")
	}
	s, err := m.Add(&config.Server{Name: "r", URL: "http://127.0.0.1:1/mcp"})
	if err != nil {
		t.Fatal(err)
	}
	tok := func() (string, bool, error) { return "", false, nil }
	a1, _ := s.Scoped("alice", tok)
	a2, _ := s.Scoped("alice", tok)
	b, _ := s.Scoped("bob", tok)
	if a1 != a2 || a1 == b || !a1.PerPrincipal() || s.PerPrincipal() {
		t.Fatal("one connection per key, distinct from the shared one")
	}
	if _, err := a1.Scoped("x", tok); err == nil {
		t.Fatal("Scoped on a per-principal connection")
	}
	// Full: connections that are down are retired to make room, and a
	// caller still holding one gets ErrClosed, not an orphan.
	for i := range maxScoped - 2 {
		if _, err := s.Scoped(fmt.Sprint("p", i), tok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Scoped("one-more", tok); err != nil {
		t.Fatalf("full of idle connections: %v", err)
	}
	if _, _, err := a1.Use(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("a retired connection: %v", err)
	}
	c, _ := s.Scoped("carol", tok)
	m.Close()
	if _, _, err := c.Use(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("per-principal connection after the manager closed: %v", err)
	}
	if _, err := s.Scoped("dave", tok); !errors.Is(err, ErrClosed) {
		t.Fatalf("Scoped after close: %v", err)
	}
}
