package poison

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// secretRE matches values that look like credentials: well-known token
// formats, private key headers, "key=value" assignments with a secret-ish
// key, and long mixed-alphabet tokens.
var secretRE = regexp.MustCompile(`(?i)` +
	`(?:\b(?:sk|pk|rk)[-_](?:live|test|proj|ant)?[-_]?[A-Za-z0-9_-]{8,}` +
	`|\bAKIA[0-9A-Z]{8,}` +
	`|\bgh[pousr]_[A-Za-z0-9]{8,}` +
	`|\bgithub_pat_[A-Za-z0-9_]{8,}` +
	`|\bxox[abposr]-[A-Za-z0-9-]{8,}` +
	`|\bAIza[0-9A-Za-z_-]{8,}` +
	`|\beyJ[A-Za-z0-9_-]{8,}(?:\.[A-Za-z0-9_-]*){0,2}` +
	`|-----BEGIN [A-Z ]*PRIVATE KEY-----[^-]*` +
	`|\b(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth|bearer|private[_-]?key|client[_-]?secret)\b["']?\s*[:=]\s*["']?[^\s"',;]{4,}` +
	`|\bbearer\s+[A-Za-z0-9._~+/-]{8,}=*` +
	`|\b[A-Za-z0-9+/_-]*[0-9][A-Za-z0-9+/_-]*[A-Za-z][A-Za-z0-9+/_-]{18,}` +
	`)`)

// maskSecrets keeps the first four characters of every secret-looking value
// (for a key=value pair: the key and four characters of the value) and
// replaces the rest with "****".
func maskSecrets(s string) string {
	return secretRE.ReplaceAllStringFunc(s, func(m string) string {
		if i := strings.IndexAny(m, ":="); i >= 0 && i < len(m)-1 && !strings.HasPrefix(m, "-----") {
			key, val := m[:i+1], strings.TrimLeft(m[i+1:], " \"'")
			sep := m[i+1 : len(m)-len(val)]
			return key + sep + keep(val, 2) + "****"
		}
		if !looksSecret(m) {
			return m
		}
		return keep(m, 4) + "****"
	})
}

// looksSecret filters the generic long-token alternative: paths, URLs and
// words joined by separators are not secrets; a token with digits, upper
// and lower case letters is.
func looksSecret(m string) bool {
	if strings.HasPrefix(m, "-----") || strings.HasPrefix(strings.ToLower(m), "bearer") {
		return true
	}
	for _, p := range []string{"sk-", "sk_", "pk_", "pk-", "rk_", "AKIA", "gh", "github_pat_", "xox", "AIza", "eyJ"} {
		if strings.HasPrefix(m, p) && len(m) >= 12 {
			return true
		}
	}
	var up, lo, dig int
	for _, c := range m {
		switch {
		case c >= 'A' && c <= 'Z':
			up++
		case c >= 'a' && c <= 'z':
			lo++
		case c >= '0' && c <= '9':
			dig++
		}
	}
	return up > 0 && lo > 0 && dig >= 2 && len(m) >= 20
}

func keep(s string, n int) string {
	i := 0
	for k := 0; k < n && i < len(s); k++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

// excerpt returns at most MaxContext runes of text around [lo, hi), with
// whitespace collapsed and secrets masked. When the match itself is longer
// than MaxContext its beginning is kept.
func excerpt(text string, lo, hi int) string {
	lo = max(0, min(lo, len(text)))
	hi = max(lo, min(hi, len(text)))
	for lo > 0 && !utf8.RuneStart(text[lo]) {
		lo--
	}
	for hi < len(text) && !utf8.RuneStart(text[hi]) {
		hi++
	}
	// Take a generous window (in runes) around the match, mask secrets in
	// it, then cut it down to MaxContext runes.
	const pad = 40
	a, b := lo, hi
	for k := 0; k < pad && a > 0; k++ {
		_, size := utf8.DecodeLastRuneInString(text[:a])
		a -= size
	}
	for k := 0; k < pad && b < len(text); k++ {
		_, size := utf8.DecodeRuneInString(text[b:])
		b += size
	}
	// Widen to whole tokens so that a secret cut by the window is still
	// recognised and masked.
	for k := 0; k < 256 && a > 0 && !isSpace(text[a-1]); k++ {
		a--
	}
	for k := 0; k < 256 && b < len(text) && !isSpace(text[b]); k++ {
		b++
	}
	for a > 0 && !utf8.RuneStart(text[a]) {
		a--
	}
	for b < len(text) && !utf8.RuneStart(text[b]) {
		b++
	}
	before := collapse(text[a:lo])
	match := collapse(text[lo:hi])
	after := collapse(text[hi:b])
	full := maskSecrets(before + match + after)
	// Positions of the match in the masked string are approximate when a
	// mask crosses the boundary; rune counts keep us within MaxContext.
	rb := []rune(full)
	mStart := utf8.RuneCountInString(maskSecrets(before))
	mLen := utf8.RuneCountInString(match)
	mStart = min(mStart, len(rb))
	if mLen >= MaxContext {
		end := min(len(rb), mStart+MaxContext)
		return strings.TrimSpace(string(rb[mStart:end]))
	}
	extra := MaxContext - mLen
	s := max(0, mStart-extra/2)
	e := min(len(rb), s+MaxContext)
	s = max(0, e-MaxContext)
	return strings.TrimSpace(string(rb[s:e]))
}

func collapse(s string) string {
	if !strings.ContainsAny(s, "\n\t\r  ") {
		return s
	}
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == ' ' || r == '\n' || r == '\t' || r == '\r' {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }
