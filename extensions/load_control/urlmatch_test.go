package loadcontrol

import (
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		url  string
		want Target
	}{
		{"https://github.com/x", Target{"https", "github.com", false, "443", "/x"}},
		{"HTTPS://GitHub.COM/X", Target{"https", "github.com", false, "443", "/X"}},
		{"https://github.com./", Target{"https", "github.com", false, "443", "/"}},
		{"https://github.com..", Target{"https", "github.com", false, "443", "/"}},
		{"https://github.com@evil.com/", Target{"https", "evil.com", false, "443", "/"}},
		{"https://user:pw@github.com/", Target{"https", "github.com", false, "443", "/"}},
		{"https://evil.com/https://github.com/x", Target{"https", "evil.com", false, "443", "/https:/github.com/x"}},
		{"https://evil.com#@github.com/", Target{"https", "evil.com", false, "443", "/"}},
		{"https://evil.com?@github.com/", Target{"https", "evil.com", false, "443", "/"}},
		{"https://github.com%2f@evil.com/", Target{"https", "evil.com", false, "443", "/"}},
		{"http://example.com:8080/mcp", Target{"http", "example.com", false, "8080", "/mcp"}},
		{"https://github.com:0443/", Target{"https", "github.com", false, "443", "/"}},
		{"http://127.0.0.1:9/mcp", Target{"http", "127.0.0.1", true, "9", "/mcp"}},
		{"http://[::1]:9/mcp", Target{"http", "::1", true, "9", "/mcp"}},
		{"http://[0:0::1]/", Target{"http", "::1", true, "80", "/"}},
		{"http://[::ffff:127.0.0.1]/", Target{"http", "127.0.0.1", true, "80", "/"}},
		{"http://[2001:DB8::1]/", Target{"http", "2001:db8::1", true, "80", "/"}},
		{"https://host/a/../b", Target{"https", "host", false, "443", "/b"}},
		{"https://host/a/%2e%2e/b", Target{"https", "host", false, "443", "/b"}},
		{"https://host/a/%2E%2E/%2E%2E/b", Target{"https", "host", false, "443", "/b"}},
		{`https://host/a\..\b`, Target{"https", "host", false, "443", "/b"}},
		{"https://host/%61dmin/", Target{"https", "host", false, "443", "/admin/"}},
		{"https://host/a%2Fb", Target{"https", "host", false, "443", "/a/b"}},
		{"https://host", Target{"https", "host", false, "443", "/"}},
		{"https://host?x=1", Target{"https", "host", false, "443", "/"}},
		{"https://ｇｉｔｈｕｂ.com/x", Target{"https", "github.com", false, "443", "/x"}},
		{"https://bücher.example/", Target{"https", "xn--bcher-kva.example", false, "443", "/"}},
	}
	for _, tt := range tests {
		got, err := ParseTarget(tt.url)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", tt.url, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseTarget(%q) = %+v, want %+v", tt.url, got, tt.want)
		}
	}
}

func TestParseTargetErrors(t *testing.T) {
	for _, u := range []string{
		"",
		"github.com",
		"https://",
		"https:///path",
		"https://.",
		"https:github.com",
		"https://git%68ub.com/",
		"https://a b.com/",
		`https://evil.com\@github.com/`,
		"https://github.com:99999/",
		"https://github.com:0/",
		"https://xn--/",
	} {
		if got, err := ParseTarget(u); err == nil {
			t.Errorf("ParseTarget(%q) = %+v, want an error", u, got)
		}
	}
}

func TestParseURLPatternErrors(t *testing.T) {
	tests := []struct{ pattern, want string }{
		{"github.com", "want SCHEME://HOST"},
		{"https//github.com", "want SCHEME://HOST"},
		{"://github.com", "no scheme"},
		{"ht tp://x", "is not a scheme"},
		{"https://", "no host"},
		{"https:///x", "no host"},
		{"https://user@github.com/*", "userinfo"},
		{"https://github.com/#x", "fragment"},
		{"https://github.com:", "empty port"},
		{"https://github.com:http", "port"},
		{"https://github.com:70000", "port"},
		{"https://[::1", "unclosed"},
		{"https://[::1]x", "after the IPv6 host"},
		{"https://[nope]/", "not an IPv6 address"},
		{"https://::1/", "must be in brackets"},
		{"https://a..b/", "empty label"},
		{"https://github.com/%zz", "path"},
	}
	for _, tt := range tests {
		_, err := ParseURLPattern(tt.pattern)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseURLPattern(%q) = %v, want error containing %q", tt.pattern, err, tt.want)
		}
	}
}

