package main

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/toolgate/toolgate/internal/poison"
)

// auditText is one text the rule audit matches against, with where it
// came from.
type auditText struct {
	low string
	dev bool // a development row (the rules were written against these)
}

// ruleAudit lists, for every branch of every alternation inside each
// built-in rule's expression, the texts on which removing that branch
// changes whether the expression matches (a whole-text match on the
// lower-cased text: an approximation of the per-sentence scan, good enough
// to find vocabulary nobody uses). It prints the branches that match no text
// at all and those that only one or two development rows need.
func ruleAudit(texts []auditText) {
	dead, unused, oneRow, total := 0, 0, 0, 0
	for _, rp := range poison.BuiltinRulePatterns() {
		name, src := rp[0], rp[1]
		orig, err := syntax.Parse(src, syntax.Perl)
		if err != nil {
			fmt.Printf("%s: %v\n", name, err)
			continue
		}
		base := regexp.MustCompile(src)
		matched := make([]bool, len(texts))
		for i, t := range texts {
			matched[i] = base.MatchString(t.low)
		}
		for _, br := range branches(orig) {
			total++
			alt, k := br.alt, br.k
			saved := alt.Sub
			alt.Sub = append(append([]*syntax.Regexp{}, saved[:k]...), saved[k+1:]...)
			without, err := regexp.Compile(orig.String())
			label := saved[k].String()
			context := alt.String()
			alt.Sub = saved
			if err != nil {
				continue
			}
			var devOnly, other int
			for i, t := range texts {
				if matched[i] && !without.MatchString(t.low) {
					if t.dev {
						devOnly++
					} else {
						other++
					}
				}
			}
			switch {
			case devOnly == 0 && other == 0:
				unused++
				if !anyMatch(saved[k], texts) {
					dead++
				}
			case other == 0 && devOnly <= 2:
				oneRow++
				fmt.Printf("  %-22s %q (in %s) needed by %d dev row(s) only\n", name, clip(label, 40), clip(context, 60), devOnly)
			}
		}
	}
	fmt.Printf("rule audit: %d alternation branches (after the parser factors common prefixes); %d change no verdict when removed, %d of them match no text at all; %d are needed by one or two development rows and by no other text\n", total, unused, dead, oneRow)
}

type branch struct {
	alt *syntax.Regexp
	k   int
}

// branches returns every branch of every alternation in re.
func branches(re *syntax.Regexp) []branch {
	var out []branch
	var walk func(r *syntax.Regexp)
	walk = func(r *syntax.Regexp) {
		if r.Op == syntax.OpAlternate {
			for k := range r.Sub {
				out = append(out, branch{r, k})
			}
		}
		for _, s := range r.Sub {
			walk(s)
		}
	}
	walk(re)
	return out
}

// anyMatch reports whether the branch on its own matches any text.
func anyMatch(br *syntax.Regexp, texts []auditText) bool {
	re, err := regexp.Compile(br.String())
	if err != nil {
		return true
	}
	for _, t := range texts {
		if re.MatchString(t.low) {
			return true
		}
	}
	return false
}

// lower is the rules' view of a text (they are written in lower case).
func lower(s string) string { return strings.ToLower(s) }
