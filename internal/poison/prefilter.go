package poison

import (
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// A literal prefilter for the built-in rules. Every match of a rule's
// expression contains at least one of the strings requiredLiterals derives
// from it; a document (lower-cased) that contains none of them cannot match,
// and the expression is not run. The rules' expressions cost milliseconds
// per 4 KB output; most documents hold the words of few of them.

// requiredLiterals returns strings at least one of which every match of re
// contains, or nil when it cannot tell.
func requiredLiterals(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return []string{string(re.Rune)}
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiterals(re.Sub[0])
		}
	case syntax.OpConcat:
		var best []string
		for _, sub := range re.Sub {
			if s := requiredLiterals(sub); s != nil && betterLiterals(s, best) {
				best = s
			}
		}
		return best
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			s := requiredLiterals(sub)
			if s == nil {
				return nil
			}
			out = append(out, s...)
		}
		return out
	}
	return nil
}

// betterLiterals prefers the set whose shortest string is longer (it rules
// out more documents), then the smaller set.
func betterLiterals(a, b []string) bool {
	if b == nil {
		return true
	}
	ma, mb := shortest(a), shortest(b)
	if ma != mb {
		return ma > mb
	}
	return len(a) < len(b)
}

func shortest(ss []string) int {
	n := -1
	for _, s := range ss {
		if n < 0 || len(s) < n {
			n = len(s)
		}
	}
	return n
}

// requiredSets returns sets of strings such that every match of re
// contains one string of each set, or nil when it cannot tell. The parts of
// a concatenation are all required, so each gives a set: "send ... data ...
// to" needs a verb, a noun and "to" in the same segment, where
// requiredLiterals keeps only the most selective part.
func requiredSets(re *syntax.Regexp) [][]string {
	switch re.Op {
	case syntax.OpConcat:
		var out [][]string
		for _, sub := range re.Sub {
			out = append(out, requiredSets(sub)...)
		}
		return out
	case syntax.OpCapture, syntax.OpPlus:
		return requiredSets(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredSets(re.Sub[0])
		}
		return nil
	}
	if l := requiredLiterals(re); l != nil {
		return [][]string{l}
	}
	return nil
}

// minLen returns the fewest bytes a match of re spans.
func minLen(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			n += runeBytes(r)
		}
		if re.Flags&syntax.FoldCase != 0 {
			return min(n, len(re.Rune)) // a fold may be shorter in UTF-8
		}
		return n
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return 0
		}
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= utf8.RuneError && utf8.RuneError <= re.Rune[i+1] {
				return 1 // an invalid byte matches U+FFFD
			}
		}
		return runeBytes(re.Rune[0]) // ranges are sorted
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minLen(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * minLen(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, sub := range re.Sub {
			n += minLen(sub)
		}
		return n
	case syntax.OpAlternate:
		n := -1
		for _, sub := range re.Sub {
			if m := minLen(sub); n < 0 || m < n {
				n = m
			}
		}
		return max(n, 0)
	}
	return 0
}

// runeBytes is the fewest bytes of text r matches: an invalid byte of the
// text reads as U+FFFD.
func runeBytes(r rune) int {
	if r == utf8.RuneError {
		return 1
	}
	return max(utf8.RuneLen(r), 1)
}

// needsNonASCII reports whether every match of re holds a byte above 0x7f
// (the homoglyph rule's Cyrillic and Greek letters): a pure ASCII segment,
// most of them, cannot match.
func needsNonASCII(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return false
		}
		for _, r := range re.Rune {
			if r >= utf8.RuneSelf {
				return true
			}
		}
	case syntax.OpCharClass:
		return len(re.Rune) > 0 && re.Rune[0] >= utf8.RuneSelf
	case syntax.OpCapture, syntax.OpPlus:
		return needsNonASCII(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min >= 1 && needsNonASCII(re.Sub[0])
	case syntax.OpConcat:
		return slices.ContainsFunc(re.Sub, needsNonASCII)
	case syntax.OpAlternate:
		return len(re.Sub) > 0 && !slices.ContainsFunc(re.Sub, func(s *syntax.Regexp) bool { return !needsNonASCII(s) })
	}
	return false
}

// prefilter is what every match of a rule needs, computed once.
type prefilter struct {
	once     sync.Once
	sets     [][]string // nil: always run the expression
	minLen   int        // bytes
	nonASCII bool       // a byte above 0x7f
}

// fits reports whether a segment is long enough for a match of the rule
// and holds a non-ASCII byte when a match needs one.
func (p *prefilter) fits(r *rule, s *segment, x *segIndex, i int) bool {
	p.literalSets(r)
	return len(s.text) >= p.minLen && (!p.nonASCII || x.nonASCII[i])
}

