package poison

import (
	"strings"
	"testing"
)

// TestRuleChecksNameRules: every check written in Go is keyed by the id of
// a rule in the rule files, so renaming a rule cannot silently drop its
// check.
func TestRuleChecksNameRules(t *testing.T) {
	ids := map[string]bool{}
	for _, r := range builtinSet.rules {
		ids[r.name] = true
	}
	for id := range ruleChecks {
		if !ids[id] {
			t.Errorf("check %q names no rule of rules/*.rules", id)
		}
	}
	for _, r := range builtinSet.rules {
		if ruleChecks[r.name] != nil && r.check == nil {
			t.Errorf("rule %s: check not attached", r.name)
		}
	}
}

// TestReadRuleFiles: the expression format (one branch per line, groups
// opened by a line ending in "(?:" and closed by a line starting with ")",
// {gap N} and {name} placeholders) gives the expression it stands for.
func TestReadRuleFiles(t *testing.T) {
	src := `# a comment
define verbs
  send
  upload
  # a comment inside
  post\(

define lead
  ^(?:please\s+)?

rule demo_rule
  category exfiltration
  kinds definition output
  severity high
  output_severity medium
  scope all
  match
    {lead}\b{verbs}\b{gap 20}\b(?:
      data
      files?
      (?:
        x
        \{y\}
      )z
    )\b
    \bexfil
`
	set, err := readRuleFiles([]string{"a.rules"}, map[string]string{"a.rules": src})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.rules) != 1 {
		t.Fatalf("got %d rules", len(set.rules))
	}
	r := set.rules[0]
	want := `^(?:please\s+)?\b(?:send|upload|post\()\b[^.!?\n]{0,20}?\b(?:data|files?|(?:x|\{y\})z)\b|\bexfil`
	if r.re.String() != want {
		t.Errorf("expression\n%s\nwant\n%s", r.re, want)
	}
	if r.name != "demo_rule" || r.category != CatExfiltration || r.kinds != KindDefinition|KindOutput || r.sev != SeverityHigh || r.outSev != SeverityMedium || r.scope != scopeAll {
		t.Errorf("header read as %s %s %v %v %v %v", r.name, r.category, r.kinds, r.sev, r.outSev, r.scope)
	}
	if got := set.defs["verbs"].expanded; got != `send|upload|post\(` {
		t.Errorf("define verbs = %q", got)
	}
}

// TestReadRuleFilesErrors: a mistake in a rule file is an error naming the
// file, the line and the problem.
func TestReadRuleFilesErrors(t *testing.T) {
	head := "rule r\n  category exfiltration\n  kinds definition\n  severity high\n  scope text\n  match\n"
	for _, c := range []struct{ src, want string }{
		{head + "    {nope}\n", `a.rules:7: {nope}: no define of that name`},
		{head + "    a(?:\n      b\n", `a.rules:7: group opened here is not closed`},
		{head + "    a\n    )b\n", `a.rules:8: ")b" closes no group`},
		{head + "    a(?:\n    )b\n", `a.rules:7: group opened here has no branches`},
		{head + "    a{gap 0}\n", `{gap 0}: want {gap N} with N from 1 to 200`},
		{head + "    a(\n", "a.rules:1: rule r: error parsing regexp"},
		{head + "    (?:x)?\n", "rule r matches the empty string"},
		{strings.Replace(head, "exfiltration", "exfil", 1) + "    a\n", `a.rules:2: rule r: unknown category "exfil"`},
		{strings.Replace(head, "definition", "defn", 1) + "    a\n", `unknown kind "defn"`},
		{strings.Replace(head, "scope text", "scope code blocks", 1) + "    a\n", `unknown scope "code blocks"`},
		{strings.Replace(head, "  severity high\n", "", 1) + "    a\n", "a.rules:1: rule r: no severity"},
		{strings.Replace(head, "  scope text\n", "  colour red\n", 1) + "    a\n", `a.rules:5: rule r: unknown property "colour"`},
		{head + "    a\n" + head + "    b\n", `rules/a.rules:8: "r" already defined at rules/a.rules:1`},
		{"define d\n  {d}x\nrule r\n  category exfiltration\n  kinds definition\n  severity high\n  scope text\n  match\n    {d}\n", "define d refers to itself"},
		{"Rule R\n", `a.rules:1: want "rule <id>" or "define <name>"`},
		{"  a\n", "a.rules:1: indented line outside a rule or define"},
		{"rule r\n  category exfiltration\n", "a.rules:1: rule r has no expression"},
	} {
		_, err := readRuleFiles([]string{"a.rules"}, map[string]string{"a.rules": c.src})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.src, err, c.want)
		}
	}
}
