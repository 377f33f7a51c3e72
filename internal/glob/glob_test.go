package glob

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true},
		{"", "a", false},
		{"*", "", true},
		{"*", "anything__at_all", true},
		{"github__delete_repo", "github__delete_repo", true},
		{"github__delete_repo", "github__delete_repos", false},
		{"github__delete_repo", "xgithub__delete_repo", false},
		{"*__delete_*", "github__delete_repo", true},
		{"*__delete_*", "github__delete_", true},
		{"*__delete_*", "github__undelete_repo", false},
		{"*__delete_*", "github__delete", false},
		{"*__drop_*", "db__drop_table", true},
		{"*delete*", "fs__delete", true},
		{"a*b*c", "aXXbYYc", true},
		{"a*b*c", "aXXbYYcd", false},
		{"a*b*c", "abc", true},
		{"a*a*a*a*b", strings.Repeat("a", 200), false},
		{"?", "é", true},
		{"??", "é", false},
		{"fs__read_?ile", "fs__read_file", true},
		{"[abc]", "a", false},
		{"[abc]", "[abc]", true},
		{`a\*`, `a\xyz`, true},
		{"*/x", "a/b/x", true},
		{"évil_*", "évil_1", true},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.s); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func TestSetFoldsCase(t *testing.T) {
	set := NewFoldedSet([]string{"*__DELETE_*", "evil_*"})
	for _, tt := range []struct {
		s    string
		want bool
	}{
		{"github__delete_repo", true},
		{"github__Delete_Repo", true},
		{"EVIL_server", true},
		{"good", false},
	} {
		if _, got := set.Match(tt.s); got != tt.want {
			t.Errorf("Set.Match(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
	if _, ok := Set(nil).Match("x"); ok {
		t.Error("empty set matched")
	}
}

// FuzzMatch checks Match against a dynamic-programming reference.
func FuzzMatch(f *testing.F) {
	f.Add("*__delete_*", "github__delete_repo")
	f.Add("a*?b", "axxb")
	f.Add("**************e0", "00000000e\xe3\xe3\xe3ccccc1e10e1")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if got, want := Match(pattern, s), reference(units(pattern), units(s)); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, s, got, want)
		}
	})
}

// units splits s into characters: whole runes, or single invalid bytes.
func units(s string) []string {
	var out []string
	for len(s) > 0 {
		_, n := utf8.DecodeRuneInString(s)
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func reference(p, s []string) bool {
	// ok[j] reports whether p[:i] matches s[:j], for the current i.
	ok := make([]bool, len(s)+1)
	ok[0] = true
	for _, c := range p {
		next := make([]bool, len(s)+1)
		for j := 0; j <= len(s); j++ {
			switch {
			case c == "*":
				next[j] = ok[j] || (j > 0 && next[j-1])
			case j > 0 && (c == "?" || c == s[j-1]):
				next[j] = ok[j-1]
			}
		}
		ok = next
	}
	return ok[len(s)]
}

func TestValidate(t *testing.T) {
	for p, ok := range map[string]bool{"GITHUB_*": true, "a?c": true, "*": true, "": false, "[ab]*": false, `a\*`: false, "x]": false} {
		if err := Validate(p); (err == nil) != ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}
