package main

import (
	"cmp"
	"fmt"
	"log"
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
// flag on their own (severity at or above the kind's threshold, medium by
// default): attacks and honest rows, and on how many writers' batches each.
// The writers wrote their honest rows in the attacks' vocabulary, so a rule
// that flags as many of them as attacks is vocabulary, not evidence. With
// verbose, each row a rule flags is listed with its context.
func rulePrecision(cfg map[string]poison.Config, paths []string, verbose bool) {
	type tally struct {
		n    [2]int // honest, attacks
		srcs [2]map[string]bool
	}
	defDet, outDet := build(cfg, poison.Options{}), buildOut(cfg, poison.Options{})
	defMin, outMin := minSeverity(cfg["tool_poisoning"].DefinitionThreshold), minSeverity(cfg["output_poisoning"].OutputThreshold)
	per := map[string]*tally{}
	var docsOf [2]int
	for _, path := range paths {
		rows := mustLoad(path)
		if len(rows) == 0 {
			continue
		}
		source := rows[0].Source
		docs, scan, least := defDocs(nil, rows), func(s string) poison.Verdict { return defDet.ScanDefinition("", s, nil) }, defMin
		if rows[0].Role != "" {
			docs, scan, least = compose(rows, source), outDet.ScanOutput, outMin
		}
		for _, d := range docs {
			k := 0
			if d.malicious {
				k = 1
			}
			docsOf[k]++
			seen := map[string]bool{}
			for _, f := range scan(d.text).Findings {
				if sev, err := poison.ParseSeverity(f.Severity); f.Detector != "rule" || seen[f.Rule] || err != nil || sev < least {
					continue
				}
				seen[f.Rule] = true
				t := per[f.Rule]
				if t == nil {
					t = &tally{srcs: [2]map[string]bool{{}, {}}}
					per[f.Rule] = t
				}
				t.n[k]++
				t.srcs[k][source] = true
				if verbose {
					fmt.Printf("  %s %s %s: %s %q\n", [2]string{"honest", "attack"}[k], d.id, f.Rule, f.Severity, f.Context)
				}
			}
		}
	}
	rules := slices.Collect(maps.Keys(per))
	slices.SortFunc(rules, func(a, b string) int {
		return cmp.Or(cmp.Compare(per[b].n[0], per[a].n[0]), cmp.Compare(per[b].n[1], per[a].n[1]), strings.Compare(a, b))
	})
	fmt.Printf("rule precision on %d authored files: %d attacks, %d honest documents (definitions and composed outputs)\n", len(paths), docsOf[1], docsOf[0])
	fmt.Printf("  %-28s %8s %8s %8s %8s\n", "rule", "attacks", "writers", "honest", "writers")
	for _, r := range rules {
		t := per[r]
		fmt.Printf("  %-28s %8d %8d %8d %8d\n", r, t.n[1], len(t.srcs[1]), t.n[0], len(t.srcs[0]))
	}
}

// minSeverity is a configured threshold as a severity ("" is the default,
// medium).
func minSeverity(s string) poison.Severity {
	if sev, err := poison.ParseSeverity(cmp.Or(s, "medium")); err == nil {
		return sev
	}
	log.Fatalf("threshold %q is not a severity", s)
	return 0
}
