package egress

import "testing"

// FuzzParseTarget: what a server asks the proxy for never panics, and an
// accepted target reads back as itself.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"api.github.com:443", "[::1]:80", "127.0.0.1:8080", "2130706433:80", "[fe80::1%lo]:1", "a..b:1", "x:0", ":", "*.a:1"} {
		f.Add(s)
	}
	rules, _ := ParseRules([]string{"*.example.com:443", "10.0.0.1:*", "*:80"})
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		again, err := ParseTarget(tg.String())
		if err != nil || again != tg {
			t.Fatalf("%q → %v → %v, %v", s, tg, again, err)
		}
		rules.Admit(tg)
	})
}

// FuzzParseRule: config entries never panic, and an accepted rule's
// String parses back to the same rule.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"api.github.com:443", "*.x.y:*", "[::1]:80", "*:1", "a.*.b:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		again, err := ParseRule(r.String())
		if err != nil || again != r {
			t.Fatalf("%q → %v → %v, %v", s, r, again, err)
		}
	})
}
