package secrets

import (
	"encoding/json"
	"strings"
	"testing"
)

// Canonical finds a secret in its JSON spelling, not its raw bytes: a
// secret with a quote, a backslash, HTML characters, control characters
// or U+2028 is written escaped, and a replacement of its raw bytes would
// miss it. Each masked document decodes to JSON's masking of it.
func TestCanonicalMasksEscapedSecrets(t *testing.T) {
	for _, secret := range []string{`sk-"quoted"-key`, `C:\keys\prod-key1`, "<tok&en>-12345", "line\nbreak-secret9", "sep\u2028arator-secret", "ünïcode-sécret-42"} {
		doc, _ := json.Marshal(map[string]any{"a": []any{"x " + secret + " y", 1}, "b": secret})
		if strings.Contains(string(doc), secret) && strings.ContainsAny(secret, "\"\\<&\n\u2028") {
			t.Fatalf("%q: the document spells it raw: %s", secret, doc)
		}
		r := NewRedactor(secret)
		out, changed, ok := r.Canonical(doc)
		if !ok || !changed {
			t.Fatalf("%q: Canonical(%s) = %s, changed %v, ok %v", secret, doc, out, changed, ok)
		}
		want, _, err := r.JSON(doc)
		if err != nil || string(out) != string(want) {
			t.Errorf("%q: Canonical gives %s, JSON %s (%v)", secret, out, want, err)
		}
	}
	// A secret in a key is left to JSON, which renames the key.
	doc := []byte(`{"sk-key-in-a-key":1}`)
	if _, _, ok := NewRedactor("sk-key-in-a-key").Canonical(doc); ok {
		t.Error("a secret in a key was masked on the bytes")
	}
}
