// Package glob is toolgate's one glob dialect, for every pattern in the
// config (env_allow/env_deny, the built-in extensions' name patterns): '*' matches any run of characters (including
// none) and '?' matches exactly one character; every other character,
// including '[', '\\' and '/', matches only itself. Patterns are anchored at
// both ends. There are no escapes and no character classes, so a pattern
// means what it looks like.
package glob

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Match reports whether s matches pattern. It runs in O(len(pattern) ×
// len(s)) time at worst, with no backtracking blow-up.
func Match(pattern, s string) bool {
	// Classic greedy match with a single backtrack point for the last '*':
	// correct for patterns made of literals, '?' and '*'.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		if p < len(pattern) {
			switch pattern[p] {
			case '*':
				star, mark = p, i
				p++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[i:])
				p++
				i += n
				continue
			default:
				_, n := utf8.DecodeRuneInString(pattern[p:])
				if i+n <= len(s) && pattern[p:p+n] == s[i:i+n] {
					p += n
					i += n
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		// Let the last '*' swallow one more character and retry.
		_, n := utf8.DecodeRuneInString(s[mark:])
		mark += n
		p, i = star+1, mark
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// HasWildcard reports whether pattern contains '*' or '?'.
func HasWildcard(pattern string) bool {
	return strings.ContainsAny(pattern, "*?")
}

// Set is a list of patterns matched case-insensitively, for deny lists:
// "*__delete_*" also catches "repo__Delete_Branch".
type Set []string

// NewFoldedSet lower-cases every pattern once.
func NewFoldedSet(patterns []string) Set {
	s := make(Set, len(patterns))
	for i, p := range patterns {
		s[i] = strings.ToLower(p)
	}
	return s
}

// Match returns the first pattern that matches s ignoring case, and whether
// one did.
func (set Set) Match(s string) (string, bool) {
	if len(set) == 0 {
		return "", false
	}
	s = strings.ToLower(s)
	for _, p := range set {
		if Match(p, s) {
			return p, true
		}
	}
	return "", false
}

// Validate rejects a pattern that is empty or that uses the syntax of
// other glob dialects (character classes, escapes): in this one, '[' and
// '\\' would match only themselves, which is never what such a pattern
// means where names cannot hold them (environment variables, tool names).
func Validate(pattern string) error {
	switch {
	case pattern == "":
		return errors.New("empty pattern")
	case strings.ContainsAny(pattern, `[]\`):
		return fmt.Errorf("pattern %q: only '*' and '?' are wildcards; character classes and escapes are not supported", pattern)
	}
	return nil
}
