package secrets

import (
	"net/url"
	"regexp"
	"strings"
)

// urlRE finds URLs in free text (error messages, log lines).
var urlRE = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>` + "`" + `]+`)

// StripURL returns raw without credentials: no userinfo, and every query
// value replaced by the mask (the names stay, they say what was sent).
// Text that does not parse as a URL with a host is returned unchanged.
func StripURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	if u.User == nil && u.RawQuery == "" {
		return raw
	}
	u.User = nil
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=" + Mask
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	return u.String()
}

// StripURLs applies StripURL to every URL in text.
func StripURLs(text string) string {
	if !strings.Contains(text, "://") {
		return text
	}
	return urlRE.ReplaceAllStringFunc(text, StripURL)
}

// URLSecrets are the credential parts of a URL: the user name and password
// of its userinfo and its query values, each as written and decoded. A
// value that is not a URL has none.
func URLSecrets(raw string) []string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return nil
	}
	var out []string
	add := func(enc, dec string) {
		out = append(out, dec)
		if enc != dec {
			out = append(out, enc)
		}
	}
	if u.User != nil {
		add(url.PathEscape(u.User.Username()), u.User.Username())
		if p, ok := u.User.Password(); ok {
			add(url.PathEscape(p), p)
		}
	}
	for _, p := range strings.Split(u.RawQuery, "&") {
		_, v, ok := strings.Cut(p, "=")
		if !ok || v == "" {
			continue
		}
		dec, err := url.QueryUnescape(v)
		if err != nil {
			dec = v
		}
		add(v, dec)
	}
	return out
}
