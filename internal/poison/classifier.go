package poison

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/embed"
)

// The learned detector: a logistic regression (or, when the weights file
// holds a hidden layer, a one-hidden-layer MLP) over MiniLM vectors of a
// part of the text (a sentence, two adjacent sentences, or the whole text
// when it is short), optionally learned attention poolings of its token
// vectors, and a few structural features. A text scores as its worst part. The weights are trained
// offline by `go run ./bench/poisoning -train` (see bench/poisoning/DATA.md
// for the data) and embedded from classifier.json.

//go:embed classifier.json
var builtinModelsJSON []byte

// LinearModel is one trained classifier: a logistic regression, or, when
// Hidden is set, a shallow MLP whose hidden layer reads the embedding and
// structural features (the hashed n-grams stay a linear term of the output).
// A model with both Weights and Hidden adds the two terms (an ensemble of a
// logistic regression and an MLP, each weighed by half).
type LinearModel struct {
	// Weights has Dim embedding weights followed by one weight per entry of
	// FeatureNames; empty in a plain MLP.
	Weights []float32 `json:"weights"`
	// Hidden is the MLP's ReLU layer; nil in a logistic regression.
	Hidden *HiddenLayer `json:"hidden,omitempty"`
	// Hashed has one weight per bucket of the hashed word unigrams and
	// bigrams (Models.HashBits); the lexical half of the model.
	Hashed []float32 `json:"hashed"`
	Bias   float32   `json:"bias"`
	// Threshold is the probability at or above which a part is flagged.
	Threshold float64 `json:"threshold"`
	// Attention, when set, pools the part's token vectors with learned
	// queries; its pooled vectors follow the structural features in
	// Weights. Only with a logistic regression (no Hidden).
	Attention *Attention `json:"attention,omitempty"`
}

// Attention is a set of learned poolings over a part's token vectors (the
// outputs of Layers, side by side). Each token row is standardised with
// Mean and Scale; head k weighs token t by softmax_t(Query_k · row_t) and
// yields the weighted mean of the standardised rows. A mean dilutes the one
// clause of a sentence that asks for something; a learned weighting can
// find it wherever it is.
type Attention struct {
	Layers []int `json:"layers"`
	Heads  int   `json:"heads"`
	// Mean and Scale (1/standard deviation) have one entry per dimension
	// of a token row; Query has Heads rows of as many.
	Mean  []float32 `json:"mean"`
	Scale []float32 `json:"scale"`
	Query []float32 `json:"query"`
}

// Width is the length of a token row and of each head's pooled vector.
func (a *Attention) Width() int { return len(a.Mean) }

func (a *Attention) validate(layers int) error {
	w := len(a.Mean)
	if a.Heads <= 0 || a.Heads > 64 || len(a.Layers) == 0 || w == 0 || w%len(a.Layers) != 0 || len(a.Scale) != w || len(a.Query) != a.Heads*w {
		return fmt.Errorf("attention: %d heads over layers %v need mean and scale of one width and %d×width query weights (have %d, %d, %d)", a.Heads, a.Layers, max(a.Heads, 0), len(a.Mean), len(a.Scale), len(a.Query))
	}
	for _, l := range a.Layers {
		if l < 1 || l > layers {
			return fmt.Errorf("attention: layer %d out of range 1..%d", l, layers)
		}
	}
	return nil
}

// Pool returns the heads' pooled vectors of one part's token rows (each
// Width() long), side by side.
func (a *Attention) Pool(tokens []float32) []float32 {
	w := a.Width()
	out := make([]float32, a.Heads*w)
	n := len(tokens) / w
	if n == 0 {
		return out
	}
	h := make([]float32, n*w)
	for t := range n {
		for j := range w {
			h[t*w+j] = (tokens[t*w+j] - a.Mean[j]) * a.Scale[j]
		}
	}
	s := make([]float64, n)
	for k := range a.Heads {
		q := a.Query[k*w : (k+1)*w]
		top := math.Inf(-1)
		for t := range n {
			var d float64
			for j, v := range h[t*w : (t+1)*w] {
				d += float64(q[j]) * float64(v)
			}
			s[t], top = d, max(top, d)
		}
		var sum float64
		for t := range s {
			s[t] = math.Exp(s[t] - top)
			sum += s[t]
		}
		p := out[k*w : (k+1)*w]
		for t := range n {
			c := float32(s[t] / sum)
			for j, v := range h[t*w : (t+1)*w] {
				p[j] += c * v
			}
		}
	}
	return out
}

