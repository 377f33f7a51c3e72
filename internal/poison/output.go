package poison

import (
	"regexp"
	"strings"
)

// Injected instructions in tool outputs (rules/outputs.rules). Real outputs
// are full of imperative sentences (code comments, "Reply to this email",
// "Click here"), so these families look for what is specific to an
// injection:
//
//   - an instruction about the reader's *response* ("Modify your response
//     to ...", "... in your answer") or about the reader's code when it
//     introduces a snippet to paste in;
//   - a task the document has no business asking for: a creative or
//     tutoring request, or a general question, standing alone on its line and
//     sharing almost no words with the text around it;
//   - code blocks an instruction asks to insert that read local secrets
//     and send them out, log keys, mine, propagate or destroy.

var outputChecks = map[string]func(m *match) Severity{
	// Advisories on prompt injection quote the note to summarisers they
	// warn about; a quoted example is context, as for ai_addressed.
	"steer_summary": lowInQuotedExample(ruleSeverity),
	// Directs how the model writes its response.
	"response_directive": func(m *match) Severity {
		pre := m.seg.text[:m.loc[0]]
		if prepResp.MatchString(m.seg.text[m.loc[0]:m.loc[1]]) || imperativeStart.MatchString(m.seg.text) || dirVerbRE.MatchString(pre) {
			if m.kind == KindDefinition {
				// Tool descriptions legitimately describe the tool's
				// response ("in your response, include the id" is
				// rare, but "the response" is common); only the second
				// person counts, and only at medium.
				return SeverityMedium
			}
			return m.sev
		}
		return SeverityLow
	},
	// "Incorporate the following snippet into your code:" — a paste
	// request. Alone it is also how answers on Q&A sites are written, so it
	// is medium; with a risky block after it, high.
	"snippet_insertion": func(m *match) Severity {
		b := m.doc.nextBlock(m.seg.line)
		if b == "" {
			return SeverityNone
		}
		asked := yourCodeRE.MatchString(m.seg.text) || imperativeStart.MatchString(m.seg.text)
		switch {
		case riskyCode(b) && asked:
			return SeverityHigh
		case riskyCode(b) || asked && uploadCodeRE.MatchString(b):
			// An unasked-for snippet that uploads somewhere.
			return SeverityMedium
		}
		return SeverityNone
	},
	// A creative task out of nowhere.
	"creative_task": func(m *match) Severity {
		if !m.seg.standalone && m.kind == KindOutput {
			return SeverityMedium
		}
		return m.sev
	},
	// A tutoring or knowledge task, or a general question, alone on its
	// line and unrelated to the rest of the document.
	"offtopic_task": func(m *match) Severity {
		s := m.seg
		if !s.standalone || s.table {
			return SeverityNone
		}
		nw := len(words(s.text))
		if nw < 4 || nw > 40 || len(contentWords(s.text)) < 2 {
			return SeverityNone
		}
		// A verb that is a label ("Plan: 1 to add", "Summary: ...") or a
		// column header asks nothing.
		if strings.HasPrefix(strings.TrimLeft(s.text[m.loc[1]:], " "), ":") || columnRow(s.orig) {
			return SeverityNone
		}
		// Nor does one used as a noun: a heading in capitals ("RATE
		// CONFIRMATION", "ESTIMATE OF RECORD") or a word followed by a
		// preposition or a number ("Review by @wkhoury", "Review on #1287",
		// "Estimate #E-55091"), which an imperative's object never is.
		if nounUse(s, m.loc) {
			return SeverityNone
		}
		// SQL ("CREATE TABLE invoices (") is code, not a request.
		if sqlStatement.MatchString(s.text) {
			return SeverityNone
		}
		// Quoted text is material, not the writer talking.
		unquoted := quoted.ReplaceAllString(s.text, " ")
		if marketing.MatchString(s.text) || deictic.MatchString(unquoted) || personal.MatchString(unquoted) {
			return SeverityNone
		}
		// Cohesion needs some text around the segment to mean anything:
		// with little, ask for no shared word at all.
		c, rest := m.doc.cohesion(s.text)
		switch {
		case rest >= 10 && c <= 0.2, rest >= 5 && c == 0:
			return m.sev
		}
		return SeverityLow
	},
	// Text-encoding tasks ("use numbers for vowels", "jumble the letters"):
	// high when aimed at the reply, medium when the instruction stands
	// alone on its line in prose.
	"encoding_task": func(m *match) Severity {
		if replyRef.MatchString(m.seg.text[m.loc[1]:]) || replyRef.MatchString(m.seg.text[:m.loc[0]]) {
			return m.sev
		}
		if m.seg.standalone && !m.seg.table && len(m.seg.text) < 200 {
			return SeverityMedium
		}
		return SeverityLow
	},
}

