package auth

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/config"
)

// FuzzAuthenticate: no presented token panics the verifier, and none is
// accepted without the provider's signature or a configured key.
func FuzzAuthenticate(f *testing.F) {
	is := newIssuer(f)
	k := is.addRSA(f, "k1", true)
	valid := sign(f, k, is.claims("alice", nil))
	a := newAuth(f, is, nil, config.APIKey{Principal: "bot", SHA256: hashKey("the-key")})
	if _, err := a.Authenticate(context.Background(), valid); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{valid, "a.b.c", "the-key", "eyJhbGciOiJub25lIn0.e30.", strings.Repeat(".", 3), valid + "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := a.Authenticate(context.Background(), tok)
		if err == nil {
			if tok != valid && tok != "the-key" {
				// Base64 has several encodings of the same bytes only for
				// trailing bits; anything else accepted is a forgery.
				if !strings.HasPrefix(tok, valid[:len(valid)-4]) {
					t.Fatalf("accepted %q as %s", tok, p.ID())
				}
			}
			return
		}
		if !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("%q: %v is not an invalid-token error", tok, err)
		}
	})
}
