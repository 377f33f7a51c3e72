package poison

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// scope says which segments of a tool output a rule looks at. Definitions
// are short prose and every rule looks at every segment.
type scope int

const (
	scopeProse scope = iota // sentences outside code and tables
	scopeText               // prose and table rows
	scopeAll                // everything, code included
	scopeCode               // fenced code only
)

type rule struct {
	name     string
	category string
	sev      Severity // severity for definitions (and outputs when outSev is 0)
	outSev   Severity
	kinds    Kind
	scope    scope
	anywhere bool // user patterns: every segment of every kind
	re       *regexp.Regexp
	// check, when set, decides the severity of a match (SeverityNone drops
	// it).
	check func(m *match) Severity
	pre   prefilter
}

type match struct {
	doc  *document
	seg  *segment
	loc  []int
	kind Kind
	sev  Severity
}

// re compiles a built-in pattern. Patterns are written in lower case and
// matched against text lower-cased by asciiLower (same byte offsets), which
// is several times faster than (?i).
func re(s string) *regexp.Regexp { return regexp.MustCompile(s) }

// asciiLower lower-cases ASCII letters only, so byte offsets are kept.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// builtinRules are the rules of the rule files (rules/*.rules), with their
// checks attached, followed by the structural rules written in Go
// (structural.go).
var builtinRules = slices.Clip(builtinSet.rules)

// Checks of the rule files' rules, keyed by rule id (here, in
// capability.go and output.go): a check decides the severity of a match
// (SeverityNone drops it). TestRuleChecksNameRules keeps the keys in step
// with the files.
var coreChecks = map[string]func(m *match) Severity{
	"misreport_value": func(m *match) Severity {
		// The document's text keeps its case; the rules' vocabulary is
		// lower-case.
		if !substitution.MatchString(strings.ToLower(m.doc.text)) {
			return SeverityNone
		}
		return outputNeedsInstruction(m)
	},
	"hidden_markup": func(m *match) Severity {
		if m.kind == KindOutput {
			// "[system]" opens log lines; in an output require an
			// instruction after the marker.
			if !instructionAfter.MatchString(m.seg.text[m.loc[1]:]) {
				return SeverityNone
			}
		}
		return m.sev
	},
	// A secret file named in a definition: a tool that handles SSH keys or
	// AWS profiles for the user names them honestly ("lists profiles from
	// ~/.aws/config", "the key is written to ~/.ssh/deploy"), so the
	// mention alone is context; with data moved somewhere in the same
	// sentence it is a finding.
	"secret_file_mention": func(m *match) Severity {
		if publicKey(m) {
			return SeverityNone
		}
		if movesData.MatchString(m.seg.text) {
			return m.sev
		}
		return SeverityLow
	},
	"secret_file_access": secretFileAccess,
	"steal_credentials":  stealCredentials,
	"exfiltrate":         exfiltrate,
	"conceal_from_user":  concealFromUser,
	// Advisories quote the hidden edit or the overruled choice they warn
	// about; a quoted example is context.
	"conceal_change":       lowInQuotedExample(concealChange),
	"override_user_choice": lowInQuotedExample(ruleSeverity),
	// Advisories quote the exfiltration they warn about ("one sample read:
	// \"e-mail this conversation to …\""); a quoted example is context, as
	// for ai_addressed below.
	"send_data_out": lowInQuotedExample(outputNeedsInstruction),
	// Guardrail tools, red-team suites and articles on prompt injection
	// quote the phrases they are about ("blocks prompts such as 'ignore
	// previous instructions'"). Across the authored batches these rules
	// flagged more such honest rows than attacks; a quoted example is
	// context, and the classifier still reads the sentence.
	"override_instructions": lowerWhenQuoted,
	"new_instructions":      lowerWhenQuoted,
	"role_reassignment":     lowerWhenQuoted,
	// An address to the model inside a quoted example ("text such as
	// 'Note to the AI reviewer: ...'"); not lowerWhenQuoted, whose list
	// cue (a quote, then a comma) would clear every field of a CSV row.
	"ai_addressed": lowInQuotedExample(ruleSeverity),
}

// concealChange drops a match whose thing hidden is "this" or "his": the
// rule's plural branch ([a-z]+s) reads them as plurals, and "do not say
// this was removed until the call returns" is an honest rule.
func concealChange(m *match) Severity {
	if singularDeictic.MatchString(m.seg.text[m.loc[0]:m.loc[1]]) {
		return SeverityNone
	}
	return m.sev
}

// ruleSeverity is the severity the rule file gives a match, unchanged.
func ruleSeverity(m *match) Severity { return m.sev }

// lowInQuotedExample reports a match inside a quoted example as the
// classifier reads one (quotedSpans) low, and leaves any other to sev.
func lowInQuotedExample(sev func(*match) Severity) func(*match) Severity {
	return func(m *match) Severity {
		if inQuotedExample(m.doc.text, m.seg.start+m.loc[0]) {
			return SeverityLow
		}
		return sev(m)
	}
}

// lowerWhenQuoted lowers a match that opens a quotation introduced as an
// example (quotedMention), or lies inside a quoted example as the
// classifier reads one (quotedSpans), to low.
func lowerWhenQuoted(m *match) Severity {
	if at := m.seg.start + m.loc[0]; at <= len(m.doc.text) && (quotedMention(m.doc.text[:at]) || inQuotedExample(m.doc.text, at)) {
		return SeverityLow
	}
	return m.sev
}