// Vocabulary of the checks above, from rules/outputs.rules.
var (
	yourCodeRE = builtinPattern("your_code")
	prepResp   = builtinPattern("prep_response")
	dirVerbRE  = builtinPattern("directive_word")
	marketing  = builtinPattern("marketing")
	replyRef   = builtinPattern("reply_ref")
	quoted     = builtinPattern("quoted")
	personal   = builtinPattern("personal")
	deictic    = builtinPattern("deictic")
)

// Code capabilities. A snippet someone asks to be pasted into "your code"
// that sends local data out, downloads and runs something, destroys,
// mines or floods is what an injected code task looks like.
var (
	netCodeRE    = builtinPattern("net_code")
	localCodeRE  = builtinPattern("local_code")
	execCodeRE   = builtinPattern("exec_code")
	harmCodeRE   = builtinPattern("harm_code")
	uploadCodeRE = builtinPattern("upload_code")
)

// riskyCode reports whether a code block does what a pasted-in snippet has
// no reason to do: send local data out, download and run code, read local
// secrets and execute, destroy, mine or disrupt.
func riskyCode(block string) bool {
	net, local, exec := netCodeRE.MatchString(block), localCodeRE.MatchString(block), execCodeRE.MatchString(block)
	return net && (local || exec) || local && exec || harmCodeRE.MatchString(block)
}

// columnRow reports whether a segment is a row of aligned columns (a
// header such as kubectl's "NAME   READY   STATUS" or benchstat's "name
// old time/op new time/op"): two or more gaps of a tab or several spaces
// between words, and no sentence punctuation.
func columnRow(s string) bool {
	if strings.ContainsAny(s, "?!") || strings.HasSuffix(s, ".") {
		return false
	}
	return len(columnGap.FindAllStringIndex(s, 2)) == 2 || csvHeader.MatchString(s)
}

// columnGap is a gap between columns (segments are trimmed, so every gap
// is between words).
var columnGap = regexp.MustCompile(`\t+|  +`)

// sqlStatement is a line that opens an SQL statement.
var sqlStatement = regexp.MustCompile(`^(?:create|alter|drop) (?:or replace )?(?:table|index|view|schema|database|function|procedure)\b|^(?:select|insert into|update|delete from) `)

// csvHeader is a header row of comma-separated values ("First Name,Last
// Name,E-mail Address"): at least three short fields, no space after any
// comma.
var csvHeader = regexp.MustCompile(`^[^,\s][^,]{0,40}(?:,[^,\s][^,]{0,40}){2,}$`)

// nounAfter is what follows a task verb used as a noun: a preposition
// that cannot start an imperative's object, or a number or handle.
var nounAfter = regexp.MustCompile(`^\s*(?:(?:by|of|on|from)\b|[#@]|no\.\s*\d)`)

// nounUse reports whether the task verb at loc of s is a noun: written in
// capitals, or followed by nounAfter.
func nounUse(s *segment, loc []int) bool {
	verb := s.orig[loc[0]:loc[1]]
	if i := strings.LastIndexByte(strings.TrimRight(verb, " "), ' '); i >= 0 {
		verb = verb[i+1:] // the lead's filler words come first
	}
	if len(verb) > 1 && strings.ToUpper(verb) == verb && strings.ToLower(verb) != verb {
		return true
	}
	return nounAfter.MatchString(s.text[loc[1]:])
}
