package poison

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Articles, advisories, runbooks and guardrail tools explain prompt
// injection by quoting it ("a typical example reads: \"AI assistant, ignore
// your instructions ...\""). The quoted sentence is an injection word for
// word, so the classifier, which reads one sentence at a time, scores it as
// one. Across the authored batches such explainers were the honest outputs
// the classifier scored highest. A quotation that an example cue introduces
// ("a typical example reads:"), or that a clause calling it an example
// opens with a colon ("One sample, found in a fake invoice e-mail:"), in
// quote marks or as a Markdown blockquote, is therefore scored on its own
// and reported at low severity, as the rules do with a quoted override
// (lowerWhenQuoted); the rest of the text is scored without it. The price
// is an evasion: an attacker who frames the injection as an example gets a
// low finding, not a flag.

// maxQuotedBytes bounds a quoted example: a quotation that runs on longer is
// not an example of a sentence, and an unclosed quote mark hides nothing.
const maxQuotedBytes = 400

// maxQuotedScored bounds how many quoted examples of one text the
// classifier scores.
const maxQuotedScored = 4

// quotePairs maps each opening quote mark to its closing one.
var quotePairs = map[rune]rune{
	'"':      '"',
	'\'':     '\'',
	'\u201c': '\u201d', // “ ”
	'\u2018': '\u2019', // ‘ ’
	'\u201e': '\u201c', // „ “
	'\u00ab': '\u00bb', // « »
	'\u300c': '\u300d', // 「 」
}

// listJoin joins the items of a list of examples ("such as 'a', 'b' or
// 'c'"): only an item right after an example continues it, so the strings
// of a JSON object or a CSV row are not examples.
var listJoin = regexp.MustCompile(`^\s*(?:,\s*(?:or|and)?|or|and)\s*$`)

// quotedPlaceholder stands in for a quoted example in the text the
// classifier scores, so that "reads: \"…\"" still reads as a sentence.
const quotedPlaceholder = "\u2026"

// splitQuoted returns text with every quoted example replaced by
// quotedPlaceholder, and the examples themselves.
func splitQuoted(text string) (string, []string) {
	spans := quotedSpans(text)
	if spans == nil {
		return text, nil
	}
	var b strings.Builder
	quotes := make([]string, len(spans))
	last := 0
	for k, sp := range spans {
		quotes[k] = text[sp[0]:sp[1]]
		b.WriteString(text[last:sp[0]])
		b.WriteString(quotedPlaceholder)
		last = sp[1]
	}
	b.WriteString(text[last:])
	return b.String(), quotes
}

// quotedSpans returns the byte ranges of the quoted examples of text,
// between their quote marks. A quoted example is a quotation opened right
// after an example cue (define example_cue), after a clause announcing an
// example (leadsInExample) or right after another example in a list, and
// closed within maxQuotedBytes; or a Markdown blockquote after such a
// clause.
func quotedSpans(text string) [][2]int {
	var spans [][2]int
	listed := -1 // the end of the last example's closing quote
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == '>' && !strings.HasPrefix(text[i+size:], ">") && atLineStart(text[:i]) && leadsInExample(text[:i]) {
			start := i + size
			if end := blockquoteEnd(text[start:]); end > 0 {
				spans = append(spans, [2]int{start, start + end})
				i = start + end
				listed = -1
				continue
			}
		}
		closer, ok := quotePairs[r]
		if !ok || !(endsInCueWord(text[:i]) && exampleCue.MatchString(asciiLower(text[max(0, i-40):i])) || leadsInExample(text[:i]) || listed >= 0 && listJoin.MatchString(text[listed:i])) {
			i += size
			continue
		}
		start := i + size
		end := closingQuote(text[start:min(len(text), start+maxQuotedBytes)], closer)
		if end < 0 || strings.TrimSpace(text[start:start+end]) == "" {
			i += size
			continue
		}
		spans = append(spans, [2]int{start, start + end})
		i = start + end + utf8.RuneLen(closer)
		listed = i
	}
	return spans
}

// maxLeadInBytes bounds the clause that announces an example before its
// colon ("One example, found in a supplier's e-mail, read:").
const maxLeadInBytes = 120

// exampleNoun names what an advisory quotes: the clause before the colon
// calls the quotation an example, a sample or an excerpt, or says it is
// quoted. Attacks that quote their payload say what to do with it ("reply
// with:", "add this line:"), not that it is an example.
var exampleNoun = regexp.MustCompile(`\b(?:examples?|samples?|instances?|excerpts?|quoted|verbatim)\b`)

// leadsInExample reports whether before ends with a colon (and blanks)
// closing a clause that announces an example (exampleNoun). The clause
// runs back to the last sentence end or line break, at most
// maxLeadInBytes.
func leadsInExample(before string) bool {
	before = strings.TrimRight(before, " \t\r\n")
	if !strings.HasSuffix(before, ":") {
		return false
	}
	clause := before[max(0, len(before)-maxLeadInBytes) : len(before)-1]
	if r, _ := utf8.DecodeLastRuneInString(clause); quotePairs[r] != 0 || r == '\u201d' || r == '\u2019' {
		// A JSON or YAML key ("example": "…") names a field, not an
		// example the text explains.
		return false
	}
	if i := strings.LastIndexByte(clause, '\n'); i >= 0 {
		clause = clause[i+1:]
	}
	for _, end := range []string{". ", "! ", "? "} {
		if i := strings.LastIndex(clause, end); i >= 0 {
			clause = clause[i+len(end):]
		}
	}
	// "Example:" alone heads a usage example or is a YAML key, and an
	// attack can sit in either; an advisory says more about what it quotes
	// ("One example, quoted as received:"). A clause holding a colon, a
	// bracket or code marks is structured data ("{type: string, example:
	// '…'}"), not prose.
	return len(strings.Fields(clause)) >= minLeadInWords && !strings.ContainsAny(clause, ":{}[]()=`\"") && exampleNoun.MatchString(asciiLower(clause))
}

