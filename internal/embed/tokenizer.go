package embed

import (
	"encoding/json"
	"fmt"
	"os"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxTokens is the sequence length all-MiniLM-L6-v2 was trained with; longer
// inputs are truncated to this many tokens, [CLS] and [SEP] included.
const MaxTokens = 256

// Tokenizer is a Hugging Face BERT WordPiece tokenizer loaded from a
// tokenizer.json (BertNormalizer, BertPreTokenizer, WordPiece model). The
// truncation and padding settings stored in the file are ignored: Encode
// truncates to the given maximum and never pads.
type Tokenizer struct {
	vocab        map[string]int32 // word-initial pieces
	cont         map[string]int32 // continuation pieces, without the "##" prefix
	unk          int32
	cls, sep     int32
	maxWordChars int

	cleanText, chineseChars, stripAccents, lowercase bool
}

type tokenizerJSON struct {
	Normalizer *struct {
		Type               string `json:"type"`
		CleanText          *bool  `json:"clean_text"`
		HandleChineseChars *bool  `json:"handle_chinese_chars"`
		StripAccents       *bool  `json:"strip_accents"`
		Lowercase          *bool  `json:"lowercase"`
	} `json:"normalizer"`
	PreTokenizer *struct {
		Type string `json:"type"`
	} `json:"pre_tokenizer"`
	Model struct {
		Type                    string           `json:"type"`
		UnkToken                string           `json:"unk_token"`
		ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
		MaxInputCharsPerWord    int              `json:"max_input_chars_per_word"`
		Vocab                   map[string]int32 `json:"vocab"`
	} `json:"model"`
}

// LoadTokenizer reads a Hugging Face tokenizer.json describing a BERT
// WordPiece tokenizer.
func LoadTokenizer(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("embed: reading tokenizer: %w", err)
	}
	t, err := ParseTokenizer(data)
	if err != nil {
		return nil, fmt.Errorf("embed: %s: %w", path, err)
	}
	return t, nil
}

// ParseTokenizer parses the contents of a tokenizer.json.
func ParseTokenizer(data []byte) (*Tokenizer, error) {
	var tj tokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, fmt.Errorf("invalid tokenizer JSON: %w", err)
	}
	if tj.Model.Type != "WordPiece" {
		return nil, fmt.Errorf("unsupported tokenizer model %q (want WordPiece)", tj.Model.Type)
	}
	if tj.Normalizer == nil || tj.Normalizer.Type != "BertNormalizer" {
		return nil, fmt.Errorf("unsupported normalizer (want BertNormalizer)")
	}
	if tj.PreTokenizer == nil || tj.PreTokenizer.Type != "BertPreTokenizer" {
		return nil, fmt.Errorf("unsupported pre_tokenizer (want BertPreTokenizer)")
	}
	if len(tj.Model.Vocab) == 0 {
		return nil, fmt.Errorf("empty WordPiece vocabulary")
	}
	prefix := "##"
	if tj.Model.ContinuingSubwordPrefix != nil {
		prefix = *tj.Model.ContinuingSubwordPrefix
	}
	t := &Tokenizer{
		vocab:        make(map[string]int32, len(tj.Model.Vocab)),
		cont:         make(map[string]int32, 6000),
		maxWordChars: tj.Model.MaxInputCharsPerWord,
		cleanText:    boolOr(tj.Normalizer.CleanText, true),
		chineseChars: boolOr(tj.Normalizer.HandleChineseChars, true),
		lowercase:    boolOr(tj.Normalizer.Lowercase, true),
	}
	// strip_accents: null means "follow lowercase" (as in BERT).
	t.stripAccents = boolOr(tj.Normalizer.StripAccents, t.lowercase)
	if t.maxWordChars <= 0 {
		t.maxWordChars = 100
	}
	n := int32(len(tj.Model.Vocab))
	for tok, id := range tj.Model.Vocab {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("vocabulary id %d for %q out of range [0,%d)", id, tok, n)
		}
		if prefix != "" && len(tok) > len(prefix) && tok[:len(prefix)] == prefix {
			t.cont[tok[len(prefix):]] = id
		}
		t.vocab[tok] = id
	}
	var ok bool
	unk := tj.Model.UnkToken
	if unk == "" {
		unk = "[UNK]"
	}
	for _, sp := range []struct {
		name string
		dst  *int32
	}{{unk, &t.unk}, {"[CLS]", &t.cls}, {"[SEP]", &t.sep}} {
		if *sp.dst, ok = t.vocab[sp.name]; !ok {
			return nil, fmt.Errorf("special token %s missing from vocabulary", sp.name)
		}
	}
	return t, nil
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// VocabSize returns the number of entries in the vocabulary.
func (t *Tokenizer) VocabSize() int { return len(t.vocab) }