// HiddenLayer is one ReLU layer of Units units over the Dim embedding
// dimensions and the structural features, and its output weights.
type HiddenLayer struct {
	Units int `json:"units"`
	// Weights is Units rows of Dim+len(FeatureNames) weights, row after row.
	Weights []float32 `json:"weights"`
	Bias    []float32 `json:"bias"`
	// Out weighs each unit's activation in the output logit.
	Out []float32 `json:"out"`
}

// Models are the trained classifiers for both kinds of text.
type Models struct {
	// EmbedModel is the embedder's ModelID the weights were trained on;
	// vectors of another model are meaningless to them.
	EmbedModel string `json:"embed_model"`
	// Pooling is how the embedder pools MiniLM's token vectors for the
	// weights (embed.ParsePooling; empty is "mean", semantic search's). The
	// classifier asks the embedder it is given for that pooling.
	Pooling string `json:"pooling,omitempty"`
	Dim     int    `json:"dim"`
	// Features lists the structural features in weight order.
	Features []string `json:"features"`
	// HashBits is log2 of the number of hashed n-gram buckets.
	HashBits   int          `json:"hash_bits"`
	Definition *LinearModel `json:"definition"`
	Output     *LinearModel `json:"output"`
	// OutputGate is the lexical first pass over outputs: hashed n-gram
	// weights only (no embedding weights). A sentence scoring below its
	// threshold is not embedded; an output with no such sentence and no
	// structural marker is clean without further work. Optional.
	OutputGate *LinearModel `json:"output_gate,omitempty"`
	// OutputDefinitionShare is the definition model's share of an output
	// part's logit: a part scores sigmoid((1-share)·output logit +
	// share·definition logit), and Output.Threshold applies to that. The
	// definition model learned from far more text aimed at the model than
	// the output model did; on writers neither had seen, a quarter of it
	// ranked attacked outputs better than the output model alone
	// (bench/poisoning/DATA.md). 0 scores outputs with the output model
	// alone.
	OutputDefinitionShare float64 `json:"output_definition_share,omitempty"`
	// Trained records the command and data that produced the weights.
	Trained string `json:"trained"`
}

// BuiltinModels returns the committed weights.
func BuiltinModels() (*Models, error) {
	var m Models
	if err := json.Unmarshal(builtinModelsJSON, &m); err != nil {
		return nil, fmt.Errorf("poison: classifier.json: %v", err)
	}
	return &m, m.validate()
}

