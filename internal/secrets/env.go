package secrets

import (
	"sort"
	"strings"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/glob"
)

// StandardEnv are passed to every stdio server whatever its filter says.
var StandardEnv = []string{"PATH", "HOME", "USER", "SHELL", "TERM", "LANG", "TMPDIR", "XDG_RUNTIME_DIR"}

// sensitiveSuffixes mark names stripped in allow-list mode unless listed
// by exact name.
var sensitiveSuffixes = []string{"_TOKEN", "_KEY", "_SECRET", "_API_KEY", "_PASSWORD", "_CREDENTIALS"}

// EnvFilter chooses what of the gateway's own environment a stdio server
// inherits.
//
//   - Neither list set (the default): only StandardEnv.
//   - Allow set (globs): StandardEnv plus matching names, except names with a
//     sensitive suffix (_TOKEN, _KEY, ...) unless listed by exact name. Allow
//     wins when both are set.
//   - Only Deny set (globs): everything except matching names.
//
// The server's own env block is added after filtering and always wins.
type EnvFilter struct {
	Allow []string
	Deny  []string
}

// Validate checks the globs.
func (f EnvFilter) Validate() error {
	for _, p := range append(append([]string{}, f.Allow...), f.Deny...) {
		if err := glob.Validate(p); err != nil {
			return &globError{p}
		}
	}
	return nil
}

type globError struct{ p string }

func (e *globError) Error() string { return "bad glob pattern " + `"` + e.p + `"` }

// Apply filters parent (KEY=VALUE entries) and appends own. It returns the
// environment and the names it stripped (names only: never log values).
func (f EnvFilter) Apply(parent []string, own map[string]string) (env, stripped []string) {
	for _, kv := range parent {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if _, overridden := own[k]; overridden {
			continue
		}
		if f.pass(k) {
			env = append(env, kv)
		} else {
			stripped = append(stripped, k)
		}
	}
	keys := make([]string, 0, len(own))
	for k := range own {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+own[k])
	}
	sort.Strings(stripped)
	return env, stripped
}

func (f EnvFilter) pass(name string) bool {
	for _, s := range StandardEnv {
		if name == s {
			return true
		}
	}
	switch {
	case len(f.Allow) > 0:
		for _, a := range f.Allow {
			if a == name {
				return true
			}
		}
		if sensitive(name) {
			return false
		}
		return matchAny(f.Allow, name)
	case len(f.Deny) > 0:
		return !matchAny(f.Deny, name)
	default:
		return false
	}
}

func sensitive(name string) bool {
	u := strings.ToUpper(name)
	for _, s := range sensitiveSuffixes {
		if strings.HasSuffix(u, s) {
			return true
		}
	}
	return false
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if glob.Match(g, name) {
			return true
		}
	}
	return false
}

// sensitiveWords mark a variable of the gateway's own environment as a
// secret for redaction, wherever they appear in its name.
var sensitiveWords = []string{"TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION", "WEBHOOK", "PRIVATE", "SIGNATURE"}

// sensitiveParts mark it when they are a whole part of its name (split at
// '_', '-' and '.'): "PAT" in GH_PAT but not in PATH.
var sensitiveParts = []string{"PAT", "PASS", "PW", "DSN", "SIG", "APIKEY", "CREDS", "BEARER", "JWT"}

// ConfigValues lists the values a config makes secret. Every value that
// came from a credential source is one, whatever its name or length: .env
// values, servers' env entries and headers (and the credential word of
// "Bearer xyz"), and the userinfo and query values of servers' URLs. Of
// the gateway's own environment (which env_allow may pass on to a server),
// the values whose names look like credentials (TOKEN, KEY, PASSWORD, a
// _PAT part...), whose values look like one (long and mixed, as keys and
// tokens are), and the credential parts of URL values. Redactor applies the
// matching rules (whole tokens for short values, none for "true" or "1").
func ConfigValues(cfg *config.Config, environ []string) []string {
	var out []string
	addAll := func(v string) {
		out = append(out, v)
		out = append(out, URLSecrets(v)...)
	}
	for k, v := range cfg.DotEnv {
		if k == TokensFileVar {
			continue // where the tokens are, not a token: it is logged
		}
		addAll(v)
	}
	for _, s := range cfg.Servers {
		// A server disabled for a variable that is not set keeps its
		// values unexpanded: "$GITHUB_TOKEN" names the missing variable,
		// and masking it would hide that from the warning that says so.
		named := func(v string) bool { return s.DisabledReason != "" && strings.Contains(v, "$") }
		for _, v := range s.Env {
			if !named(v) {
				addAll(v)
			}
		}
		// Variables substituted into url, command and args follow the rule
		// of the gateway's own environment, where they come from.
		for k, v := range s.Vars {
			if sensitiveName(k) || secretLooking(v) {
				addAll(v)
			} else {
				out = append(out, URLSecrets(v)...)
			}
		}
		for _, v := range s.Headers {
			if named(v) {
				continue
			}
			addAll(v)
			// "Bearer xyz": the credential is the last word.
			if f := strings.Fields(v); len(f) > 1 {
				out = append(out, f[len(f)-1])
			}
		}
		out = append(out, URLSecrets(s.URL)...)
		if s.OAuth != nil && s.OAuth.ClientSecret != "" && !named(s.OAuth.ClientSecret) {
			addAll(s.OAuth.ClientSecret)
		}
	}
	if a := cfg.Auth; a != nil && a.OIDC != nil && a.OIDC.Introspection != nil {
		addAll(a.OIDC.Introspection.ClientSecret)
	}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case sensitiveName(k) || secretLooking(v):
			addAll(v)
		default:
			if u := URLSecrets(v); len(u) > 0 {
				out = append(out, v)
				out = append(out, u...)
			}
		}
	}
	return out
}

func sensitiveName(k string) bool {
	u := strings.ToUpper(k)
	for _, w := range sensitiveWords {
		if strings.Contains(u, w) {
			return true
		}
	}
	for _, part := range strings.FieldsFunc(u, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		for _, w := range sensitiveParts {
			if part == w {
				return true
			}
		}
	}
	return false
}

// secretLooking reports whether v looks like a key or token: at least 16
// characters without spaces, mixing letters and digits.
func secretLooking(v string) bool {
	if len(v) < 16 || strings.ContainsAny(v, " \t\n/") {
		return false
	}
	var letter, digit bool
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9':
			digit = true
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			letter = true
		}
	}
	return letter && digit
}
