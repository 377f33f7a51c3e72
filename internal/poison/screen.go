package poison

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// The cheap first pass over tool outputs. Embedding a 4 KB result costs
// tens to hundreds of milliseconds on two cores, while most results are
// plain data. The screen reads the text once: it splits it into sentences
// and scores each with a lexical model (hashed word n-grams only, the output
// "gate" of classifier.json). Only the windows around the sentences it marks
// are embedded; an output with no marked sentence is not embedded at all.
// The rules still read every output: measured on attacks in styles the
// training rows lack, a lexical gate in front of the rules lost a third of
// what the rules catch.

// forEachWord calls fn with each word of low (already ASCII-lower-cased):
// the matches of [a-z0-9]+(?:['’][a-z]+)?, at most limit of them. It is the
// tokeniser of the hashed n-grams, written out because a regular expression
// costs microseconds per sentence.
func forEachWord(low string, limit int, fn func(w string)) {
	n := 0
	for i := 0; i < len(low) && n < limit; {
		if !isAlnum(low[i]) {
			i++
			continue
		}
		j := i
		for j < len(low) && isAlnum(low[j]) {
			j++
		}
		// An apostrophe (ASCII or U+2019) followed by letters belongs to
		// the word: "don't", "it’s".
		k := -1
		if j < len(low) && low[j] == '\'' {
			k = j + 1
		} else if strings.HasPrefix(low[j:], "’") {
			k = j + len("’")
		}
		if k > 0 && k < len(low) && isLetter(low[k]) {
			for k < len(low) && isLetter(low[k]) {
				k++
			}
			j = k
		}
		fn(low[i:j])
		n++
		i = j
	}
}

func isAlnum(c byte) bool  { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' }

const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

func fnvAdd(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * fnvPrime
	}
	return h
}

// appendGrams appends the hash buckets (of 2^bits) of the word unigrams and
// bigrams of low to buf, sorted and without repeats.
func appendGrams(buf []int, low string, bits int) []int {
	mask := uint32(1)<<bits - 1
	start := len(buf)
	prev := ""
	forEachWord(low, 256, func(w string) {
		buf = append(buf, int(fnvAdd(fnvOffset, w)&mask))
		if prev != "" {
			h := fnvAdd(fnvAdd(fnvOffset, prev), " ")
			buf = append(buf, int(fnvAdd(h, w)&mask))
		}
		prev = w
	})
	slices.Sort(buf[start:])
	return append(buf[:start], slices.Compact(buf[start:])...)
}

// minScreenWords is the fewest words a sentence needs for the gate to
// score it: shorter ones ("import (", "}") are code and markup debris, on
// which a lexical model knows nothing and falls back to its bias.
const minScreenWords = 4

// ScreenWords reports whether a sentence has enough words for the gate.
func ScreenWords(s string) bool {
	n := 0
	forEachWord(asciiLower(s), minScreenWords, func(string) { n++ })
	return n >= minScreenWords
}

// span is a sentence of a screened text: byte offsets into the text.
type span struct{ start, end int }

// maxSentenceBytes cuts run-on "sentences" (minified JSON, base64) so that
// one window stays about the size the classifier was trained on.
const maxSentenceBytes = 600

// ScreenSentences splits text into the sentences the screen scores: at line
// ends, at . ! ? followed by a space (a closing quote or bracket may come
// between), at "|" and at "; ". Pieces are at most maxSentenceBytes.
func ScreenSentences(text string) []string {
	var out []string
	for _, s := range sentenceSpans(text) {
		out = append(out, text[s.start:s.end])
	}
	return out
}

func sentenceSpans(text string) []span {
	var out []span
	start := 0
	emit := func(end int) {
		for start < end && (text[start] == ' ' || text[start] == '\t' || text[start] == '\r') {
			start++
		}
		e := end
		for e > start && (text[e-1] == ' ' || text[e-1] == '\t' || text[e-1] == '\r') {
			e--
		}
		for e-start > maxSentenceBytes {
			cut := start + maxSentenceBytes
			if i := strings.LastIndexByte(text[start:cut], ' '); i > maxSentenceBytes/2 {
				cut = start + i
			}
			for cut > start && !utf8.RuneStart(text[cut]) {
				cut--
			}
			out = append(out, span{start, cut})
			start = cut
		}
		if e > start {
			out = append(out, span{start, e})
		}
		start = end + 1
	}
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '\n', '|':
			emit(i)
		case ';':
			if i+1 < len(text) && (text[i+1] == ' ' || text[i+1] == '\n') {
				emit(i)
			}
		case '.', '!', '?':
			j := i + 1
			for j < len(text) && (text[j] == '"' || text[j] == '\'' || text[j] == ')' || text[j] == ']') {
				j++
			}
			if j == len(text) || text[j] == ' ' || text[j] == '\n' || text[j] == '\t' {
				emit(j) // the stop stays with its sentence; the space goes
				i = j
			}
		}
	}
	emit(len(text))
	return out
}

// screenResult is what the first pass found in an output.
type screenResult struct {
	sents      []span
	suspicious []int     // indexes into sents whose gate score reaches the gate threshold, highest first
	scores     []float64 // gate score of each suspicious sentence
}

// screen scores every sentence of text with the gate model.
func screen(gate *LinearModel, bits int, text string) screenResult {
	low := asciiLower(text)
	r := screenResult{sents: sentenceSpans(low)}
	var buf []int
	for i, s := range r.sents {
		if !ScreenWords(low[s.start:s.end]) {
			continue
		}
		buf = appendGrams(buf[:0], low[s.start:s.end], bits)
		if sc := gate.Score(nil, nil, nil, buf); sc >= gate.Threshold {
			r.suspicious = append(r.suspicious, i)
			r.scores = append(r.scores, sc)
		}
	}
	// Highest first, so that the windows embedded are those of the most
	// instruction-like sentences.
	idx := make([]int, len(r.suspicious))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmpDesc(r.scores[a], r.scores[b]) })
	sus, scs := make([]int, len(idx)), make([]float64, len(idx))
	for i, j := range idx {
		sus[i], scs[i] = r.suspicious[j], r.scores[j]
	}
	r.suspicious, r.scores = sus, scs
	return r
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// maxScreenSentences bounds the sentences whose windows are embedded for
// one output (three windows each): an output with many instruction-like
// sentences costs at most a dozen embeddings.
const maxScreenSentences = 4

// windows returns the parts the classifier embeds for the suspicious
// sentences of a screened text: each such sentence, and it with its
// neighbour on either side.
func (r screenResult) windows(text string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(a, b int) {
		s := strings.Join(strings.Fields(text[r.sents[a].start:r.sents[b].end]), " ")
		s = clip(s, maxPartBytes)
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for n, i := range r.suspicious {
		if n == maxScreenSentences {
			break
		}
		add(i, i)
		if i > 0 {
			add(i-1, i)
		}
		if i+1 < len(r.sents) {
			add(i, i+1)
		}
	}
	return out
}
