package main

import (
	"cmp"
	"fmt"
	"maps"
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

// rulePrecision counts, for every rule, the authored documents its findings
// flag on their own (severity medium or above, the default threshold):
// attacks and honest rows, and on how many writers' batches each. The
// writers wrote their honest rows in the attacks' vocabulary, so a rule
// that flags as many of them as attacks is vocabulary, not evidence. With
// verbose, each row a rule flags is listed with its context.
func rulePrecision(cfg map[string]poison.Config, paths []string, verbose bool) {
	type tally struct {
		tp, fp         int
		tpSrcs, fpSrcs map[string]bool
	}
	defDet, outDet := build(cfg, poison.Options{}), buildOut(cfg, poison.Options{})
	per := map[string]*tally{}
	var attacks, honest int
	for _, path := range paths {
		rows := mustLoad(path)
		if len(rows) == 0 {
			continue
		}
		source, outputs := rows[0].Source, rows[0].Role != ""
		docs := compose(rows, source)
		scan := outDet.ScanOutput
		if !outputs {
			docs = defDocs(nil, rows)
			scan = func(s string) poison.Verdict { return defDet.ScanDefinition("", s, nil) }
		}
		for _, d := range docs {
			if d.malicious {
				attacks++
			} else {
				honest++
			}
			seen := map[string]bool{}
			for _, f := range scan(d.text).Findings {
				if f.Detector != "rule" || seen[f.Rule] || !slices.Contains([]string{"medium", "high", "critical"}, f.Severity) {
					continue
				}
				seen[f.Rule] = true
				t := per[f.Rule]
				if t == nil {
					t = &tally{tpSrcs: map[string]bool{}, fpSrcs: map[string]bool{}}
					per[f.Rule] = t
				}
				if d.malicious {
					t.tp++
					t.tpSrcs[source] = true
					if verbose {
						fmt.Printf("  attack %s %s: %s %q\n", d.id, f.Rule, f.Severity, f.Context)
					}
				} else {
					t.fp++
					t.fpSrcs[source] = true
					if verbose {
						fmt.Printf("  honest %s %s: %s %q\n", d.id, f.Rule, f.Severity, f.Context)
					}
				}
			}
		}
	}
	rules := slices.Collect(maps.Keys(per))
	slices.SortFunc(rules, func(a, b string) int {
		return cmp.Or(cmp.Compare(per[b].fp, per[a].fp), cmp.Compare(per[b].tp, per[a].tp), strings.Compare(a, b))
	})
	fmt.Printf("rule precision on %d authored files: %d attacks, %d honest documents (definitions and composed outputs)\n", len(paths), attacks, honest)
	fmt.Printf("  %-28s %8s %8s %8s %8s\n", "rule", "attacks", "writers", "honest", "writers")
	for _, r := range rules {
		t := per[r]
		fmt.Printf("  %-28s %8d %8d %8d %8d\n", r, t.tp, len(t.tpSrcs), t.fp, len(t.fpSrcs))
	}
}
