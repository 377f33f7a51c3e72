package gate

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMemorySessionsAreSeparate(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	m.Record(ctx, "a", "s__x", "s__y")
	for _, c := range []struct {
		session, tool string
		want          bool
	}{{"a", "s__x", true}, {"a", "s__y", true}, {"a", "s__z", false}, {"b", "s__x", false}, {"", "s__x", false}} {
		if got, _ := m.Has(ctx, c.session, c.tool); got != c.want {
			t.Errorf("Has(%q, %q) = %v", c.session, c.tool, got)
		}
	}
	m.Forget(ctx, "a")
	if got, _ := m.Has(ctx, "a", "s__x"); got || m.Len() != 0 {
		t.Fatal("Forget left a record")
	}
}

func TestMemoryConcurrent(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := string(rune('a' + i))
			for range 200 {
				m.Record(ctx, s, "t")
				m.Has(ctx, s, "t")
			}
		}()
	}
	wg.Wait()
	if m.Len() != 8 {
		t.Fatalf("Len = %d", m.Len())
	}
}

func newTestSigner(t *testing.T) *Signer {
	s, err := NewSigner([]byte(strings.Repeat("k", 32)), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTokenVerify(t *testing.T) {
	s := newTestSigner(t)
	tok := s.Issue("alice", []string{"a__x", "b__y"})
	if err := s.Verify(tok, "alice", "b__y"); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	other, _ := NewSigner([]byte(strings.Repeat("o", 32)), time.Minute)
	body, sig, _ := strings.Cut(tok, ".")
	forged := base64.RawURLEncoding.EncodeToString([]byte(`{"t":["a__x","b__y","c__z"],"p":"alice","e":9999999999}`)) + "." + sig
	tests := []struct {
		name, token, principal, tool string
		want                         error
	}{
		{"missing", "", "alice", "a__x", ErrTokenMissing},
		{"unlisted tool", tok, "alice", "c__z", ErrTokenNotTool},
		{"case changed", tok, "alice", "A__x", ErrTokenNotTool},
		{"other principal", tok, "bob", "a__x", ErrTokenNotOwner},
		{"no dot", body, "alice", "a__x", ErrTokenInvalid},
		{"claims edited", forged, "alice", "c__z", ErrTokenInvalid},
		{"other key", other.Issue("alice", []string{"c__z"}), "alice", "c__z", ErrTokenInvalid},
		{"garbage", "!!!.???", "alice", "a__x", ErrTokenInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Verify(tt.token, tt.principal, tt.tool); !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestTokenExpires(t *testing.T) {
	s := newTestSigner(t)
	now := time.Unix(1_000_000, 0)
	s.now = func() time.Time { return now }
	tok := s.Issue("", []string{"a__x"})
	now = now.Add(2 * time.Minute)
	if err := s.Verify(tok, "", "a__x"); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("Verify = %v, want expired", err)
	}
}

func TestKeyFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "gate.key")
	k1, err := LoadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode())
	}
	k2, _ := LoadOrCreateKey(p)
	if string(k1) != string(k2) {
		t.Fatal("key changed on reload")
	}
	os.WriteFile(p, []byte("short"), 0o600)
	if _, err := LoadOrCreateKey(p); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("corrupt key: %v", err)
	}
	if _, err := NewSigner([]byte("short"), 0); err == nil {
		t.Fatal("short key accepted")
	}
}

// TestTokenRefusesNonCanonicalBase64: a 32-byte MAC leaves four unused bits
// in the last base64 character, so a lenient decoder accepts sixteen
// spellings of one signature. Only the canonical one may verify.
func TestTokenRefusesNonCanonicalBase64(t *testing.T) {
	s := newTestSigner(t)
	tok := s.Issue("alice", []string{"a__x"})
	if err := s.Verify(tok, "alice", "a__x"); err != nil {
		t.Fatalf("canonical token: %v", err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	body, sig, _ := strings.Cut(tok, ".")
	want, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		t.Fatal(err)
	}
	variants := 0
	for _, c := range alphabet {
		alt := sig[:len(sig)-1] + string(c)
		if alt == sig {
			continue
		}
		// Only variants a lenient decoder maps to the same bytes matter.
		if got, err := base64.RawURLEncoding.DecodeString(alt); err != nil || !bytes.Equal(got, want) {
			continue
		}
		variants++
		if err := s.Verify(body+"."+alt, "alice", "a__x"); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("signature spelled %q (same bytes, other padding bits): got %v, want ErrTokenInvalid", alt, err)
		}
	}
	if variants == 0 {
		t.Fatal("no non-canonical variant found; the test proves nothing")
	}
}
