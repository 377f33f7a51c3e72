package poison

import (
	"fmt"
	"path/filepath"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
)

// ruleExample is a malicious text some built-in rule should fire on.
type ruleExample struct {
	text string
	kind Kind
}

// ruleExamples gathers the malicious texts written for this repository:
// the probes and held-out fixtures of testdata, the authored rows of
// bench/poisoning and testdata/rule_examples.jsonl (one example for each
// rule the others leave out).
func ruleExamples(t *testing.T) []ruleExample {
	t.Helper()
	var out []ruleExample
	read := func(path string, kind Kind) {
		for _, r := range jsonLines[struct {
			Text      string `json:"text"`
			Label     string `json:"label"`
			Malicious *bool  `json:"malicious"`
			Kind      string `json:"kind"`
			Role      string `json:"role"`
		}](t, path) {
			mal := r.Label == "malicious" || r.Role == "attack" || (r.Malicious != nil && *r.Malicious)
			if r.Label == "" && r.Malicious == nil && r.Role == "" {
				mal = true // held-out fixtures hold attacks only
			}
			k := kind
			switch r.Kind {
			case "definition":
				k = KindDefinition
			case "output":
				k = KindOutput
			}
			if mal {
				out = append(out, ruleExample{r.Text, k})
			}
		}
	}
	read("testdata/probes_definitions.jsonl", KindDefinition)
	read("testdata/heldout_definitions.jsonl", KindDefinition)
	read("testdata/probes_outputs.jsonl", KindOutput)
	read("testdata/heldout_injections.jsonl", KindOutput)
	read("testdata/rule_examples.jsonl", KindDefinition)
	for _, name := range []string{"authored_defs.jsonl", "authored2_defs.jsonl"} {
		read(filepath.Join("..", "..", "bench", "poisoning", name), KindDefinition)
	}
	for _, name := range []string{"authored_outputs.jsonl", "authored2_outputs.jsonl"} {
		read(filepath.Join("..", "..", "bench", "poisoning", name), KindOutput)
	}
	return out
}

// TestEveryRuleMatchesAnExample: each built-in rule finds something in at
// least one malicious text written for this repository. A rule that matches
// none of them is vocabulary nobody can show a use for.
func TestEveryRuleMatchesAnExample(t *testing.T) {
	d := newDet(t, Config{})
	hits := map[string]int{}
	for _, ex := range ruleExamples(t) {
		var v Verdict
		if ex.kind == KindOutput {
			v = d.ScanOutput(ex.text)
		} else {
			v = d.ScanDefinition("", ex.text, nil)
		}
		for _, f := range v.Findings {
			hits[f.Rule]++
		}
	}
	var none []string
	for _, r := range builtinRules {
		if hits[r.name] == 0 && !slices.Contains(none, r.name) {
			none = append(none, r.name)
		}
	}
	if len(none) > 0 {
		t.Errorf("built-in rules matching no example: %s", strings.Join(none, ", "))
	}
}

// TestPrefilterIsExact: with the literal prefilter, every rule finds
// exactly what it finds without it, on every malicious text written for the
// repository and on benign outputs of several kinds.
func TestPrefilterIsExact(t *testing.T) {
	d := newDet(t, Config{})
	var texts []ruleExample
	texts = append(texts, ruleExamples(t)...)
	for _, o := range benignOutputs(t, 12) {
		texts = append(texts, ruleExample{o, KindOutput}, ruleExample{o, KindDefinition})
	}
	scan := func(ex ruleExample) string {
		if ex.kind == KindOutput {
			return fmt.Sprint(d.ScanOutput(ex.text))
		}
		return fmt.Sprint(d.ScanDefinition("", ex.text, nil))
	}
	skipped := 0
	for _, ex := range texts {
		with := scan(ex)
		noPrefilter = true
		without := scan(ex)
		noPrefilter = false
		if with != without {
			t.Errorf("prefilter changes the verdict on %q:\nwith    %s\nwithout %s", ex.text, with, without)
		}
		low := asciiLower(ex.text)
		for _, r := range d.rules {
			if !r.mayMatch(low) {
				skipped++
			}
		}
	}
	if skipped == 0 {
		t.Error("the prefilter never skipped a rule")
	}
	for _, r := range builtinRules {
		if r.pre.literalSets(r) == nil {
			t.Logf("rule %s has no required literals (always runs)", r.name)
		}
	}
}