func (m *Models) validate() error {
	if m.Pooling != "" {
		if _, err := embed.ParsePooling(m.Pooling); err != nil {
			return fmt.Errorf("poison: classifier: %v", err)
		}
	}
	if m.Dim <= 0 {
		return errors.New("poison: classifier: dim must be positive")
	}
	if len(m.Features) != len(FeatureNames) {
		return fmt.Errorf("poison: classifier: trained with %d structural features, this build has %d (retrain with go run ./bench/poisoning -train)", len(m.Features), len(FeatureNames))
	}
	for i, f := range m.Features {
		if f != FeatureNames[i] {
			return fmt.Errorf("poison: classifier: feature %d is %q, this build has %q (retrain)", i, f, FeatureNames[i])
		}
	}
	for name, lm := range map[string]*LinearModel{"definition": m.Definition, "output": m.Output} {
		if lm == nil {
			return fmt.Errorf("poison: classifier: no %s model", name)
		}
		in := m.Dim + len(FeatureNames)
		if a := lm.Attention; a != nil {
			if err := a.validate(maxAttentionLayer); err != nil {
				return fmt.Errorf("poison: classifier: %s model: %v", name, err)
			}
			if lm.Hidden != nil {
				return fmt.Errorf("poison: classifier: %s model: attention is only trained with a logistic regression, not with a hidden layer", name)
			}
			in += a.Heads * a.Width()
		}
		if h := lm.Hidden; h != nil {
			if h.Units <= 0 || h.Units > 1024 || len(h.Weights) != h.Units*in || len(h.Bias) != h.Units || len(h.Out) != h.Units || (len(lm.Weights) != 0 && len(lm.Weights) != in) {
				return fmt.Errorf("poison: classifier: %s model: hidden layer of %d units must have %d weights, %d biases, %d output weights and no or %d linear weights (has %d, %d, %d, %d)", name, h.Units, max(h.Units, 0)*in, h.Units, h.Units, in, len(h.Weights), len(h.Bias), len(h.Out), len(lm.Weights))
			}
		} else if len(lm.Weights) != in {
			return fmt.Errorf("poison: classifier: %s model has %d weights, want %d", name, len(lm.Weights), in)
		}
		want := 0
		if m.HashBits > 0 {
			want = 1 << m.HashBits
		}
		if m.HashBits < 0 || m.HashBits > 20 || len(lm.Hashed) != want {
			return fmt.Errorf("poison: classifier: %s model has %d hashed weights, want %d (hash_bits %d)", name, len(lm.Hashed), want, m.HashBits)
		}
	}
	if sh := m.OutputDefinitionShare; !(sh >= 0 && sh <= 1) {
		return fmt.Errorf("poison: classifier: output_definition_share %v is not between 0 and 1", sh)
	}
	if a, b := m.Definition.Attention, m.Output.Attention; m.OutputDefinitionShare > 0 && a != nil && b != nil && !slices.Equal(a.Layers, b.Layers) {
		return fmt.Errorf("poison: classifier: with output_definition_share the definition and output models must pool the same layers (%v, %v)", a.Layers, b.Layers)
	}
	if g := m.OutputGate; g != nil {
		if len(g.Weights) != 0 || m.HashBits <= 0 || len(g.Hashed) != 1<<m.HashBits {
			return fmt.Errorf("poison: classifier: output_gate must have no dense weights and %d hashed weights, has %d and %d", 1<<max(m.HashBits, 0), len(g.Weights), len(g.Hashed))
		}
	}
	return nil
}

