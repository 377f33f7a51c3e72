package secrets

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// FuzzRedactJSON: whatever a document and however it escapes a known
// secret, the masked document decodes to values holding no trace of it.
func FuzzRedactJSON(f *testing.F) {
	f.Add(`{"a":"s3cr3t-value"}`, "s3cr3t-value")
	f.Add(`["\u0073\u0033cr3t-value", {"s3cr3t-value": 1}]`, "s3cr3t-value")
	f.Add(`{"_meta":{"k":"x<y&z-long-value"}}`, "x<y&z-long-value")
	f.Add(`"abc zq9x."`, "zq9x")
	f.Fuzz(func(t *testing.T, doc, secret string) {
		secret = strings.TrimSpace(secret)
		if !json.Valid([]byte(doc)) || !Masked(secret) || len(secret) < wordLen || strings.Contains(Mask, secret) || protocolKeys[secret] {
			return
		}
		r := NewRedactor(secret)
		out, _, err := r.JSON([]byte(doc))
		if err != nil {
			return // not a JSON document
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("masked document does not decode: %v\n%s", err, out)
		}
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				if strings.Contains(x, secret) {
					t.Fatalf("secret left in %q (document %q)", x, doc)
				}
			case map[string]any:
				for k, e := range x {
					walk(k)
					walk(e)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			}
		}
		walk(v)
	})
}

// FuzzStripURLs: no URL in the output carries a password or a query value
// of a URL in the input.
func FuzzStripURLs(f *testing.F) {
	f.Add("see https://bob:pw@host.example/p?key=v&x=1 now")
	f.Add("ftp://a@b http://[::1]:80/?q=1#f")
	f.Fuzz(func(t *testing.T, text string) {
		out := StripURLs(text)
		for _, m := range urlRE.FindAllString(out, -1) {
			u, err := url.Parse(m)
			if err != nil || u.Host == "" {
				continue
			}
			if _, ok := u.User.Password(); ok {
				t.Fatalf("password left in %q (input %q)", m, text)
			}
			for _, vs := range u.Query() {
				for _, v := range vs {
					if v != "" && v != Mask {
						t.Fatalf("query value %q left in %q (input %q)", v, m, text)
					}
				}
			}
		}
	})
}
