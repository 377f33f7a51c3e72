// Package gate is the discovery gate: the record of which tools search_tools
// has surfaced to which client session, consulted before every call. It is
// structural, not an extension, so no configuration can switch it off.
//
// Stateful sessions (stdio, streamable HTTP with Mcp-Session-Id) are recorded
// in a Store keyed by session. Clients of the stateless 2026-07-28 revision
// have no session, so search_tools hands them a signed discovery token
// listing what it surfaced; see Signer.
package gate

import (
	"context"
	"sync"
)

// Store records what each session has been shown. A later backend shares it
// between gateway replicas, so it speaks in strings and may fail.
type Store interface {
	// Record adds tools to what session has been shown.
	Record(ctx context.Context, session string, tools ...string) error
	// Has reports whether session has been shown tool.
	Has(ctx context.Context, session, tool string) (bool, error)
	// Forget drops everything recorded for session.
	Forget(ctx context.Context, session string) error
}

// Memory is an in-process Store.
type Memory struct {
	mu       sync.RWMutex
	sessions map[string]map[string]struct{}
}

// NewMemory returns an empty in-memory Store.
func NewMemory() *Memory {
	return &Memory{sessions: map[string]map[string]struct{}{}}
}

func (m *Memory) Record(_ context.Context, session string, tools ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.sessions[session]
	if set == nil {
		set = make(map[string]struct{}, len(tools))
		m.sessions[session] = set
	}
	for _, t := range tools {
		set[t] = struct{}{}
	}
	return nil
}

func (m *Memory) Has(_ context.Context, session, tool string) (bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.sessions[session][tool]
	return ok, nil
}

func (m *Memory) Forget(_ context.Context, session string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, session)
	return nil
}

// Len is the number of sessions with a record, for tests and status.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.sessions)
}