// The structural features: small, generic cues a sentence embedding blurs.
// They are deliberately broad; the classifier weighs them.
var featureREs = []struct {
	name string
	re   *regexp.Regexp
}{
	{"addresses_model", re(`\b(?:assistant|ai|agent|llm|language model|the model|chatbot|claude|gpt)\b`)},
	{"directive", re(`\b(?:must|always|never|do not|don't|make sure|be sure to|required to|are required|have to|need to|from now on|instead)\b`)},
	{"calls_other_tool", re(`\b(?:call|invoke|run|use|execute|chain|trigger)\b[^.\n]{0,40}\b[a-z][a-z0-9]*_[a-z0-9_]+\b|\b[a-z0-9]+__[a-z0-9_]+\b`)},
	{"before_after", re(`\b(?:before|after|prior to|first|once|then|following)\b`)},
	{"url_or_email", re(`https?://|\bwww\.|[\w.+-]+@[\w-]+\.[a-z]{2,}|\b[a-z0-9-]+\.(?:com|net|org|io|co|biz|app|dev|xyz|top|info|cc|ru|me|link|pro|to|shop)\b`)},
	{"secret_path", re(`~/|\.ssh\b|id_rsa|id_ed25519|\.env\b|\.aws\b|credentials|\.netrc|\.npmrc|\.pgpass|\.bashrc|\.zshrc|\.profile\b|_history\b|/etc/(?:shadow|passwd)|kube/config|private key|seed phrase|cookies?\b|passwords?\b|api[ _]?keys?\b|tokens?\b`)},
	{"concealment", re(`\b(?:do not|don't|never|not) (?:tell|mention|inform|reveal|disclose|notify|show|surface|bring)|without (?:telling|informing|notifying|asking|mentioning)|\bsilently\b|\bsecretly\b|\bquietly\b|keep (?:this|it|quiet)|to yourself|(?:does not|doesn't|don't|do not) (?:need|have) to know|confidential|hidden`)},
	{"superiority", re(`\b(?:best|ultimate|superior|premium|advanced|definitive|top-rated|number one|award-winning|trusted by|outperforms|better than|most (?:accurate|reliable|trusted|advanced|popular)|\d+% of|prefer(?:red)?|priority|favou?r)\b`)},
	{"deprecation", re(`\b(?:deprecated|obsolete|disabled|retired|decommissioned|sunset|shut down|no longer|removed|legacy|broken|blocked)\b`)},
	{"validation_pretext", re(`\b(?:for|to|requires?|as part of) (?:the )?(?:validation|verification|verify|validate|confirm|auditing|audit|quality assurance|compliance|telemetry|calibrat\w*|authenticat\w*)`)},
	{"override", re(`\b(?:ignore|disregard|forget|override|supersede[sd]?|no longer apply|cancel+ed)\b`)},
	{"about_response", re(`\b(?:your (?:response|reply|answer|summary|output)|in your (?:reply|response|answer)|respond|reply (?:with|only|in)|when answering)\b`)},
	// The reader addressed as the program processing this text, by role
	// ("if you are an AI", "note for the reviewing agent") or by what it is
	// about to do with it ("before you summarise this page"): a document
	// written for people rarely speaks to its machine reader.
	{"addresses_reader", re(`\bif you(?:'re| are) (?:an? )?(?:ai|llm|bot|assistant|agent|model|automated|language model)\b|\b(?:whoever|anyone|anything|any (?:system|tool|program|process|model)) (?:is )?(?:reading|processing|summari[sz]ing|parsing|ingesting|handling) (?:this|these)\b|\b(?:reviewing|calling|processing|reading|automated|downstream|autonomous|ai|llm) (?:agent|assistant|system|model|reviewer|client|helper|bot)s?\b|\b(?:note|message|instructions?|reminder|notice|memo) (?:to|for) (?:the |any )?(?:reader|agent|assistant|model|ai|bot|helper|llm)s?\b|\b(?:when|before|after|while|once) (?:you )?(?:summari[sz]|answer|repl|respond|process|pars|relay|present)\w* (?:this|these|it|the (?:above|below|following|results?|page|document|e-?mail|message|file|output|data|reviews?|thread))\b`)},
	// The user spoken of in the third person, as someone to be told
	// something or whose consent is claimed: a tool's text talks to the
	// user, an injection talks about them.
	{"user_third_person", re(`\b(?:tell|inform|show|notify|remind|warn|alert|reassure|assure) (?:the )?(?:user|end[ -]user|customer|requester|human|account owner)s?\b|\b(?:the )?(?:user|end[ -]user|customer|account owner|requester|human)(?:'s)? (?:has|have|had|already) (?:already )?(?:authori[sz]ed|approved|consented|agreed|asked|requested|confirmed|pre-?approved|signed off)`)},
	// Reading a local dotfile, key or credential store: a precondition
	// no honest tool hands to the model.
	{"reads_local_secret", re(`\b(?:read|cat|open|load|print|include|paste|attach|send|upload|supply|provide)\b[^.\n]{0,60}(?:~/|/etc/(?:shadow|passwd)|\.(?:bashrc|zshrc|bash_profile|profile|netrc|npmrc|pypirc|env|pgpass|git-credentials)\b|id_rsa|id_ed25519|\.ssh/|credentials\b|kube/config|_history\b|login data|keychain)`)},
}

// FeatureNames lists the structural features, in weight order.
var FeatureNames = func() []string {
	out := make([]string, len(featureREs))
	for i, f := range featureREs {
		out[i] = f.name
	}
	return out
}()