// minLeadInWords is the fewest words of a clause announcing an example.
const minLeadInWords = 3

// atLineStart reports whether only blanks stand between a line break (or
// the start of the text) and the end of before.
func atLineStart(before string) bool {
	before = strings.TrimRight(before, " \t")
	return before == "" || strings.HasSuffix(before, "\n")
}

// blockquoteEnd returns the length of a Markdown blockquote whose first
// '>' has just been read: its lines up to the first line that does not
// open with '>' (or a blank line), or -1 when it runs past maxQuotedBytes
// or holds nothing.
func blockquoteEnd(s string) int {
	end := 0
	for {
		nl := strings.IndexByte(s[end:], '\n')
		if nl < 0 {
			end = len(s)
			break
		}
		next := strings.TrimLeft(s[end+nl+1:], " \t")
		if !strings.HasPrefix(next, ">") {
			end += nl
			break
		}
		end += nl + 1
	}
	if end > maxQuotedBytes || strings.TrimSpace(s[:end]) == "" {
		return -1
	}
	return end
}

// inQuotedExample reports whether byte offset at of text lies inside one
// of its quoted examples.
func inQuotedExample(text string, at int) bool {
	for _, sp := range quotedSpans(text) {
		if at >= sp[0] && at < sp[1] {
			return true
		}
	}
	return false
}

// Unquoted is the text the classifier scores: text with its quoted
// examples replaced (splitQuoted). Training featurises the same text.
func Unquoted(text string) string {
	body, _ := splitQuoted(text)
	return body
}

// endsInCueWord reports whether before ends in a word that an example cue
// can end with (cueEnds), give or take the blanks and the colon, comma or
// parenthesis after it. A cheap test first: prose and JSON hold a quote
// mark every few words, and the cue expression is matched only after one
// of these words.
func endsInCueWord(before string) bool {
	before = strings.TrimRight(before, " \t\n:,(")
	i := strings.LastIndexAny(before, " \t\n(\"'")
	w := before[i+1:]
	if len(w) > 12 {
		return false
	}
	return cueEnds[asciiLower(w)]
}

// cueEnds are the last words of the cues of define example_cue. A cue
// whose last word is missing here is never tried: add it when adding one.
var cueEnds = map[string]bool{
	"e.g.": true, "as": true, "example": true, "instance": true, "examples": true,
	"read": true, "reads": true, "say": true, "says": true, "is": true, "was": true,
	"include": true, "includes": true, "are": true, "this": true, "like": true,
	"said": true, "stated": true, "reading": true, "contained": true, "included": true,
	"with": true, "text": true, "sentence": true, "line": true, "comment": true,
	"note": true, "string": true, "instruction": true, "phrase": true, "message": true,
	"payload": true, "prompt": true,
	"effect": true, "ended": true, "verbatim": true, "word": true, "roughly": true,
	"wrote": true, "written": true, "typed": true, "entered": true, "posted": true,
	"pasted": true, "left": true, "field": true, "box": true, "notes": true,
	"form": true, "chat": true, "review": true, "comments": true, "section": true,
	"bio": true, "profile": true, "column": true, "description": true, "title": true,
	"ticket": true, "listing": true,
}

// closingQuote returns the offset in s of the quote mark closing a
// quotation, or -1. A straight single quote closes only where no letter
// follows it, so "don't" does not end 'the example'.
func closingQuote(s string, closer rune) int {
	for off := 0; off < len(s); {
		j := strings.IndexRune(s[off:], closer)
		if j < 0 {
			return -1
		}
		at := off + j
		next := at + utf8.RuneLen(closer)
		if closer != '\'' || next >= len(s) {
			return at
		}
		if r, _ := utf8.DecodeRuneInString(s[next:]); !unicode.IsLetter(r) {
			return at
		}
		off = next
	}
	return -1
}

// classifyQuoted scores each quoted example of a text on its own and
// reports one that reaches the threshold at low severity: visible in
// findings and events, not enough to flag.
func (d *Detector) classifyQuoted(fs []Finding, kind Kind, path string, quotes []string) []Finding {
	scored := 0
	for _, q := range quotes {
		if scored == maxQuotedScored {
			break
		}
		if len(strings.Fields(q)) < minClassifyWords {
			continue
		}
		scored++
		ps, err := d.cls.worst(kind, q, nil)
		if err != nil || ps.part == "" || ps.score < d.classifierThreshold(kind) {
			// An embedding failure is reported by the scan of the text
			// around the quotation, which embeds the same way.
			continue
		}
		fs = append(fs, classifierFinding(SeverityLow, "quoted_example", path, ps))
	}
	return fs
}
