package search

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/kljensen/snowball/english"
)

var stopwords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be by can do does for from how i if in into is it its
		me my of on or please so that the their them then there these this to use using was we what when which
		who will with would you your want need some any all`) {
		stopwords[w] = true
	}
}

// Tokenize splits text into normalised terms: identifiers are split at
// '_', '-', '.', '/' and camelCase, words are lowercased and stemmed, and
// stopwords dropped. Han, Hiragana, Katakana and Hangul characters become
// one term each, since those scripts do not separate words with spaces.
//
// Terms may share memory with text: copy one before keeping it.
func Tokenize(text string) []string {
	if isASCII(text) {
		return tokenizeASCII(text)
	}
	var out []string
	var word []rune
	flush := func() {
		if len(word) == 0 {
			return
		}
		for _, part := range splitCamel(word) {
			w := strings.ToLower(part)
			if stopwords[w] || w == "" {
				continue
			}
			if len(w) > 2 && isASCIILetters(w) {
				w = stem(w)
			}
			out = append(out, w)
		}
		word = word[:0]
	}
	for _, r := range text {
		switch {
		case isCJK(r):
			flush()
			out = append(out, string(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			word = append(word, r)
		default:
			flush()
		}
	}
	flush()
	return out
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func isLowerASCII(c byte) bool { return c >= 'a' && c <= 'z' }
func isUpperASCII(c byte) bool { return c >= 'A' && c <= 'Z' }
func isAlnumASCII(c byte) bool {
	return isLowerASCII(c) || isUpperASCII(c) || c >= '0' && c <= '9'
}

// tokenizeASCII is Tokenize for ASCII text, on bytes: the same terms,
// without decoding runes or consulting Unicode tables (indexing 20,000
// tools spent most of its time there).
func tokenizeASCII(text string) []string {
	var out []string
	emit := func(part string) {
		w := strings.ToLower(part)
		if stopwords[w] || w == "" {
			return
		}
		if len(w) > 2 && isASCIILetters(w) {
			w = stem(w)
		}
		out = append(out, w)
	}
	for i := 0; i < len(text); {
		for i < len(text) && !isAlnumASCII(text[i]) {
			i++
		}
		start := i
		for i < len(text) && isAlnumASCII(text[i]) {
			i++
		}
		word := text[start:i]
		s := 0
		for j := 1; j < len(word); j++ {
			prev, cur := word[j-1], word[j]
			if isLowerASCII(prev) && isUpperASCII(cur) ||
				isUpperASCII(prev) && isUpperASCII(cur) && j+1 < len(word) && isLowerASCII(word[j+1]) {
				emit(word[s:j])
				s = j
			}
		}
		if s < len(word) {
			emit(word[s:])
		}
	}
	return out
}

// splitCamel splits "getFileInfo" into get, File, Info and "HTTPServer" into
// HTTP, Server; digits stay with the letters before them.
func splitCamel(w []rune) []string {
	var parts []string
	start := 0
	for i := 1; i < len(w); i++ {
		prev, cur := w[i-1], w[i]
		boundary := unicode.IsLower(prev) && unicode.IsUpper(cur) ||
			unicode.IsUpper(prev) && unicode.IsUpper(cur) && i+1 < len(w) && unicode.IsLower(w[i+1])
		if boundary {
			parts = append(parts, string(w[start:i]))
			start = i
		}
	}
	return append(parts, string(w[start:]))
}

func isASCIILetters(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// stems memoises english.Stem: tool catalogues repeat a small vocabulary,
// and stemming dominated indexing time (and its garbage) at 20,000 tools.
// The memo stops growing at maxStems words; later words are stemmed each
// time.
var (
	stems    sync.Map // lowercased word → stem
	nStems   atomic.Int64
	maxStems int64 = 200_000
)

func stem(w string) string {
	if s, ok := stems.Load(w); ok {
		return s.(string)
	}
	s := english.Stem(w, false)
	if nStems.Load() < maxStems {
		if s == w {
			s = strings.Clone(w) // do not pin the caller's text
		}
		if _, loaded := stems.LoadOrStore(strings.Clone(w), s); !loaded {
			nStems.Add(1)
		}
	}
	return s
}