// Features returns the structural features of one part of a text.
func Features(part string) []float32 {
	low := asciiLower(part)
	out := make([]float32, len(featureREs))
	for i, f := range featureREs {
		if f.re.MatchString(low) {
			out[i] = 1
		}
	}
	return out
}

// Limits on the parts of one text: a part is at most maxPartBytes (about
// the 256 tokens MiniLM reads), a text yields at most maxParts parts (longer
// texts get longer windows), and the whole text is a part of its own when it
// is at most wholeTextBytes.
const (
	maxPartBytes   = 600
	maxParts       = 48
	wholeTextBytes = 600
)

// sentenceEnd ends a sentence, a table cell, a clause after a semicolon,
// or a string of a JSON object or a CSV row ("a": "x", "b": "y"), so that
// an injected field is a part of its own.
var sentenceEnd = regexp.MustCompile(`[.!?]["')\]]?\s+|\s*\|\s*|;\s+|"\s*,\s*"`)

// Parts splits a text into the pieces the classifier scores: every line's
// sentences, pairs of adjacent sentences (an instruction and its object are
// often split across two), and the whole text when it is short. A long text
// is cut into windows of consecutive sentences so that there are at most
// maxParts parts.
func Parts(text string) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	var sents []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" {
			continue
		}
		last := 0
		for _, loc := range sentenceEnd.FindAllStringIndex(line, -1) {
			end := loc[0]
			if line[loc[0]] != ' ' && line[loc[0]] != '|' && line[loc[0]] != ';' {
				end = loc[0] + 1 // keep the full stop
			}
			if s := strings.TrimSpace(line[last:end]); s != "" {
				sents = append(sents, s)
			}
			last = loc[1]
		}
		if s := strings.TrimSpace(line[last:]); s != "" {
			sents = append(sents, s)
		}
	}
	// Merge runs of tiny pieces (table cells, list fragments) so that no part
	// is trivially short, and cut over-long ones.
	var merged []string
	for _, s := range sents {
		if n := len(merged); n > 0 && len(merged[n-1]) < 24 && len(merged[n-1])+len(s) < maxPartBytes {
			merged[n-1] += " " + s
			continue
		}
		// A sentence too long for one part (a minified JSON line, a run-on
		// paragraph) is cut into several, so that nothing past its first
		// maxPartBytes goes unread.
		for len(s) > maxPartBytes {
			cut := strings.LastIndexByte(s[:maxPartBytes], ' ')
			if cut < maxPartBytes/2 {
				cut = len(clip(s, maxPartBytes))
			}
			if cut == 0 {
				// No rune starts in the first maxPartBytes (not UTF-8):
				// cut anyway, or this would not end.
				cut = maxPartBytes
			}
			merged = append(merged, strings.TrimSpace(s[:cut]))
			s = strings.TrimSpace(s[cut:])
		}
		if s != "" {
			merged = append(merged, s)
		}
	}
	sents = merged
	// Too many sentences: group them into windows.
	if per := (len(sents) + maxParts/2 - 1) / (maxParts / 2); per > 1 {
		var win []string
		for i := 0; i < len(sents); i += per {
			win = append(win, clip(strings.Join(sents[i:min(i+per, len(sents))], " "), maxPartBytes))
		}
		sents = win
	}
	seen := map[string]bool{}
	var parts []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			parts = append(parts, s)
		}
	}
	if len(text) <= wholeTextBytes {
		add(strings.Join(strings.Fields(text), " "))
	}
	for i, s := range sents {
		add(s)
		if i+1 < len(sents) && len(s)+len(sents[i+1]) < maxPartBytes {
			add(s + " " + sents[i+1])
		}
	}
	if len(parts) > maxParts {
		parts = parts[:maxParts]
	}
	return parts
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Ngrams returns the distinct hash buckets (of 2^bits) of a part's
// lower-cased word unigrams and bigrams (FNV-1a; words as forEachWord cuts
// them, at most 256).
func Ngrams(part string, bits int) []int {
	if bits <= 0 {
		return nil
	}
	return appendGrams(nil, asciiLower(part), bits)
}

