package poison

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// normalized is a string prepared for matching: invisible characters
// removed (and counted), full-width ASCII folded, CR and tabs turned into
// plain whitespace, and the text of Unicode tag characters (ASCII smuggling)
// recovered.
type normalized struct {
	text      string
	tags      string // text hidden in U+E0020..U+E007E
	invisible int    // zero-width characters
	bidi      int    // bidirectional overrides
}

func normalize(s string, maxBytes int) normalized {
	if len(s) > maxBytes {
		cut := maxBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	var n normalized
	var b, tags strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '\r':
			continue
		case r == '\t' || r == '\v' || r == '\f' || r == '\u00a0' || r == '\u3000':
			b.WriteByte(' ')
		case r >= 0xE0000 && r <= 0xE007F:
			if r >= 0xE0020 && r <= 0xE007E {
				tags.WriteRune(r - 0xE0000)
			}
		case r == '\u200b' || r == '\u200c' || r == '\u2060' || r == '\u2061' || r == '\u2062' || r == '\u2063' || r == '\u2064' || r == '\ufeff' || r == '\u00ad' || r == '\u180e':
			n.invisible++
		case r == '\u200d': // zero-width joiner: legitimate inside emoji sequences
			continue
		case r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069' || r == '\u200e' || r == '\u200f':
			n.bidi++
		case r >= '\uff01' && r <= '\uff5e':
			b.WriteRune(r - 0xff01 + '!')
		case r == utf8.RuneError:
			b.WriteRune(r)
		case unicode.IsControl(r) && r != '\n':
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	n.text = b.String()
	n.tags = tags.String()
	return n
}

// segment is one unit of text that rules look at: a sentence, a table row,
// a line of code.
type segment struct {
	text  string // lower-cased (ASCII) for the built-in rules
	orig  string // as written, for user patterns
	start int    // byte offset in the normalized text
	// standalone: the segment is the whole of its line (a paragraph of one
	// sentence), as injected instructions usually are.
	standalone bool
	code       bool // inside a fenced block or looks like code
	table      bool // a markdown table row
	block      int  // index of the fenced code block it is in, or -1
	line       int
}

type document struct {
	text   string
	segs   []segment
	blocks []string // fenced code blocks, in order
	// blockAfter[i] is the index of the first code block that starts after
	// line i (or -1).
	lines      []string
	blockStart []int // line index where each block starts
	words      map[string]int
	nwords     int
}

var fenceRE = regexp.MustCompile("^\\s*(```|~~~)")

func parseDocument(text string) *document {
	d := &document{text: text, words: map[string]int{}}
	d.lines = strings.Split(text, "\n")
	off := 0
	inFence := false
	var cur strings.Builder
	for li, line := range d.lines {
		lineStart := off
		off += len(line) + 1
		if fenceRE.MatchString(line) {
			if inFence {
				d.blocks = append(d.blocks, cur.String())
				cur.Reset()
			} else {
				d.blockStart = append(d.blockStart, li)
			}
			inFence = !inFence
			continue
		}
		if inFence {
			cur.WriteString(line)
			cur.WriteByte('\n')
			if t := strings.TrimSpace(line); t != "" {
				// The segment starts where TrimSpace's text does: a tab
				// indent counts as much as a space.
				lead := len(line) - len(strings.TrimLeftFunc(line, unicode.IsSpace))
				// A plain sentence inside a fence is prose that injected
				// text has put there (or fences that do not pair up).
				code := !proseLine(t)
				d.segs = append(d.segs, segment{text: t, start: lineStart + lead, code: code, standalone: !code, block: len(d.blocks), line: li})
			}
			continue
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		lead := strings.Index(line, trimmed)
		if strings.HasPrefix(trimmed, "|") && strings.HasSuffix(trimmed, "|") && len(trimmed) > 1 {
			d.segs = append(d.segs, segment{text: trimmed, start: lineStart + lead, table: true, block: -1, line: li})
			for _, w := range contentWords(trimmed) {
				d.words[w]++
				d.nwords++
			}
			continue
		}
		code := looksLikeCode(trimmed)
		pieces := splitSentences(trimmed)
		for _, p := range pieces {
			d.segs = append(d.segs, segment{
				text: p.text, start: lineStart + lead + p.off,
				standalone: len(pieces) == 1, code: code, block: -1, line: li,
			})
		}
		if !code {
			for _, w := range contentWords(trimmed) {
				d.words[w]++
				d.nwords++
			}
		}
	}
	if inFence {
		d.blocks = append(d.blocks, cur.String())
	}
	for i := range d.segs {
		d.segs[i].orig = d.segs[i].text
		d.segs[i].text = asciiLower(d.segs[i].text)
	}
	for i := range d.blocks {
		d.blocks[i] = asciiLower(d.blocks[i])
	}
	for i := range d.lines {
		d.lines[i] = asciiLower(d.lines[i])
	}
	return d
}

// nextBlock returns the code that follows line li: the lines after it (an
// opening fence skipped) up to the next fence, at most 40 lines. It does not
// trust fence parity, which injected text can flip.
func (d *document) nextBlock(li int) string {
	var b strings.Builder
	i := li + 1
	for i < len(d.lines) && strings.TrimSpace(d.lines[i]) == "" {
		i++
	}
	if i < len(d.lines) && fenceRE.MatchString(d.lines[i]) {
		i++
	} else {
		return ""
	}
	for n := 0; i < len(d.lines) && n < 40 && !fenceRE.MatchString(d.lines[i]); i, n = i+1, n+1 {
		b.WriteString(d.lines[i])
		b.WriteByte('\n')
	}
	return b.String()
}

type piece struct {
	text string
	off  int
}

// splitSentences splits a line at sentence ends (. ! ? followed by space
// and a capital letter, quote or digit) and at field separators ("|").
func splitSentences(line string) []piece {
	var out []piece
	start := 0
	emit := func(end int) {
		t := line[start:end]
		lt := len(t)
		t = strings.TrimLeft(t, " ")
		off := start + (lt - len(t))
		t = strings.TrimRight(t, " ")
		if t != "" {
			out = append(out, piece{t, off})
		}
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '|' && !(i > 0 && line[i-1] == ' ' && i+1 < len(line) && line[i+1] == ' '):
			// A field separator ("...|CONTENT: ..."), not a shell pipe.
			emit(i)
			start = i + 1
		case c == '.' || c == '!' || c == '?':
			j := i + 1
			for j < len(line) && (line[j] == '"' || line[j] == '\'' || line[j] == ')') {
				j++
			}
			if j >= len(line) || line[j] != ' ' {
				continue
			}
			k := j
			for k < len(line) && line[k] == ' ' {
				k++
			}
			if k < len(line) {
				r, _ := utf8.DecodeRuneInString(line[k:])
				if unicode.IsUpper(r) || unicode.IsDigit(r) || r == '"' || r == '\'' || r == '(' || r == '[' || r == '<' {
					emit(j)
					start = k
					i = k - 1
				}
			}
		}
	}
	emit(len(line))
	return out
}

// codeStartRE is the code-line expression (codeLineRE in the tests) without its one unanchored branch ([;{}]\s*$),
// which endsLikeCode tests instead: with it the expression is tried at
// every offset of every line, which made it a fifth of a 4 KB output scan.
var codeStartRE = regexp.MustCompile(`^(?:#include|import |from \S+ import|def |class |return\b|var |let |const |func |package |public |private |static |if \(|for \(|while \(|} ?else|//|/\*|\*/|#!|@\w+\(|print\(|console\.)|^[\w.\[\]]+\s*(?:=|\+=|-=)\s*\S|^\s*[})\]]`)

// endsLikeCode is [;{}]\s*$ (\s being [\t\n\f\r ]).
func endsLikeCode(line string) bool {
	t := strings.TrimRight(line, "\t\n\f\r ")
	return t != "" && strings.IndexByte(";{}", t[len(t)-1]) >= 0
}

// mayStartCode is false when codeStartRE cannot match: its branches need
// one of these first bytes, an '=', or a closing bracket after leading
// space. Most prose lines fail all three and skip the expression.
func mayStartCode(line string) bool {
	if line == "" {
		return false
	}
	if strings.IndexByte("#ifdcrvlpsw}/*@", line[0]) >= 0 || strings.IndexByte(line, '=') >= 0 {
		return true
	}
	t := strings.TrimLeft(line, "\t\n\f\r ")
	return t != "" && strings.IndexByte("})]", t[0]) >= 0
}

func looksLikeCode(line string) bool {
	if endsLikeCode(line) || mayStartCode(line) && codeStartRE.MatchString(line) {
		return true
	}
	// Dense punctuation typical of code: calls, indexing, operators.
	sym := 0
	for _, c := range line {
		switch c {
		case '(', ')', '[', ']', '{', '}', '=', ';', '<', '>', '_':
			sym++
		}
	}
	return sym*8 > len(line) && len(line) > 8
}

// proseLine reports whether a line inside a code fence reads as a sentence:
// not code, not a comment, six or more words, mostly letters.
func proseLine(t string) bool {
	if looksLikeCode(t) || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "//") || strings.HasPrefix(t, "*") || strings.HasPrefix(t, ">>>") || strings.HasPrefix(t, "--") {
		return false
	}
	if len(strings.Fields(t)) < 6 {
		return false
	}
	letters := 0
	for _, r := range t {
		if unicode.IsLetter(r) || r == ' ' {
			letters++
		}
	}
	return letters*10 >= utf8.RuneCountInString(t)*9
}

