// Package secrets keeps credentials out of the model: it reads the tokens
// file (fresh on every connection, so rotation needs no restart), decides
// which environment a stdio server inherits, and redacts every known secret
// value from logs, errors and tool results.
package secrets

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/config"
)

// TokensFileVar moves the tokens file; set it in the environment or in the
// config's .env.
const TokensFileVar = "TOOLGATE_TOKENS_FILE"

// Tokens is the tokens file: server_name=value lines, and per-principal
// lines for servers each caller reaches with their own credentials:
//
//	github=ghp_shared            the shared token (callers without their own)
//	github@alice=ghp_alice       principal "alice" (an API key's name or a token's sub)
//	github@group:dev=ghp_dev     any principal in group "dev"
//
// Server names cannot contain '@', so the first '@' ends the server name.
type Tokens struct {
	path     string
	explicit bool
	redact   *Redactor
	now      func() time.Time

	mu      sync.Mutex
	changed map[string]seen // server → when its value was first seen as it is now
	// The last read, reused while the file's size and mtime are unchanged:
	// Get runs on every request to a remote server.
	stamp  fileStamp
	values map[string]string
}

type fileStamp struct {
	size int64
	mod  time.Time
	ok   bool
}

type seen struct {
	sum   [32]byte
	since time.Time
}

// Token is one server's credential.
type Token struct {
	Value string
	// Since is when the value was first seen unchanged (at most the file's
	// modification time for values present at startup).
	Since time.Time
}

// OpenTokens resolves the tokens file: $TOOLGATE_TOKENS_FILE (looked up with
// lookup: the config's .env, then the environment; "~" expanded; relative to
// configDir), else "tokens" in configDir. When the variable is set the file
// must exist. Every value read is registered with r for redaction.
func OpenTokens(configDir string, lookup func(string) (string, bool), r *Redactor) (*Tokens, error) {
	t := &Tokens{redact: r, now: time.Now, changed: map[string]seen{}}
	if v, ok := lookup(TokensFileVar); ok && v != "" {
		p, err := expandPath(v, configDir)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", TokensFileVar, err)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s is set to %s, but that file cannot be read (%v); create it or unset the variable", TokensFileVar, p, errors.Unwrap(err))
		}
		t.path, t.explicit = p, true
	} else {
		t.path = filepath.Join(configDir, "tokens")
	}
	// Read once so malformed files fail at startup and values are redacted
	// from the first log line on.
	if _, err := t.read(); err != nil {
		return nil, err
	}
	return t, nil
}

func expandPath(p, base string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(home, strings.TrimPrefix(p[1:], "/"))
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p), nil
}

// Path is the resolved tokens file path (safe to log).
func (t *Tokens) Path() string { return t.path }

// Exists reports whether the tokens file is present.
func (t *Tokens) Exists() bool {
	_, err := os.Stat(t.path)
	return err == nil
}

// Get re-reads the file and returns server's token.
func (t *Tokens) Get(server string) (Token, bool, error) {
	m, err := t.read()
	if err != nil {
		return Token{}, false, err
	}
	v, ok := m[server]
	if !ok || v == "" {
		return Token{}, false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return Token{Value: v, Since: t.changed[server].since}, true, nil
}

// PrincipalSep separates a server name from the principal or group of a
// per-principal tokens file entry; GroupPrefix marks a group.
const (
	PrincipalSep = "@"
	GroupPrefix  = "group:"
)

// Scoped reports whether the tokens file holds a per-principal or
// per-group entry for server: its callers are then each connected with
// their own credential rather than sharing one connection.
func (t *Tokens) Scoped(server string) (bool, error) {
	m, err := t.read()
	if err != nil {
		return false, err
	}
	prefix := server + PrincipalSep
	for k, v := range m {
		if v != "" && strings.HasPrefix(k, prefix) {
			return true, nil
		}
	}
	return false, nil
}

// ErrAmbiguous is returned by For when a principal with no entry of its
// own is in several groups whose entries differ: guessing could hand it a
// credential meant for a team with other rights.
var ErrAmbiguous = errors.New("ambiguous credentials")

// For returns the token of server for the principal named subject in
// groups: its own entry, else its one group's entry (groups whose entries
// differ are an error), else the shared entry. entry is the key that
// matched ("github@alice", "github@group:dev", "github"), safe to log.
// ok is false when none applies: the caller is sent with no token, never
// with someone else's.
func (t *Tokens) For(server, subject string, groups []string) (tok Token, entry string, ok bool, err error) {
	m, err := t.read()
	if err != nil {
		return Token{}, "", false, err
	}
	// A subject spelled like a group entry ("group:ops", which a provider
	// letting users pick their names could issue) never reads that entry.
	if subject != "" && !strings.HasPrefix(subject, GroupPrefix) {
		if k := server + PrincipalSep + subject; m[k] != "" {
			entry = k
		}
	}
	if entry == "" {
		for _, g := range groups {
			k := server + PrincipalSep + GroupPrefix + g
			if m[k] == "" {
				continue
			}
			if entry != "" && m[entry] != m[k] {
				return Token{}, "", false, fmt.Errorf("server %q: %w: principal %q is in groups with different tokens (%s, %s); give it an entry of its own", server, ErrAmbiguous, subject, entry, k)
			}
			if entry == "" || k < entry {
				entry = k // the same value either way; name one deterministically
			}
		}
	}
	if entry == "" && m[server] != "" {
		entry = server
	}
	if entry == "" {
		return Token{}, "", false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return Token{Value: m[entry], Since: t.changed[entry].since}, entry, true, nil
}

// Age is how long server's token has been unchanged, or 0 if unknown.
func (t *Tokens) Age(server string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.changed[server]
	if !ok {
		return 0
	}
	return t.now().Sub(s.since)
}

func (t *Tokens) read() (map[string]string, error) {
	st, err := os.Stat(t.path)
	if err == nil {
		stamp := fileStamp{size: st.Size(), mod: st.ModTime(), ok: true}
		t.mu.Lock()
		if t.values != nil && t.stamp == stamp {
			m := t.values
			t.mu.Unlock()
			return m, nil
		}
		t.mu.Unlock()
	} else if errors.Is(err, fs.ErrNotExist) && !t.explicit {
		// No file and none required: one stat per call, not a stat and a
		// failed open.
		return map[string]string{}, nil
	}
	data, err := os.ReadFile(t.path)
	if errors.Is(err, fs.ErrNotExist) && !t.explicit {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %v", t.path, errors.Unwrap(err))
	}
	m, err := config.ParseKeyValues(data)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %v", t.path, err)
	}
	var mod time.Time
	if st, err := os.Stat(t.path); err == nil {
		mod = st.ModTime()
	}
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.values, t.stamp = m, fileStamp{}
	if st, err := os.Stat(t.path); err == nil && st.ModTime().Equal(mod) {
		t.stamp = fileStamp{size: st.Size(), mod: mod, ok: true}
	}
	for k, v := range m {
		t.redact.Add(v)
		sum := sha256.Sum256([]byte(v))
		prev, ok := t.changed[k]
		switch {
		case !ok && !mod.IsZero() && mod.Before(now):
			t.changed[k] = seen{sum, mod}
		case !ok || prev.sum != sum:
			t.changed[k] = seen{sum, now}
		}
	}
	return m, nil
}