// TestSegIndex: a segment is a candidate exactly when it holds one of the
// rule's literals; an occurrence across a segment boundary or between
// segments marks none, and segments out of order are searched one by one.
func TestSegIndex(t *testing.T) {
	r := &rule{name: "t", re: re(`\b(?:ignore|disregard) (?:previous|prior) rules`)}
	doc := parseDocument("Please ignore\nprevious rules here. Now disregard prior rules! Ignore it.\n\nprior rules\n```\n\tignore prior rules\n  ignore it\n```")
	low := asciiLower(doc.text)
	want := func(x *segIndex) []bool {
		out := make([]bool, len(x.segs))
		for i, s := range x.segs {
			out[i] = true
			for _, set := range r.pre.literalSets(r) {
				holds := false
				for _, l := range set {
					holds = holds || strings.Contains(s.text, l)
				}
				out[i] = out[i] && holds
			}
		}
		return out
	}
	x := newSegIndex(low, doc.segs)
	if !x.ordered {
		t.Fatal("parseDocument's segments not seen as ordered")
	}
	got := x.candidates(r)
	if fmt.Sprint(got) != fmt.Sprint(want(x)) {
		t.Errorf("candidates %v, want %v (segments %+v)", got, want(x), doc.segs)
	}
	if !slices.Contains(got, false) || !slices.Contains(got, true) {
		t.Errorf("candidates %v: want some segments skipped and some kept", got)
	}
	// Reversed segments: the fallback gives the same marks.
	rev := slices.Clone(doc.segs)
	slices.Reverse(rev)
	y := newSegIndex(low, rev)
	if y.ordered {
		t.Fatal("reversed segments seen as ordered")
	}
	if got := y.candidates(r); fmt.Sprint(got) != fmt.Sprint(want(y)) {
		t.Errorf("fallback candidates %v, want %v", got, want(y))
	}
	// A literal spanning two segments ("ignore\nprevious") marks neither.
	z := newSegIndex("ab cd", []segment{{text: "ab", start: 0}, {text: "cd", start: 3}})
	if got := z.holding("b c"); len(got) != 0 {
		t.Errorf("literal across a boundary marked segments %v", got)
	}
	if got := z.holding("cd"); fmt.Sprint(got) != "[1]" {
		t.Errorf("holding(cd) = %v, want [1]", got)
	}
}

// TestLitScanner: the one-pass scanner finds every occurrence, overlapping
// and nested ones included, that searching for each literal finds; and on
// real documents it marks the same segments as searching each segment.
func TestLitScanner(t *testing.T) {
	lits := []string{"he", "she", "his", "hers", "e", "ushers", "“quoted”", "a\nb"}
	sc := newLitScanner(append(lits, "he", ""))
	for _, text := range []string{"ushers", "ahishers", "sheshe", "", "xyz", "“quoted” a\nb hhe", "hehehe"} {
		var got, want []string
		sc.scan(text, func(id, end int) { got = append(got, fmt.Sprint(lits[id], "@", end)) })
		for end := 1; end <= len(text); end++ {
			for _, l := range lits {
				if strings.HasSuffix(text[:end], l) {
					want = append(want, fmt.Sprint(l, "@", end))
				}
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("scan(%q) = %q, want %q", text, got, want)
		}
	}

	var texts []string
	for _, ex := range ruleExamples(t) {
		texts = append(texts, ex.text)
	}
	texts = append(texts, benignOutputs(t, 12)...)
	sc = builtinLiterals()
	for _, text := range texts {
		doc := parseDocument(text)
		x := newSegIndex(asciiLower(text), doc.segs)
		if !x.ordered {
			t.Fatalf("segments of %q not ordered", text)
		}
		for lit := range sc.ids {
			var want []int
			for i, s := range doc.segs {
				if strings.Contains(s.text, lit) {
					want = append(want, i)
				}
			}
			if got := x.holding(lit); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("segments holding %q in %q: %v, want %v", lit, text, got, want)
			}
		}
	}
}

