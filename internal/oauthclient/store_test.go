package oauthclient

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

func cred(access, refresh string, exp time.Time) *Credential {
	return &Credential{ServerURL: "https://api.example/mcp", ClientID: "client-id-canary", TokenURL: "https://as.example/token",
		Token: &oauth2.Token{AccessToken: access, RefreshToken: refresh, Expiry: exp}}
}

func TestStoreRoundTripAndAtRest(t *testing.T) {
	dir := t.TempDir()
	s := OpenStore(dir)
	if _, err := s.Load("vault"); !errors.Is(err, ErrNoCredential) {
		t.Fatalf("load before login: %v", err)
	}
	if err := s.Save("vault", cred("acc-canary-1", "ref-canary-1", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "oauth", "key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "oauth", "vault.json.enc"))
	// Every secret and the client ID carry "canary": a two-letter ID would
	// turn up in random ciphertext now and then.
	if bytes.Contains(raw, []byte("canary")) {
		t.Fatal("the stored credential is readable without the key")
	}
	c, err := s.Load("vault")
	if err != nil || c.Token.RefreshToken != "ref-canary-1" {
		t.Fatalf("load: %+v %v", c, err)
	}
	if names, _ := s.Servers(); len(names) != 1 || names[0] != "vault" {
		t.Fatalf("servers: %v", names)
	}
	// A file copied to another server's name does not decrypt: the name
	// is authenticated with it.
	os.WriteFile(filepath.Join(dir, "oauth", "other.json.enc"), raw, 0o600)
	if _, err := s.Load("other"); err == nil || !strings.Contains(err.Error(), "does not decrypt") {
		t.Fatalf("swapped file: %v", err)
	}
	// A flipped byte is caught.
	raw[len(raw)-1] ^= 1
	os.WriteFile(filepath.Join(dir, "oauth", "vault.json.enc"), raw, 0o600)
	if _, err := s.Load("vault"); err == nil {
		t.Fatal("tampered file decrypted")
	}
	// A key others can read is refused.
	os.Chmod(filepath.Join(dir, "oauth", "key"), 0o644)
	if err := s.Save("vault", cred("a", "r", time.Time{})); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("world-readable key: %v", err)
	}
	os.Chmod(filepath.Join(dir, "oauth", "key"), 0o600)
	if err := s.Delete("vault"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("vault"); !errors.Is(err, ErrNoCredential) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestSourceOnlyForTheLoginURL(t *testing.T) {
	s := OpenStore(t.TempDir())
	if err := s.Save("vault", cred("acc", "", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	var told []string
	src := NewSource(s, nil, nil)
	src.Secret = func(v ...string) { told = append(told, v...) }
	if tok, ok, err := src.Token(context.Background(), "vault", "https://api.example/mcp/"); !ok || err != nil || tok != "acc" {
		t.Fatalf("same URL: %q %v %v", tok, ok, err)
	}
	if len(told) != 1 || told[0] != "acc" {
		t.Fatalf("values given for redaction: %v", told)
	}
	if _, ok, _ := src.Token(context.Background(), "vault", "https://evil.example/mcp"); ok {
		t.Fatal("the token went to another URL than the login's")
	}
	if _, ok, _ := src.Token(context.Background(), "nobody", "https://api.example/mcp"); ok {
		t.Fatal("a token for a server nobody logged in to")
	}
	// Expired without a refresh token: an error that says what to do.
	s.Save("vault", cred("acc", "", time.Now().Add(-time.Minute)))
	os.Chtimes(filepath.Join(s.Dir(), "vault.json.enc"), time.Now().Add(time.Second), time.Now().Add(time.Second))
	if _, _, err := src.Token(context.Background(), "vault", "https://api.example/mcp"); err == nil || !strings.Contains(err.Error(), "auth login vault") {
		t.Fatalf("expired: %v", err)
	}
}
