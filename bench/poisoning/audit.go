package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/poison"
)

// auditText is one text the rule audit matches against, with where it
// came from.
type auditText struct {
	low string
	dev bool // a development row (the rules were written against these)
}

// ruleAudit lists, for every branch of the rule files (a line of an
// expression, with the groups it opens), the texts on which leaving that
// branch out changes whether a rule's expression matches (a whole-text
// match on the lower-cased text: an approximation of the per-sentence scan,
// good enough to find vocabulary nobody uses). It prints the branches that
// match no text at all and those that only one or two development rows
// need, with their file and line.
func ruleAudit(texts []auditText) {
	brs, err := poison.BuiltinRuleBranches()
	if err != nil {
		fmt.Println(err)
		return
	}
	base := map[string]*regexp.Regexp{}
	matched := map[string][]bool{}
	for _, rp := range poison.BuiltinRulePatterns() {
		rx := regexp.MustCompile(rp[1])
		base[rp[0]] = rx
		m := make([]bool, len(texts))
		for i, t := range texts {
			m[i] = rx.MatchString(t.low)
		}
		matched[rp[0]] = m
	}
	dead, unused, low, checkOnly := 0, 0, 0, 0
	for _, b := range brs {
		if len(b.Without) == 0 {
			checkOnly++
			continue
		}
		lost := make([]bool, len(texts))
		var rules []string
		for name, src := range b.Without {
			rules = append(rules, name)
			without := regexp.MustCompile(src)
			for i, t := range texts {
				if matched[name][i] && !lost[i] && !without.MatchString(t.low) {
					lost[i] = true
				}
			}
		}
		slices.Sort(rules)
		var devOnly, other int
		for i, l := range lost {
			switch {
			case !l:
			case texts[i].dev:
				devOnly++
			default:
				other++
			}
		}
		switch {
		case devOnly == 0 && other == 0:
			unused++
			if !anyMatch(b.Alone, texts) {
				dead++
				fmt.Printf("  %-24s %-40s %q matches no text\n", b.At, clip(strings.Join(rules, ","), 40), clip(b.Text, 60))
			}
		case other == 0 && devOnly <= 2:
			low++
			fmt.Printf("  %-24s %-40s %q needed by %d dev row(s) only\n", b.At, clip(strings.Join(rules, ","), 40), clip(b.Text, 60), devOnly)
		}
	}
	fmt.Printf("rule audit: %d branches in the rule files (%d more only Go checks use); %d change no verdict when left out, %d of them match no text at all; %d are needed by one or two development rows and by no other text\n", len(brs)-checkOnly, checkOnly, unused, dead, low)
}

// anyMatch reports whether the branch on its own matches any text.
func anyMatch(src string, texts []auditText) bool {
	re, err := regexp.Compile(src)
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