// literalSets returns sets such that every match of the rule holds one
// literal of each set; nil when it has none.
func (p *prefilter) literalSets(r *rule) [][]string {
	p.once.Do(func() {
		if r.anywhere {
			return // user patterns match the original text, case folded
		}
		parsed, err := syntax.Parse(r.re.String(), syntax.Perl)
		if err != nil {
			return
		}
		parsed = parsed.Simplify()
		p.minLen, p.nonASCII = minLen(parsed), needsNonASCII(parsed)
		for _, set := range requiredSets(parsed) {
			if shortest(set) >= 2 { // one byte rules out nothing
				p.sets = append(p.sets, set)
			}
		}
	})
	return p.sets
}

// mayMatch reports whether low (the lower-cased document) holds a literal
// of each of the rule's required sets, or the rule has none.
func (r *rule) mayMatch(low string) bool {
	for _, set := range r.pre.literalSets(r) {
		found := false
		for _, l := range set {
			if strings.Contains(low, l) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// segIndex narrows the prefilter from the document to its segments: a rule
// runs on a segment only when one of its literals lies inside that segment,
// since every match in a segment contains one. Most documents hold a
// rule's words somewhere (a "to", a "your") but in few of their sentences,
// and the expressions cost per segment. Each literal's occurrences are
// found once per document, whichever rules share it.
type segIndex struct {
	low  string
	segs []segment
	// ordered: segments are disjoint byte ranges of low in increasing
	// order, so an occurrence belongs to at most one, found by binary
	// search. parseDocument builds them so; otherwise each segment is
	// searched on its own.
	ordered bool
	memo    map[string][]int // literal -> indexes of the segments holding it
	byLit   [][]int          // built-in literal id -> the same, filled by index
	marks   []bool
	set     []bool // scratch for candidates
	// nonASCII[i]: segment i holds a byte above 0x7f.
	nonASCII []bool
}

func newSegIndex(low string, segs []segment) *segIndex {
	x := &segIndex{low: low, segs: segs, ordered: true, memo: map[string][]int{}, marks: make([]bool, len(segs)), set: make([]bool, len(segs))}
	x.nonASCII = make([]bool, len(segs))
	end := 0
	for i := range segs {
		s := &segs[i]
		for j := 0; j < len(s.text) && !x.nonASCII[i]; j++ {
			x.nonASCII[i] = s.text[j] >= utf8.RuneSelf
		}
		if x.ordered && (s.start < end || s.start+len(s.text) > len(low) || low[s.start:s.start+len(s.text)] != s.text) {
			x.ordered = false
		}
		end = s.start + len(s.text)
	}
	return x
}

// holding returns the indexes of the segments that contain lit.
func (x *segIndex) holding(lit string) []int {
	if x.ordered {
		if x.byLit == nil {
			x.index()
		}
		if id, ok := builtinLiterals().ids[lit]; ok {
			return x.byLit[id]
		}
	}
	if got, ok := x.memo[lit]; ok {
		return got
	}
	var out []int
	if !x.ordered {
		for i := range x.segs {
			if strings.Contains(x.segs[i].text, lit) {
				out = append(out, i)
			}
		}
	} else {
		for off := 0; ; {
			j := strings.Index(x.low[off:], lit)
			if j < 0 {
				break
			}
			p := off + j
			off = p + 1
			// The last segment starting at or before p.
			i := sort.Search(len(x.segs), func(i int) bool { return x.segs[i].start > p }) - 1
			if i < 0 || p+len(lit) > x.segs[i].start+len(x.segs[i].text) {
				continue // between segments, or across a boundary
			}
			if len(out) == 0 || out[len(out)-1] != i {
				out = append(out, i)
			}
			// Later occurrences in the same segment add nothing.
			off = max(off, x.segs[i].start+len(x.segs[i].text))
		}
	}
	x.memo[lit] = out
	return out
}

// index finds the segments holding each built-in literal in one pass over
// the document (ordered segments only).
func (x *segIndex) index() {
	sc := builtinLiterals()
	x.byLit = make([][]int, len(sc.lens))
	k := 0
	sc.scan(x.low, func(id, end int) {
		// The segment holding the occurrence, if any, is the first one
		// ending at or after its end; ends only grow.
		for k < len(x.segs) && x.segs[k].start+len(x.segs[k].text) < end {
			k++
		}
		if k == len(x.segs) || end-sc.lens[id] < x.segs[k].start {
			return
		}
		if l := x.byLit[id]; len(l) == 0 || l[len(l)-1] != k {
			x.byLit[id] = append(l, k)
		}
	})
}

// litScanner finds every occurrence of a fixed set of literals, overlapping
// ones included, in one pass: an Aho-Corasick automaton compiled to a
// transition table over the bytes the literals use. (Searching for each of
// the built-in rules' ~700 literals in turn cost more than the rules'
// expressions did once restricted to the segments holding them.)
type litScanner struct {
	ids   map[string]int
	lens  []int
	class [256]uint16 // byte -> column; 0 for bytes no literal holds
	ncls  int
	delta []int32   // state*ncls + class -> next state
	out   [][]int32 // ids of the literals ending at a state, suffixes included
}

func newLitScanner(lits []string) *litScanner {
	s := &litScanner{ids: map[string]int{}, ncls: 1}
	var uniq []string
	for _, l := range lits {
		if _, ok := s.ids[l]; ok || l == "" {
			continue
		}
		s.ids[l] = len(uniq)
		s.lens = append(s.lens, len(l))
		uniq = append(uniq, l)
		for i := 0; i < len(l); i++ {
			if s.class[l[i]] == 0 {
				s.class[l[i]] = uint16(s.ncls)
				s.ncls++
			}
		}
	}
	var trie [][]int32
	newState := func() int32 {
		row := make([]int32, s.ncls)
		for i := range row {
			row[i] = -1
		}
		trie = append(trie, row)
		s.out = append(s.out, nil)
		return int32(len(trie) - 1)
	}
	newState() // the root, 0
	for id, l := range uniq {
		st := int32(0)
		for i := 0; i < len(l); i++ {
			c := s.class[l[i]]
			if trie[st][c] < 0 {
				n := newState()
				trie[st][c] = n
			}
			st = trie[st][c]
		}
		s.out[st] = append(s.out[st], int32(id))
	}
	// Breadth first, so a state's fallback (a shallower state) is complete
	// before the state is.
	fail := make([]int32, len(trie))
	var queue []int32
	for c := range s.ncls {
		if n := trie[0][c]; n > 0 {
			queue = append(queue, n)
		} else {
			trie[0][c] = 0
		}
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		s.out[st] = append(s.out[st], s.out[fail[st]]...)
		for c := range s.ncls {
			if n := trie[st][c]; n >= 0 {
				fail[n] = trie[fail[st]][c]
				queue = append(queue, n)
			} else {
				trie[st][c] = trie[fail[st]][c]
			}
		}
	}
	s.delta = make([]int32, 0, len(trie)*s.ncls)
	for _, row := range trie {
		s.delta = append(s.delta, row...)
	}
	return s
}

// scan calls hit with the literal's id and the offset just past it, for
// every occurrence, in order of end offset.
func (s *litScanner) scan(text string, hit func(id, end int)) {
	st := int32(0)
	for i := 0; i < len(text); i++ {
		st = s.delta[int(st)*s.ncls+int(s.class[text[i]])]
		for _, id := range s.out[st] {
			hit(int(id), i+1)
		}
	}
}

// builtinLiterals is the scanner over every built-in rule's required
// literals, built on first use.
var builtinLiterals = sync.OnceValue(func() *litScanner {
	var lits []string
	for _, r := range builtinRules {
		for _, set := range r.pre.literalSets(r) {
			lits = append(lits, set...)
		}
	}
	return newLitScanner(lits)
})

// candidates returns, for each segment, whether rule r may match in it (it
// holds a literal of each of r's sets), or nil when r has no required
// literals (it runs everywhere). The slice is reused by the next call.
func (x *segIndex) candidates(r *rule) []bool {
	sets := r.pre.literalSets(r)
	if sets == nil {
		return nil
	}
	for k, set := range sets {
		clear(x.set)
		for _, l := range set {
			for _, i := range x.holding(l) {
				x.set[i] = true
			}
		}
		if k == 0 {
			copy(x.marks, x.set)
			continue
		}
		for i, ok := range x.set {
			x.marks[i] = x.marks[i] && ok
		}
	}
	return x.marks
}

// BuiltinRulePatterns returns each built-in rule's name and expression
// (written in lower case, matched against ASCII-lower-cased text), for
// audits of the rule vocabulary (go run ./bench/poisoning -rule-audit).
func BuiltinRulePatterns() [][2]string {
	out := make([][2]string, 0, len(builtinRules))
	for _, r := range builtinRules {
		out = append(out, [2]string{r.name, r.re.String()})
	}
	return out
}