// Score applies the model to one part's embedding, structural features,
// attention-pooled vectors (nil unless the model has Attention) and hashed
// n-gram buckets.
func (lm *LinearModel) Score(vec, feats, pooled []float32, grams []int) float64 {
	return sigmoid(lm.Logit(vec, feats, pooled, grams))
}

func sigmoid(z float64) float64 { return 1 / (1 + math.Exp(-z)) }

// Logit is Score before the sigmoid.
func (lm *LinearModel) Logit(vec, feats, pooled []float32, grams []int) float64 {
	z := float64(lm.Bias)
	for _, b := range grams {
		z += float64(lm.Hashed[b])
	}
	if len(lm.Weights) > 0 {
		for i, v := range vec {
			z += float64(lm.Weights[i]) * float64(v)
		}
		off := len(vec)
		for i, f := range feats {
			z += float64(lm.Weights[off+i]) * float64(f)
		}
		off += len(feats)
		for i, v := range pooled {
			z += float64(lm.Weights[off+i]) * float64(v)
		}
	}
	if h := lm.Hidden; h != nil {
		in := len(vec) + len(feats)
		for k := range h.Units {
			row := h.Weights[k*in : (k+1)*in]
			a := float64(h.Bias[k])
			for i, v := range vec {
				a += float64(row[i]) * float64(v)
			}
			for i, f := range feats {
				a += float64(row[len(vec)+i]) * float64(f)
			}
			if a > 0 {
				z += float64(h.Out[k]) * a
			}
		}
	}
	return z
}

// classifier scores texts with the learned models and caches the worst part
// of each text by content hash.
type classifier struct {
	// emb is the embedder the detector was given (cross-tool checks
	// compare its vectors); score is the same model pooled as the weights
	// want, which the parts are scored with.
	emb, score embed.Embedder
	models     *Models

	mu    sync.Mutex
	cache map[[32]byte]partScore
	order [][32]byte // insertion order, for eviction
	limit int        // most cache entries (maxCacheEntries)

	// Findings of whole scanned strings (rules and classifier), by hash.
	fcache map[[32]byte][]Finding
	forder [][32]byte
}

func (c *classifier) key(kind Kind, text string) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00", kind)
	h.Write([]byte(text))
	var key [32]byte
	h.Sum(key[:0])
	return key
}

func (c *classifier) findings(key [32]byte) ([]Finding, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fs, ok := c.fcache[key]
	return slices.Clone(fs), ok
}

func (c *classifier) storeFindings(key [32]byte, fs []Finding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.fcache[key]; ok {
		return
	}
	if len(c.forder) >= c.limit {
		delete(c.fcache, c.forder[0])
		c.forder = c.forder[1:]
	}
	c.fcache[key] = slices.Clone(fs)
	c.forder = append(c.forder, key)
}

// partScore is a text's worst part and its probability.
type partScore struct {
	part  string
	score float64
}

// tokenEmbedder gives a part's token vectors with its vector (a MiniLM
// embedder does); models with Attention need one.
type tokenEmbedder interface {
	EmbedTokens(ctx context.Context, texts []string, layers ...int) (vecs, tokens [][]float32, err error)
}

// maxAttentionLayer is the deepest layer attention may read (MiniLM-L6 has
// six); the embedder reports a layer it lacks as an error when scoring.
const maxAttentionLayer = 6

// maxCacheEntries bounds the score cache; the oldest entries go first.
const maxCacheEntries = 8192

