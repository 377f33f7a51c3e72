package poison

import (
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// scanText runs every rule of the kind over one string and appends the
// findings to fs.
func (d *Detector) scanText(fs []Finding, kind Kind, path, text string) []Finding {
	if text == "" {
		return fs
	}
	if d.cls != nil {
		// With the classifier a scan costs milliseconds: cache each string's
		// findings by content hash.
		key := d.cls.key(kind, path+"\x00"+text)
		if got, ok := d.cls.findings(key); ok {
			return append(fs, got...)
		}
		got := d.scanTextUncached(nil, kind, path, text, kind == KindOutput && d.screen)
		d.cls.storeFindings(key, got)
		return append(fs, got...)
	}
	return d.scanTextUncached(fs, kind, path, text, false)
}

// scanTextUncached runs the rules and the classifier over one string. With
// screened (outputs), the cheap first pass decides what is worth embedding:
// the classifier sees only the windows around the sentences it marks. It
// reads the normalised text, so invisible characters inside words do not
// hide them from it.
func (d *Detector) scanTextUncached(fs []Finding, kind Kind, path, text string, screened bool) []Finding {
	n := normalize(text, d.maxBytes)
	if n.tags != "" {
		fs = append(fs, newFinding(CatHiddenText, "unicode_tags", SeverityHigh, path, excerpt(n.tags, 0, min(len(n.tags), MaxContext))))
		// Scan the smuggled text as well.
		fs = d.scanNormalized(fs, kind, path, n.tags)
	}
	if n.bidi > 0 {
		sev := SeverityMedium
		if kind == KindOutput {
			sev = SeverityLow
		}
		fs = append(fs, newFinding(CatHiddenText, "bidi_override", sev, path, excerpt(n.text, 0, 0)))
	}
	if n.invisible > 0 {
		fs = append(fs, newFinding(CatHiddenText, "zero_width", SeverityLow, path, excerpt(n.text, 0, 0)))
	}
	fs = d.scanNormalized(fs, kind, path, n.text)
	if d.cls != nil {
		body, quotes := splitQuoted(n.text)
		var parts []string
		if screened {
			parts = screen(d.cls.models.OutputGate, d.cls.models.HashBits, body).windows(body)
		}
		if !screened || len(parts) > 0 {
			fs = d.classify(fs, kind, path, body, parts)
		}
		fs = d.classifyQuoted(fs, kind, path, quotes)
		if n.tags != "" {
			fs = d.classify(fs, kind, path, n.tags, nil)
		}
	}
	return fs
}

// classify adds a classifier finding when the worst part of text reaches
// the trained threshold. An embedding failure is reported as a low finding
// (the rules still ran) rather than dropped silently.
//
// parts, when given, are the pieces of text to score (the screen's
// windows); otherwise Parts(text).
func (d *Detector) classify(fs []Finding, kind Kind, path, text string, parts []string) []Finding {
	if n := len(strings.Fields(text)); n < minClassifyWords || path == "name" && n < minClassifyNameWords {
		// Type names, enum values and identifiers carry no instruction.
		return fs
	}
	ps, err := d.cls.worst(kind, text, parts)
	if err != nil {
		f := newFinding(CatClassifier, "classifier_error", SeverityLow, path, excerpt(err.Error(), 0, MaxContext))
		f.Detector = "classifier"
		return append(fs, f)
	}
	if ps.part == "" || ps.score < d.classifierThreshold(kind) {
		return fs
	}
	return append(fs, classifierFinding(SeverityHigh, CatClassifier, path, ps))
}

// classifierFinding reports the classifier's worst part: its score and the
// sentence, secrets masked.
func classifierFinding(sev Severity, rule, path string, ps partScore) Finding {
	sentence := maskSecrets(ps.part)
	if utf8.RuneCountInString(sentence) > MaxSentence {
		sentence = string([]rune(sentence)[:MaxSentence])
	}
	f := newFinding(CatClassifier, rule, sev, path, excerpt(ps.part, 0, len(ps.part)))
	f.Detector, f.Score, f.Sentence = "classifier", math.Round(ps.score*1000)/1000, sentence
	return f
}

// classifierThreshold is the probability at which the classifier flags
// text of the kind.
func (d *Detector) classifierThreshold(kind Kind) float64 {
	if kind == KindOutput {
		return d.outScore
	}
	return d.defScore
}

func (d *Detector) scanNormalized(fs []Finding, kind Kind, path, text string) []Finding {
	doc := parseDocument(text)
	m := &match{doc: doc, kind: kind}
	x := newSegIndex(asciiLower(text), doc.segs)
	for _, r := range d.rules {
		if r.kinds&kind == 0 {
			continue
		}
		var cand []bool
		if !noPrefilter {
			cand = x.candidates(r)
			if cand != nil && !slices.Contains(cand, true) {
				continue
			}
		}
		sev := r.sev
		if kind == KindOutput && r.outSev != SeverityNone {
			sev = r.outSev
		}
		for i := range doc.segs {
			s := &doc.segs[i]
			if cand != nil && !cand[i] || !noPrefilter && !r.anywhere && !r.pre.fits(r, s, x, i) {
				continue
			}
			if kind == KindOutput && !r.anywhere && !inScope(r.scope, s) {
				continue
			}
			in := s.text
			if r.anywhere {
				in = s.orig
			}
			loc := r.re.FindStringSubmatchIndex(in)
			if loc == nil {
				continue
			}
			got := sev
			if r.check != nil {
				m.seg, m.loc, m.sev = s, loc, sev
				got = r.check(m)
				if got == SeverityNone {
					continue
				}
			}
			fs = append(fs, newFinding(r.category, r.name, got, path, excerpt(text, s.start+loc[0], s.start+loc[1])))
		}
	}
	return fs
}

// noPrefilter turns the literal prefilter off (tests compare the two).
var noPrefilter bool

func inScope(sc scope, s *segment) bool {
	switch sc {
	case scopeProse:
		return !s.code && !s.table
	case scopeText:
		return !s.code
	case scopeCode:
		return s.code
	}
	return true
}

func newFinding(cat, rule string, sev Severity, path, ctx string) Finding {
	return Finding{Category: cat, Severity: sev.String(), Path: path, Context: ctx, Rule: rule, sev: sev}
}

// minClassifyWords is the fewest words a string needs for the classifier to
// look at it.
const minClassifyWords = 3

// minClassifyNameWords is the fewest words (parts between _ and -) a tool
// name needs for the classifier: a name of a few words is an identifier
// ("confidentialledger_entries_append"), which the classifier, trained on
// sentences, misreads; a name as long as a sentence is read like one. The
// rules scan every long name.
const minClassifyNameWords = 5