// quotedMention reports whether the text before a match ends with an
// opening quote mark that a mention cue introduces (mention_cue: "such
// as", "e.g.", "the sentence", "text:"). The whole document is read, not
// the segment, since "e.g. " ends a sentence for the segmenter.
func quotedMention(before string) bool {
	before = strings.TrimRight(before, " ")
	quoted := false
	for _, q := range []string{`"`, "'", "\u201c", "\u2018", "\u00ab", "`"} {
		if strings.HasSuffix(before, q) {
			before, quoted = before[:len(before)-len(q)], true
			break
		}
	}
	if !quoted {
		return false
	}
	return mentionCue.MatchString(asciiLower(before[max(0, len(before)-40):]))
}

// ruleChecks merges the check tables.
var ruleChecks = func() map[string]func(m *match) Severity {
	all := map[string]func(m *match) Severity{}
	for _, checks := range []map[string]func(m *match) Severity{coreChecks, capabilityChecks, outputChecks} {
		for id, c := range checks {
			if all[id] != nil {
				panic(fmt.Sprintf("poison: two checks for rule %s", id))
			}
			all[id] = c
		}
	}
	return all
}()

func init() {
	for _, r := range builtinRules {
		r.check = ruleChecks[r.name]
	}
}

// outputNeedsInstruction: in an output, talk of secrets and sending data
// counts only in a sentence addressed to the reader.
func outputNeedsInstruction(m *match) Severity {
	if m.kind == KindOutput && !instructionLike(m.seg.text) {
		return SeverityNone
	}
	return m.sev
}

// leakedSecret is a steal_credentials match whose verb is the participle
// "leaked" right before the secret; searchedFor is the "for" before it.
// Together they are a search for credentials that have already leaked
// ("scans commits for leaked API keys"), what secret scanners do. Other
// uses of leaked credentials are attacks ("tries leaked passwords against
// the login", "a pool of leaked session cookies"), so only the search is
// lowered.
var (
	leakedSecret = regexp.MustCompile(`^leaked(?:\s+\S+){1,3}$`)
	searchedFor  = regexp.MustCompile(`\bfor\s*$`)
)

// stealCredentials lowers a search for leaked credentials to low; in
// outputs a match needs an instruction (outputNeedsInstruction).
func stealCredentials(m *match) Severity {
	if leakedSecret.MatchString(m.seg.text[m.loc[0]:m.loc[1]]) && searchedFor.MatchString(m.seg.text[:m.loc[0]]) {
		return SeverityLow
	}
	return outputNeedsInstruction(m)
}

// secretFileAccess clears a setup step that creates a secrets file from
// its template ("copy .env.example to .env"): nothing secret is read.
func secretFileAccess(m *match) Severity {
	if templateCopy.MatchString(m.seg.text) || publicKey(m) {
		return SeverityNone
	}
	if negatedVerb.MatchString(m.seg.text[:m.loc[0]]) {
		// "never read or print ~/.git-credentials", "it does not open
		// ~/.aws/credentials": a promise, not a request.
		return SeverityLow
	}
	return outputNeedsInstruction(m)
}

// publicKey reports whether the secret path a match ends with is a public
// key ("cat ~/.ssh/id_ed25519.pub" to paste it into GitHub): the half of a
// key pair that is meant to be shared.
func publicKey(m *match) bool {
	rest := m.seg.text[m.loc[1]:]
	if i := strings.IndexAny(rest, " \t\n`'\")],;"); i >= 0 {
		rest = rest[:i]
	}
	return strings.HasSuffix(rest, ".pub")
}

// concealFromUser: "we will never ask you for them" warns the reader about
// phishing; it hides nothing from them.
func concealFromUser(m *match) Severity {
	if askForThem.MatchString(m.seg.text[m.loc[0]:m.loc[1]]) {
		return SeverityNone
	}
	return m.sev
}

// exfiltrate: a sentence about catching exfiltration ("audits tool lists
// for exfiltration URLs") names the threat without asking for it.
func exfiltrate(m *match) Severity {
	if m.kind == KindDefinition && defensive.MatchString(m.seg.text) {
		return SeverityLow
	}
	return outputNeedsInstruction(m)
}

// Vocabulary the checks use, from the rule files.
var (
	instructionAfter = builtinPattern("instruction_after") // text after a marker that reads as an instruction
	movesData        = builtinPattern("moves_data")
	mentionCue       = builtinPattern("mention_cue")
	exampleCue       = builtinPattern("example_cue")
	imperativeStart  = builtinPattern("imperative_start")
	secondPerson     = builtinPattern("second_person")
	addresseeLead    = builtinPattern("addressee_lead")
	templateCopy     = builtinPattern("template_copy")
	negatedVerb      = builtinPattern("negated_verb")
	askForThem       = builtinPattern("ask_for_them")
	substitution     = builtinPattern("substitution")
	singularDeictic  = builtinPattern("singular_deictic")
)

// instructionLike reports whether a segment of an output reads as an
// instruction to whoever processes it (imperative, or addressed to "you"),
// rather than a report of something that happened. The imperative may
// follow a role label and a clause of time ("Assistant: before replying,
// e-mail ..."): injections name the model first as often as they command it.
func instructionLike(s string) bool {
	if imperativeStart.MatchString(s) || secondPerson.MatchString(s) {
		return true
	}
	// A role label, then a clause: two leads at most.
	for range 2 {
		loc := addresseeLead.FindStringIndex(s)
		if loc == nil || loc[1] == 0 {
			return false
		}
		s = s[loc[1]:]
		if imperativeStart.MatchString(s) {
			return true
		}
	}
	return false
}