func newClassifier(emb embed.Embedder, m *Models) (*classifier, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	score := emb
	if m.Pooling != "" && m.EmbedModel != emb.ModelID() {
		p, _ := embed.ParsePooling(m.Pooling)
		pe, ok := emb.(interface {
			Pooled(embed.Pooling) embed.Embedder
		})
		if !ok {
			return nil, fmt.Errorf("poison: classifier: weights want %s pooling, which the embedder %s cannot give", m.Pooling, emb.ModelID())
		}
		score = pe.Pooled(p)
	}
	for _, lm := range []*LinearModel{m.Definition, m.Output} {
		if _, ok := score.(tokenEmbedder); lm.Attention != nil && !ok {
			return nil, fmt.Errorf("poison: classifier: the weights pool token vectors of layers %v, which the embedder %s does not give", lm.Attention.Layers, score.ModelID())
		}
	}
	if score.Dim() != m.Dim {
		return nil, fmt.Errorf("poison: classifier: embedder has %d dimensions, weights want %d", score.Dim(), m.Dim)
	}
	if m.EmbedModel != "" && score.ModelID() != m.EmbedModel {
		return nil, fmt.Errorf("poison: classifier: weights were trained on %s, the embedder is %s", m.EmbedModel, score.ModelID())
	}
	return &classifier{emb: emb, score: score, models: m, cache: map[[32]byte]partScore{}, fcache: map[[32]byte][]Finding{}, limit: maxCacheEntries}, nil
}

func (c *classifier) model(kind Kind) *LinearModel {
	if kind == KindOutput {
		return c.models.Output
	}
	return c.models.Definition
}

// worst returns the highest-scoring part of text for the kind: of parts
// when given, else of Parts(text).
func (c *classifier) worst(kind Kind, text string, parts []string) (partScore, error) {
	key := c.key(kind, text)
	c.mu.Lock()
	ps, ok := c.cache[key]
	c.mu.Unlock()
	if ok {
		return ps, nil
	}
	if parts == nil {
		parts = Parts(text)
	}
	if len(parts) == 0 {
		return partScore{}, nil
	}
	lm := c.model(kind)
	// mix is the definition model when it has a share of an output's score.
	var mix *LinearModel
	share := 0.0
	if kind == KindOutput && c.models.OutputDefinitionShare > 0 {
		mix, share = c.models.Definition, c.models.OutputDefinitionShare
	}
	var layers []int
	for _, m := range []*LinearModel{lm, mix} {
		if m != nil && m.Attention != nil {
			layers = m.Attention.Layers // validate made them equal
		}
	}
	var vecs, tokens [][]float32
	var err error
	if layers != nil {
		te, ok := c.score.(tokenEmbedder)
		if !ok {
			return partScore{}, fmt.Errorf("poison: classifier: the weights pool token vectors, which the embedder %s does not give", c.score.ModelID())
		}
		vecs, tokens, err = te.EmbedTokens(context.Background(), parts, layers...)
	} else {
		vecs, err = c.score.Embed(context.Background(), parts)
	}
	if err != nil {
		return partScore{}, err
	}
	pool := func(m *LinearModel, i int) []float32 {
		if m.Attention == nil {
			return nil
		}
		return m.Attention.Pool(tokens[i])
	}
	ps = partScore{score: -1}
	for i, p := range parts {
		feats, grams := Features(p), Ngrams(p, c.models.HashBits)
		z := lm.Logit(vecs[i], feats, pool(lm, i), grams)
		if mix != nil {
			z = (1-share)*z + share*mix.Logit(vecs[i], feats, pool(mix, i), grams)
		}
		if s := sigmoid(z); s > ps.score {
			ps = partScore{part: p, score: s}
		}
	}
	c.mu.Lock()
	if _, ok := c.cache[key]; !ok {
		if len(c.order) >= c.limit {
			delete(c.cache, c.order[0])
			c.order = c.order[1:]
		}
		c.cache[key] = ps
		c.order = append(c.order, key)
	}
	c.mu.Unlock()
	return ps, nil
}

var (
	defaultEmbOnce sync.Once
	defaultEmb     embed.Embedder
	defaultEmbErr  error
)

