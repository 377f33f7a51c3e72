package poison

import (
	"embed"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// The built-in rule vocabulary lives in rules/*.rules (embedded); this file
// reads it. The format is described in rules/README.md. Go keeps the code:
// the checks keyed by rule id (ruleChecks), the prefilter and the scan.

//go:embed rules/*.rules
var ruleFS embed.FS

// ruleFiles are read in this order; a rule's place decides the order of
// findings of equal severity, and every file in rules/ must be listed.
var ruleFiles = []string{"shared.rules", "core.rules", "capability.rules", "outputs.rules"}

// ruleSet is what the rule files define: the rules in file order and the
// named fragments (define), which Go code compiles on its own as well.
type ruleSet struct {
	rules []*rule
	defs  map[string]*ruleDef
}

type ruleDef struct {
	name     string
	at       string // file:line, for errors
	body     []srcLine
	branches []string // top-level branches, placeholders expanded
	expanded string   // the branches joined with |
	state    int      // 0 new, 1 expanding, 2 done (cycle detection)
}

type srcLine struct {
	text string // without indentation and trailing space
	at   string // file:line
}

var knownCategories = []string{CatHiddenInstructions, CatCredentialTheft, CatExfiltration, CatShellInjection,
	CatPathTraversal, CatMaliciousCapability, CatToolShadowing, CatInjectedInstruction, CatHiddenText}

// builtinSet is the embedded rule files, read once at start-up. They are
// part of the program: a mistake in them is a programming error, which
// every test of the package reports.
var builtinSet = mustReadRuleFiles()

func mustReadRuleFiles() *ruleSet {
	files := map[string]string{}
	ents, err := ruleFS.ReadDir("rules")
	if err != nil {
		panic(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".rules") {
			continue
		}
		if !slices.Contains(ruleFiles, e.Name()) {
			panic(fmt.Sprintf("poison: rules/%s is not listed in ruleFiles", e.Name()))
		}
		b, err := ruleFS.ReadFile("rules/" + e.Name())
		if err != nil {
			panic(err)
		}
		files[e.Name()] = string(b)
	}
	set, err := readRuleFiles(ruleFiles, files)
	if err != nil {
		panic("poison: built-in rules: " + err.Error())
	}
	return set
}

// builtinPattern compiles the named fragment of the rule files, for the
// checks written in Go.
func builtinPattern(name string) *regexp.Regexp {
	d := builtinSet.defs[name]
	if d == nil {
		panic(fmt.Sprintf("poison: no define %q in the rule files", name))
	}
	return re(d.expanded)
}

// readRuleFiles parses the named files (contents in files) in order.
func readRuleFiles(order []string, files map[string]string) (*ruleSet, error) {
	set, srcs, err := expandRuleFiles(order, files)
	if err != nil {
		return nil, err
	}
	for i, r := range set.rules {
		rx, err := regexp.Compile(srcs[i].src)
		if err != nil {
			return nil, fmt.Errorf("%s: rule %s: %v", srcs[i].at, r.name, err)
		}
		if rx.MatchString("") {
			return nil, fmt.Errorf("%s: rule %s matches the empty string", srcs[i].at, r.name)
		}
		r.re = rx
	}
	for _, d := range set.defs {
		if _, err := regexp.Compile(d.expanded); err != nil {
			return nil, fmt.Errorf("%s: define %s: %v", d.at, d.name, err)
		}
	}
	return set, nil
}

type ruleSource struct{ src, at string }

// expandRuleFiles reads the files up to the rules' expressions (not
// compiled; their re is nil), which it returns in the order of set.rules.
func expandRuleFiles(order []string, files map[string]string) (*ruleSet, []ruleSource, error) {
	set := &ruleSet{defs: map[string]*ruleDef{}}
	type pending struct {
		r     *rule
		at    string
		match []srcLine
	}
	var rules []pending
	ids := map[string]string{}
	for _, name := range order {
		src, ok := files[name]
		if !ok {
			return nil, nil, fmt.Errorf("rules/%s: missing", name)
		}
		blocks, err := splitBlocks(name, src)
		if err != nil {
			return nil, nil, err
		}
		for _, b := range blocks {
			if prev, dup := ids[b.name]; dup {
				return nil, nil, fmt.Errorf("%s: %q already defined at %s", b.at, b.name, prev)
			}
			ids[b.name] = b.at
			switch b.kind {
			case "define":
				set.defs[b.name] = &ruleDef{name: b.name, at: b.at, body: b.body}
			case "rule":
				r, match, err := ruleHeader(b)
				if err != nil {
					return nil, nil, err
				}
				rules = append(rules, pending{r, b.at, match})
			}
		}
	}
	for _, d := range set.defs {
		if err := set.expandDef(d); err != nil {
			return nil, nil, err
		}
	}
	var srcs []ruleSource
	for _, p := range rules {
		branches, err := set.readExpression(p.match, p.at)
		if err != nil {
			return nil, nil, err
		}
		set.rules = append(set.rules, p.r)
		srcs = append(srcs, ruleSource{strings.Join(branches, "|"), p.at})
	}
	return set, srcs, nil
}

type block struct {
	kind, name, at string
	props          []srcLine // rule: the lines before "match"
	body           []srcLine // the expression's lines
}

var idRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// splitBlocks cuts a file into its define and rule blocks. A block starts
// at a line with no indentation; blank lines and lines starting with # are
// comments.
func splitBlocks(file, src string) ([]block, error) {
	var out []block
	var cur *block
	inMatch := false
	for i, raw := range strings.Split(src, "\n") {
		at := fmt.Sprintf("rules/%s:%d", file, i+1)
		text := strings.TrimSpace(raw)
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if raw[0] != ' ' && raw[0] != '\t' {
			f := strings.Fields(text)
			if len(f) != 2 || (f[0] != "rule" && f[0] != "define") || !idRE.MatchString(f[1]) {
				return nil, fmt.Errorf(`%s: want "rule <id>" or "define <name>" (lower_snake_case), got %q`, at, text)
			}
			out = append(out, block{kind: f[0], name: f[1], at: at})
			cur, inMatch = &out[len(out)-1], f[0] == "define"
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("%s: indented line outside a rule or define", at)
		}
		switch {
		case inMatch:
			cur.body = append(cur.body, srcLine{text, at})
		case text == "match":
			inMatch = true
		default:
			cur.props = append(cur.props, srcLine{text, at})
		}
	}
	for _, b := range out {
		if len(b.body) == 0 {
			return nil, fmt.Errorf("%s: %s %s has no expression", b.at, b.kind, b.name)
		}
	}
	return out, nil
}

// ruleHeader reads a rule's properties.
func ruleHeader(b block) (*rule, []srcLine, error) {
	r := &rule{name: b.name, scope: -1}
	seen := map[string]bool{}
	for _, p := range b.props {
		key, val, _ := strings.Cut(p.text, " ")
		val = strings.TrimSpace(val)
		if seen[key] {
			return nil, nil, fmt.Errorf("%s: %s given twice", p.at, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "category":
			if !slices.Contains(knownCategories, val) {
				err = fmt.Errorf("unknown category %q (want one of %s)", val, strings.Join(knownCategories, ", "))
			}
			r.category = val
		case "kinds":
			for _, k := range strings.Fields(val) {
				switch k {
				case "definition":
					r.kinds |= KindDefinition
				case "output":
					r.kinds |= KindOutput
				default:
					err = fmt.Errorf("unknown kind %q (want definition or output)", k)
				}
			}
		case "severity":
			r.sev, err = ParseSeverity(val)
		case "output_severity":
			r.outSev, err = ParseSeverity(val)
		case "scope":
			i := slices.Index([]string{"prose", "text", "all", "code"}, val)
			if i < 0 {
				err = fmt.Errorf("unknown scope %q (want prose, text, all or code)", val)
			}
			r.scope = scope(i)
		default:
			err = fmt.Errorf("unknown property %q (want category, kinds, severity, output_severity, scope or match)", key)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: rule %s: %v", p.at, b.name, err)
		}
	}
	for _, k := range []string{"category", "kinds", "severity", "scope"} {
		if !seen[k] {
			return nil, nil, fmt.Errorf("%s: rule %s: no %s", b.at, b.name, k)
		}
	}
	return r, b.body, nil
}

// joinBranches reads an expression written one branch per line: a line
// ending in "(?:" opens a group whose branches follow, one per line, until
// a line starting with ")" closes it (and continues the branch).
func joinBranches(lines []srcLine, at string) ([]string, error) {
	branches, i, err := readBranches(lines, 0, false)
	if err != nil {
		return nil, err
	}
	if i < len(lines) {
		return nil, fmt.Errorf("%s: %q closes no group", lines[i].at, lines[i].text)
	}
	if len(branches) == 0 {
		return nil, fmt.Errorf("%s: empty expression", at)
	}
	return branches, nil
}

func readBranches(lines []srcLine, i int, inGroup bool) ([]string, int, error) {
	var out []string
	for i < len(lines) {
		if strings.HasPrefix(lines[i].text, ")") {
			if inGroup {
				return out, i, nil
			}
			return nil, i, fmt.Errorf("%s: %q closes no group", lines[i].at, lines[i].text)
		}
		var b strings.Builder
		for {
			l := lines[i]
			b.WriteString(l.text)
			i++
			if !opensGroup(l.text) {
				break
			}
			inner, j, err := readBranches(lines, i, true)
			if err != nil {
				return nil, j, err
			}
			if j >= len(lines) {
				return nil, j, fmt.Errorf("%s: group opened here is not closed", l.at)
			}
			if len(inner) == 0 {
				return nil, j, fmt.Errorf("%s: group opened here has no branches", l.at)
			}
			b.WriteString(strings.Join(inner, "|"))
			i = j
		}
		out = append(out, b.String())
	}
	return out, i, nil
}

// opensGroup: the line ends in an unescaped "(?:".
func opensGroup(s string) bool {
	if !strings.HasSuffix(s, "(?:") {
		return false
	}
	n := 0
	for j := len(s) - 4; j >= 0 && s[j] == '\\'; j-- {
		n++
	}
	return n%2 == 0
}

// gapFmt is "a few words within the same clause": {gap N} in the rule
// files.
const gapFmt = `[^.!?\n]{0,%d}?`

// expand replaces the placeholders of src: {gap N} and {name} (a define,
// inserted as it is when it has one branch, as a (?:...) group otherwise).
// An escaped \{ is a literal brace.
func (set *ruleSet) expand(src, at string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == '\\' && i+1 < len(src) {
			b.WriteString(src[i : i+2])
			i++
			continue
		}
		if c != '{' || i+1 >= len(src) || src[i+1] < 'a' || src[i+1] > 'z' {
			b.WriteByte(c)
			continue
		}
		end := strings.IndexByte(src[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%s: unclosed {", at)
		}
		ph := src[i+1 : i+end]
		i += end
		if n, ok := strings.CutPrefix(ph, "gap "); ok {
			var k int
			if _, err := fmt.Sscanf(n, "%d", &k); err != nil || k <= 0 || k > 200 || fmt.Sprint(k) != n {
				return "", fmt.Errorf("%s: {%s}: want {gap N} with N from 1 to 200", at, ph)
			}
			fmt.Fprintf(&b, gapFmt, k)
			continue
		}
		d := set.defs[ph]
		if d == nil {
			return "", fmt.Errorf("%s: {%s}: no define of that name", at, ph)
		}
		if err := set.expandDef(d); err != nil {
			return "", err
		}
		if len(d.branches) > 1 {
			b.WriteString("(?:" + d.expanded + ")")
		} else {
			b.WriteString(d.expanded)
		}
	}
	return b.String(), nil
}

func (set *ruleSet) expandDef(d *ruleDef) error {
	switch d.state {
	case 1:
		return fmt.Errorf("%s: define %s refers to itself", d.at, d.name)
	case 2:
		return nil
	}
	d.state = 1
	branches, err := set.readExpression(d.body, d.at)
	if err != nil {
		return err
	}
	d.branches, d.expanded, d.state = branches, strings.Join(branches, "|"), 2
	return nil
}

// readExpression expands the placeholders of each line, then joins the
// lines into the expression's top-level branches.
func (set *ruleSet) readExpression(lines []srcLine, at string) ([]string, error) {
	exp := make([]srcLine, len(lines))
	for i, l := range lines {
		s, err := set.expand(l.text, l.at)
		if err != nil {
			return nil, err
		}
		exp[i] = srcLine{s, l.at}
	}
	return joinBranches(exp, at)
}

// RuleBranch is one branch of an expression in the rule files: a line,
// with the lines of the groups it opens. For audits of the vocabulary (go
// run ./bench/poisoning -rule-audit).
type RuleBranch struct {
	At    string // file:line
	Text  string // the line as written
	Alone string // the branch on its own, expanded
	// Without holds, for each rule whose expression the branch is part of
	// (directly or through a define), the expression with the branch left
	// out. Empty for vocabulary only Go checks use.
	Without map[string]string
}

// BuiltinRuleBranches lists every branch of the built-in rule files that
// can be left out (the only branch of a group cannot).
func BuiltinRuleBranches() ([]RuleBranch, error) {
	files := map[string]string{}
	for _, name := range ruleFiles {
		b, err := ruleFS.ReadFile("rules/" + name)
		if err != nil {
			return nil, err
		}
		files[name] = string(b)
	}
	base, baseSrc, err := expandRuleFiles(ruleFiles, files)
	if err != nil {
		return nil, err
	}
	var out []RuleBranch
	for _, name := range ruleFiles {
		lines := strings.Split(files[name], "\n")
		inExpr := false
		for i, raw := range lines {
			text := strings.TrimSpace(raw)
			if text == "" || strings.HasPrefix(text, "#") {
				continue
			}
			if raw[0] != ' ' && raw[0] != '\t' {
				inExpr = strings.HasPrefix(text, "define ")
				continue
			}
			if !inExpr {
				inExpr = text == "match"
				continue
			}
			if strings.HasPrefix(text, ")") {
				continue
			}
			// The branch runs until the groups it opens are closed.
			end, depth := i, 0
			for ; end < len(lines); end++ {
				t := strings.TrimSpace(lines[end])
				if t == "" || strings.HasPrefix(t, "#") {
					continue
				}
				if strings.HasPrefix(t, ")") {
					depth--
				}
				if opensGroup(t) {
					depth++
				}
				if depth == 0 {
					break
				}
			}
			var kept []string
			kept = append(kept, lines[:i]...)
			kept = append(kept, lines[end+1:]...)
			variant := maps.Clone(files)
			variant[name] = strings.Join(kept, "\n")
			set, srcs, err := expandRuleFiles(ruleFiles, variant)
			if err != nil {
				continue // the only branch of its group
			}
			alone := &ruleSet{defs: base.defs}
			var body []srcLine
			for k := i; k <= end && k < len(lines); k++ {
				if t := strings.TrimSpace(lines[k]); t != "" && !strings.HasPrefix(t, "#") {
					body = append(body, srcLine{t, fmt.Sprintf("rules/%s:%d", name, k+1)})
				}
			}
			ab, err := alone.readExpression(body, "")
			if err != nil {
				return nil, err
			}
			b := RuleBranch{At: fmt.Sprintf("%s:%d", name, i+1), Text: text, Alone: strings.Join(ab, "|"), Without: map[string]string{}}
			for k, r := range set.rules {
				if srcs[k].src != baseSrc[k].src {
					b.Without[r.name] = srcs[k].src
				}
			}
			out = append(out, b)
		}
	}
	return out, nil
}