var wordRE = regexp.MustCompile(`[\p{L}][\p{L}\p{N}']*`)

// words returns what wordRE.FindAllString(s, -1) does, without the regular
// expression's cost (a test compares the two).
func words(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) {
			i += n
			continue
		}
		j := i + n
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if !unicode.IsLetter(r) && !unicode.IsNumber(r) && r != '\'' {
				break
			}
			j += n
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`about above after again against also among another because been before being below between both could does doing down during each either every from further have having here hers herself himself into itself just more most much must myself never only other ought ours ourselves over same shall should some such than that their theirs them themselves then there these they this those through under until upon very want were what when where which while whom whose will with within without would your yours yourself yourselves please thanks thank the and for are but not you all any can had her was one our out day get has him his how its may new now old see two way who did let put say she too use like make made many well even back good much need know take come give some time year into just over also your than then them these want look first last long great little own right still find here thing tell ask work seem feel try leave call`) {
		m[w] = true
	}
	return m
}()

// contentWords returns the lower-cased words of four or more letters that
// are not stop words, stemmed crudely (trailing s removed).
func contentWords(s string) []string {
	var out []string
	for _, w := range words(s) {
		w = strings.ToLower(strings.Trim(w, "'"))
		if utf8.RuneCountInString(w) < 4 || stopwords[w] {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

func stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

// cohesion is the fraction of a segment's content words that also occur
// elsewhere in the document, and the number of content words the rest of the
// document has. Injected tasks ("Break down the plot of ...") share almost
// nothing with the email, table or code around them.
func (d *document) cohesion(s string) (float64, int) {
	ws := contentWords(s)
	if len(ws) == 0 {
		return 1, d.nwords
	}
	own := map[string]int{}
	for _, w := range ws {
		own[w]++
	}
	shared := 0
	for _, w := range ws {
		if d.words[w]-own[w] > 0 {
			shared++
		}
	}
	return float64(shared) / float64(len(ws)), d.nwords - len(ws)
}

// ---- input schemas ----

func normalizeSchema(v any) any {
	var raw []byte
	switch x := v.(type) {
	case nil:
		return nil
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	case string:
		t := strings.TrimSpace(x)
		if !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
			return x
		}
		raw = []byte(t)
	case map[string]any, []any, float64, bool:
		return x
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return nil
		}
		raw = b
	}
	var out any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		return string(raw)
	}
	return out
}

const maxSchemaDepth = 64

var identRE = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*$`)

func joinPath(base, key string) string {
	if identRE.MatchString(key) {
		return base + "." + key
	}
	return base + "[" + strconv.Quote(key) + "]"
}

// walkStrings calls fn for every string value in v and for every key of a
// "properties" object (property names can carry text too), with its JSON
// path.
func walkStrings(v any, path string, depth int, fn func(path, s string)) {
	if depth > maxSchemaDepth {
		return
	}
	switch x := v.(type) {
	case string:
		if x != "" {
			fn(path, x)
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		isProps := strings.HasSuffix(path, ".properties") || strings.HasSuffix(path, "patternProperties")
		for _, k := range keys {
			p := joinPath(path, k)
			if isProps && len(k) > 24 {
				// Long property names are read by the model like text.
				fn(p, strings.NewReplacer("_", " ", "-", " ").Replace(k))
			}
			walkStrings(x[k], p, depth+1, fn)
		}
	case []any:
		for i, e := range x {
			walkStrings(e, path+"["+strconv.Itoa(i)+"]", depth+1, fn)
		}
	}
}