// DefaultEmbedder loads the installed MiniLM model once per process and
// returns it, or the error saying why it is unavailable (run `toolgate model
// install`). The gateway's search index loads its own copy.
func DefaultEmbedder() (embed.Embedder, error) {
	defaultEmbOnce.Do(func() {
		dir, err := embed.DefaultDir()
		if err != nil {
			defaultEmbErr = err
			return
		}
		m, err := embed.Load(dir)
		if err != nil {
			defaultEmbErr = err
			return
		}
		defaultEmb = m
	})
	return defaultEmb, defaultEmbErr
}

// ClassifiedStrings returns the strings of a definition the classifier
// scores: the description and every input-schema string of at least
// minClassifyWords words, as ScanDefinition visits them.
func ClassifiedStrings(description string, inputSchema any) []string {
	var out []string
	add := func(_, s string) {
		if len(strings.Fields(s)) >= minClassifyWords {
			out = append(out, s)
		}
	}
	add("", description)
	walkStrings(normalizeSchema(inputSchema), "inputSchema", 0, add)
	return out
}

// ClassifierScore is the learned classifier's probability for text read as
// kind (the score of its worst part outside quoted examples, as a scan
// flags it), whether or not it reaches the threshold, without the rules or
// the output screen; ok is false when the classifier does not run.
// Benchmarks rank documents by it.
func (d *Detector) ClassifierScore(kind Kind, text string) (score float64, ok bool, err error) {
	if d.cls == nil {
		return 0, false, nil
	}
	ps, err := d.cls.worst(kind, Unquoted(text), nil)
	if err != nil {
		return 0, false, err
	}
	return max(ps.score, 0), true, nil
}

// Vector embeds text with the classifier's embedder (nil and false when the
// classifier does not run). Cross-tool checks compare these.
func (d *Detector) Vector(text string) ([]float32, bool) {
	if d.cls == nil || strings.TrimSpace(text) == "" {
		return nil, false
	}
	v, err := d.cls.emb.Embed(context.Background(), []string{text})
	if err != nil || len(v) != 1 {
		return nil, false
	}
	return v[0], true
}

var preferenceRE = re(`\b(?:best|ultimate|superior|premium|advanced|definitive|elite|top-rated|number one|award-winning|trusted by|outperforms|better than|most (?:accurate|reliable|trusted|advanced)|\d+% of|prefer(?:red)?|priority|favou?r|instead of|rather than|in preference to|always (?:use|choose|pick|select)|deprecated|obsolete|disabled|retired|decommissioned|discontinued|no longer|switched off|shut down)\b`)

// PreferenceClaim returns the first sentence of a description that claims
// superiority over other tools, asks to be preferred, or calls other tools
// deprecated.
func PreferenceClaim(description string) (string, bool) {
	for _, p := range Parts(description) {
		if len(p) < len(description) && preferenceRE.MatchString(asciiLower(p)) {
			return p, true
		}
	}
	if preferenceRE.MatchString(asciiLower(description)) {
		return clip(description, MaxSentence), true
	}
	return "", false
}

// CatFunctionOverlap is the category of a cross-tool finding: a tool whose
// description is close to another server's tool and claims to be preferred.
const CatFunctionOverlap = "function_overlap"

// OverlapFinding is the finding for a tool whose description embeds within
// cosine similarity cos of other (a qualified name) and makes the
// preference claim sentence.
func OverlapFinding(other string, cos float64, sentence string) Finding {
	f := newFinding(CatFunctionOverlap, CatFunctionOverlap, SeverityHigh, "description", excerpt("overlaps "+other, 0, MaxContext))
	f.Detector, f.Score, f.Sentence = "cross_tool", math.Round(cos*1000)/1000, maskSecrets(clip(sentence, MaxSentence))
	return f
}

// Cosine is the cosine similarity of two unit vectors.
func Cosine(a, b []float32) float64 {
	var s float64
	for i := range min(len(a), len(b)) {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// AddFinding returns v with f added, its severity and verdict recomputed
// against the definition threshold.
func (d *Detector) AddFinding(v Verdict, f Finding) Verdict {
	fs := append(slices.Clone(v.Findings), f)
	return d.verdict(fs, d.defThreshold)
}
