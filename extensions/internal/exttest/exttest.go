// Package exttest holds what the built-in extensions' tests share: an event
// recorder to hand an extension as its Host.Emit, and the check that every
// JSON example in an extension's README decodes with its factory.
package exttest

import (
	"context"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/readme"
)

// Recorder collects emitted events; it is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	events []extension.Event
}

// Emit records e; pass it as extension.Host.Emit.
func (r *Recorder) Emit(_ context.Context, e extension.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Take returns the events recorded since the last Take and forgets them.
func (r *Recorder) Take() []extension.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// Events returns the events recorded so far.
func (r *Recorder) Events() []extension.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]extension.Event(nil), r.events...)
}

// ReadmeExamples fails t unless README.md in the test's folder has at least
// one JSON example of filters.<key> and every one builds with factory.
func ReadmeExamples(t *testing.T, key string, factory extension.Factory) {
	t.Helper()
	ex, err := readme.Examples("README.md", key)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) == 0 {
		t.Fatalf("README.md has no JSON example of filters.%s", key)
	}
	for i, raw := range ex {
		if _, err := factory(raw); err != nil {
			t.Errorf("README example %d: %v\n%s", i+1, err, raw)
		}
	}
}