// Encode returns the token ids of text: [CLS], WordPiece tokens, [SEP],
// truncated to at most maxTokens ids (maxTokens <= 2 means no limit).
func (t *Tokenizer) Encode(text string, maxTokens int) []int32 {
	ids := make([]int32, 1, 16)
	ids[0] = t.cls
	limit := -1
	if maxTokens > 2 {
		limit = maxTokens - 1 // room for [SEP]
	}
	norm := t.normalize(text)
	// BertPreTokenizer: split on whitespace, isolate each punctuation char.
	start := -1
	for i, r := range norm {
		if limit >= 0 && len(ids) >= limit {
			break
		}
		switch {
		case unicode.IsSpace(r):
			if start >= 0 {
				ids = t.wordPiece(ids, norm[start:i])
				start = -1
			}
		case isPunct(r):
			if start >= 0 {
				ids = t.wordPiece(ids, norm[start:i])
				start = -1
			}
			ids = t.wordPiece(ids, string(r))
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 && (limit < 0 || len(ids) < limit) {
		ids = t.wordPiece(ids, norm[start:])
	}
	if limit >= 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	return append(ids, t.sep)
}

// wordPiece appends the greedy longest-match-first WordPiece split of word.
func (t *Tokenizer) wordPiece(ids []int32, word string) []int32 {
	if utf8.RuneCountInString(word) > t.maxWordChars {
		return append(ids, t.unk)
	}
	mark := len(ids)
	for start := 0; start < len(word); {
		end := len(word)
		found := false
		var id int32
		for end > start {
			if start == 0 {
				id, found = t.vocab[word[start:end]]
			} else {
				id, found = t.cont[word[start:end]]
			}
			if found {
				break
			}
			// step back one rune
			_, sz := utf8.DecodeLastRuneInString(word[start:end])
			end -= sz
		}
		if !found {
			return append(ids[:mark], t.unk)
		}
		ids = append(ids, id)
		start = end
	}
	return ids
}

// normalize applies the BertNormalizer steps: clean text, space out CJK
// characters, strip accents (NFD, drop Mn) and lowercase.
func (t *Tokenizer) normalize(s string) string {
	buf := make([]rune, 0, len(s))
	for _, r := range s {
		if t.cleanText {
			if r == 0 || r == utf8.RuneError || isControl(r) {
				continue
			}
			if unicode.IsSpace(r) {
				r = ' '
			}
		}
		if t.chineseChars && isCJK(r) {
			buf = append(buf, ' ', r, ' ')
			continue
		}
		buf = append(buf, r)
	}
	out := string(buf)
	if t.stripAccents {
		out = norm.NFD.String(out)
	}
	if !t.stripAccents && !t.lowercase {
		return out
	}
	buf = buf[:0]
	for _, r := range out {
		if t.stripAccents && unicode.Is(unicode.Mn, r) {
			continue
		}
		if t.lowercase {
			r = unicode.ToLower(r)
		}
		buf = append(buf, r)
	}
	return string(buf)
}

// isControl mirrors HF tokenizers: \t \n \r are whitespace, anything in the
// Unicode "Other" categories (Cc, Cf, Cs, Co, Cn) is a control character.
func isControl(r rune) bool {
	switch r {
	case '\t', '\n', '\r':
		return false
	}
	if r < 0x80 {
		return r < 0x20 || r == 0x7f
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs) || !unicode.In(r, assigned...)
}

var assigned = []*unicode.RangeTable{
	unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs,
}

func isPunct(r rune) bool {
	if r < 128 {
		return (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126)
	}
	return unicode.IsPunct(r)
}

func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}
