package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestTokensPerPrincipal(t *testing.T) {
	dir := t.TempDir()
	data := "vault@alice=A\nvault@group:ops=OPS\nvault@group:sre=SRE\nvault@group:oncall=OPS\n" +
		"ledger=SHARED\nledger@group:dev=DEV\n" +
		"plain=P\n" +
		""
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewRedactor()
	tok, err := OpenTokens(dir, noEnv, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		server, subject string
		groups          []string
		want, entry     string
		ambiguous       bool
	}{
		{"vault", "alice", []string{"ops"}, "A", "vault@alice", false}, // her own entry first
		{"vault", "bob", []string{"ops"}, "OPS", "vault@group:ops", false},
		{"vault", "bob", []string{"oncall", "ops"}, "OPS", "vault@group:oncall", false}, // same value: fine
		{"vault", "eve", []string{"ops", "sre"}, "", "", true},                          // differing groups
		{"vault", "carol", nil, "", "", false},                                          // none: no shared fallback exists
		{"vault", "", []string{"dev"}, "", "", false},
		{"vault", "group:ops", nil, "", "", false}, // a subject spelled like a group never reads the group's entry
		{"ledger", "carol", nil, "SHARED", "ledger", false},
		{"ledger", "dan", []string{"dev"}, "DEV", "ledger@group:dev", false},
		{"plain", "alice", []string{"ops"}, "P", "plain", false},
		{"missing", "alice", nil, "", "", false},
	} {
		got, entry, ok, err := tok.For(tc.server, tc.subject, tc.groups)
		if tc.ambiguous {
			if !errors.Is(err, ErrAmbiguous) || ok {
				t.Errorf("For(%s, %s, %v) = %q, %v, %v; want ambiguous", tc.server, tc.subject, tc.groups, got.Value, ok, err)
			}
			continue
		}
		if err != nil || got.Value != tc.want || entry != tc.entry || ok != (tc.want != "") {
			t.Errorf("For(%s, %s, %v) = %q %q %v %v; want %q %q", tc.server, tc.subject, tc.groups, got.Value, entry, ok, err, tc.want, tc.entry)
		}
	}
	for server, want := range map[string]bool{"vault": true, "ledger": true, "plain": false, "missing": false} {
		if got, err := tok.Scoped(server); err != nil || got != want {
			t.Errorf("Scoped(%s) = %v, %v; want %v", server, got, err, want)
		}
	}
}