// TestMatchNeeds: a match is never shorter than minLen says, and holds a
// non-ASCII byte when needsNonASCII says so, invalid UTF-8 (read as U+FFFD)
// included; the structural rules get the gates that spare most segments.
func TestMatchNeeds(t *testing.T) {
	patterns := []string{`[\x{80}-\x{10FFFF}]{2}`, `\x{FFFD}x`, `[\p{Cyrillic}\p{Greek}]`, `é|e`, `(?:ab){3,}c?`, `[^a-z]{3}`, `(?i)kk`}
	texts := []string{"\xff\xfe", "\xffx", "a\xd0\xb0b", "e", "ababab", "\xff\xff\xff", "\u212a\u212a", "é", "kK"}
	for _, p := range patterns {
		parsed, err := syntax.Parse(p, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		parsed = parsed.Simplify()
		n, na := minLen(parsed), needsNonASCII(parsed)
		rx := regexp.MustCompile(p)
		for _, text := range texts {
			loc := rx.FindStringIndex(text)
			if loc == nil {
				continue
			}
			m := text[loc[0]:loc[1]]
			if len(m) < n {
				t.Errorf("%s matches %q (%d bytes) but minLen is %d", p, m, len(m), n)
			}
			if na && !slices.ContainsFunc([]byte(m), func(b byte) bool { return b >= 0x80 }) {
				t.Errorf("%s matches ASCII %q but needsNonASCII", p, m)
			}
		}
	}
	gates := map[string]func(p *prefilter) bool{
		"homoglyph":   func(p *prefilter) bool { return p.nonASCII },
		"base64_blob": func(p *prefilter) bool { return p.minLen >= 100 },
		"hex_blob":    func(p *prefilter) bool { return p.minLen >= 64 },
	}
	for _, r := range builtinRules {
		if gate, ok := gates[r.name]; ok {
			r.pre.literalSets(r)
			if !gate(&r.pre) {
				t.Errorf("rule %s: minLen %d, nonASCII %v", r.name, r.pre.minLen, r.pre.nonASCII)
			}
		}
	}
}

// codeLineRE is what looksLikeCode tested before it was split in two.
var codeLineRE = regexp.MustCompile(`^(#include|import |from \S+ import|def |class |return\b|var |let |const |func |package |public |private |static |if \(|for \(|while \(|} ?else|//|/\*|\*/|#!|@\w+\(|print\(|console\.)|[;{}]\s*$|^[\w.\[\]]+\s*(=|\+=|-=)\s*\S|^\s*[})\]]`)

// TestTextScannersMatchRegexps: looksLikeCode and words give what the
// regular expressions they replace give, on every fixture line and on
// edge cases (trailing whitespace, invalid UTF-8, digits, apostrophes).
func TestTextScannersMatchRegexps(t *testing.T) {
	lines := []string{"", " ", "x = 1", "a;", "a; \t", "a;\v", "}", "  }", "{ \n", "foo(bar) {", "return", "returned", "if (x)",
		"l'été 3x don't '' 'quoted'", "a\xffb\xc3", "Ünïcödé wörds²³ ½", "x1 1x _a", "  )", "\t]x", "\v}", "x += 1", "@dec(", "Import x", "*/", "#!/bin/sh", "\xe2\x80\x99smart’quote"}
	for _, ex := range ruleExamples(t) {
		lines = append(lines, strings.Split(ex.text, "\n")...)
	}
	for _, o := range benignOutputs(t, 12) {
		lines = append(lines, strings.Split(o, "\n")...)
	}
	for _, l := range lines {
		for _, s := range []string{l, strings.TrimSpace(l)} {
			old := codeLineRE.MatchString(s) || func() bool {
				sym := 0
				for _, c := range s {
					switch c {
					case '(', ')', '[', ']', '{', '}', '=', ';', '<', '>', '_':
						sym++
					}
				}
				return sym*8 > len(s) && len(s) > 8
			}()
			if got := looksLikeCode(s); got != old {
				t.Errorf("looksLikeCode(%q) = %v, the expression says %v", s, got, old)
			}
			if got, want := words(s), wordRE.FindAllString(s, -1); !slices.Equal(got, want) {
				t.Errorf("words(%q) = %q, want %q", s, got, want)
			}
		}
	}
}