func TestURLPatternMatch(t *testing.T) {
	tests := []struct {
		pattern, url string
		want         bool
	}{
		// Scheme.
		{"http://*", "http://example.com/mcp", true},
		{"http://*", "http://example.com:8080/mcp", true},
		{"http://*", "HTTP://EXAMPLE.COM/", true},
		{"http://*", "http://127.0.0.1:1234/", true},
		{"http://*", "http://[::1]:1234/", true},
		{"http://*", "https://example.com/", false},
		{"HTTP://*", "http://example.com/", true},
		{"*://*", "https://example.com/", true},
		{"*://github.com", "http://github.com/x", true},

		// The host is the parsed host, never something in the path or userinfo.
		{"https://github.com/*", "https://github.com/x", true},
		{"https://github.com/*", "https://github.com", true},
		{"https://github.com/*", "https://evil.com/https://github.com/x", false},
		{"https://github.com/*", "https://github.com@evil.com/", false},
		{"https://github.com/*", "https://github.com:x@evil.com/", false},
		{"https://github.com/*", "https://evil.com#@github.com/", false},
		{"https://github.com/*", "https://evil.com?@github.com/", false},
		{"https://github.com/*", "https://github.com.evil.com/", false},
		{"https://github.com/*", "https://evilgithub.com/", false},
		{"https://github.com/*", "https://user:pw@github.com/mcp", true},
		// Case, trailing dots, IDNA compatibility forms.
		{"https://github.com/*", "https://GITHUB.COM/x", true},
		{"https://github.com/*", "https://github.com./x", true},
		{"https://GitHub.com./*", "https://github.com/x", true},
		{"https://github.com/*", "https://ｇｉｔｈｕｂ.com/x", true},
		{"https://bücher.example/*", "https://xn--bcher-kva.example/", true},
		{"https://xn--bcher-kva.example/*", "https://BÜCHER.example/", true},
		// Ports: none in the pattern means any; a number means exactly it.
		{"https://github.com/*", "https://github.com:8443/x", true},
		{"https://github.com:443/*", "https://github.com/x", true},
		{"https://github.com:443/*", "https://github.com:0443/x", true},
		{"https://github.com:443/*", "https://github.com:8443/x", false},
		{"https://github.com:*/*", "https://github.com:8443/x", true},
		{"http://localhost:8080", "http://localhost:8080/mcp", true},
		{"http://localhost:8080", "http://localhost:8081/mcp", false},
		{"http://localhost:80", "http://localhost/mcp", true},
		// IPv6 and IPv4.
		{"http://[::1]:*/*", "http://[::1]:9000/mcp", true},
		{"http://[::1]/*", "http://[0:0:0:0:0:0:0:1]/mcp", true},
		{"http://[::1]/*", "http://127.0.0.1/mcp", false},
		{"http://127.0.0.1/*", "http://[::ffff:127.0.0.1]/mcp", true},
		{"http://127.0.0.1/*", "http://127.0.0.1./mcp", true},
		{"http://10.0.0.*/*", "http://10.0.0.7/mcp", true},
		{"http://10.0.0.*/*", "http://10.0.1.7/mcp", false},
		{"https://example.com/*", "https://[::1]/", false},
		// Host wildcards: a leading "*." is one or more labels; other
		// wildcards stay inside their label.
		{"https://*.example.com/*", "https://api.example.com/mcp", true},
		{"https://*.example.com/*", "https://a.b.example.com/mcp", true},
		{"https://*.example.com/*", "https://example.com/mcp", false},
		{"https://*.example.com/*", "https://evilexample.com/mcp", false},
		{"https://*.example.com/*", "https://example.com.evil.com/", false},
		{"https://*.example.com/*", "https://x.example.com@evil.com/", false},
		{"https://api-*.example.com/*", "https://api-eu.example.com/", true},
		{"https://api-*.example.com/*", "https://api-eu.evil.example.com/", false},
		{"https://github.com*/*", "https://github.com.evil.com/", false},
		{"https://github.co?/*", "https://github.com/", true},
		{"https://*/*", "https://anything.at.all/", true},
		// Paths: decoded, dot segments resolved, '\' as '/'.
		{"https://github.com/myorg/*", "https://github.com/myorg/mcp", true},
		{"https://github.com/myorg/*", "https://github.com/myorg/../other/mcp", false},
		{"https://github.com/myorg/*", "https://github.com/myorg/%2e%2e/other/mcp", false},
		{"https://github.com/myorg/*", `https://github.com/myorg/..\other/mcp`, false},
		{"https://github.com/myorg/*", "https://github.com/other/mcp?x=/myorg/", false},
		{"https://github.com/myorg/*", "https://github.com/other/mcp#/myorg/", false},
		{"https://host/admin/*", "https://host/%61dmin/x", true},
		{"https://host/admin/*", "https://host/x/../admin/y", true},
		{"https://host/my%20dir/*", "https://host/my dir/x", true},
		{"https://host/mcp", "https://host/mcp", true},
		{"https://host/mcp", "https://host/mcp/", false},
		{"https://host/mcp", "https://host/mcp/x", false},
	}
	for _, tt := range tests {
		p, err := ParseURLPattern(tt.pattern)
		if err != nil {
			t.Errorf("ParseURLPattern(%q): %v", tt.pattern, err)
			continue
		}
		tg, err := ParseTarget(tt.url)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", tt.url, err)
			continue
		}
		if got := p.Match(tg); got != tt.want {
			t.Errorf("%q matches %q (%+v) = %v, want %v", tt.pattern, tt.url, tg, got, tt.want)
		}
	}
}

// FuzzURLPatternMatch checks that matching never panics and that a
// pattern naming a host never matches a URL whose parsed host differs.
func FuzzURLPatternMatch(f *testing.F) {
	for _, u := range []string{"https://github.com/x", "https://github.com@evil.com/", "https://evil.com/https://github.com/", "http://[::1]:80/", "https://ｇｉｔｈｕｂ.com/"} {
		f.Add(u)
	}
	p, err := ParseURLPattern("https://github.com/*")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tg, err := ParseTarget(raw)
		if err != nil {
			return
		}
		if p.Match(tg) && (tg.Host != "github.com" || tg.Scheme != "https") {
			t.Fatalf("%q matched https://github.com/* with target %+v", raw, tg)
		}
	})
}
