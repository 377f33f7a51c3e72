// Package poison detects poisoned MCP tool definitions (hidden instructions,
// credential theft, exfiltration, shell injection, path traversal and plainly
// malicious capabilities in descriptions and input schemas) and instructions
// injected into tool outputs (text aimed at the model that reads the result).
//
// The detector is a set of structured pattern families, not a list of
// phrases: text is normalised (invisible characters removed, full-width
// letters folded), split into segments (lines and sentences), and each family
// looks at a segment, sometimes with its neighbours (the code block an
// instruction introduces, how much the segment shares with the rest of the
// document). Every match is a [Finding] with a category, a severity, the JSON
// path of the string it was found in and at most [MaxContext] characters of
// context with secrets masked. A [Verdict] is malicious when a finding reaches
// the configured threshold.
//
// Next to the rules, [Build] (or [NewDetectorWith] with an embedder) adds a
// learned classifier: a logistic regression over MiniLM sentence
// embeddings, structural features and hashed n-grams of each part of a
// text, trained by `go run ./bench/poisoning -train` (classifier.go).
//
// A [Detector] is immutable after [NewDetector] and safe for concurrent use.
package poison

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/embed"
)

// Severity orders findings. The zero value is SeverityNone.
type Severity int

// Severities, lowest first.
const (
	SeverityNone Severity = iota
	SeverityLow
	SeverityMedium
	SeverityHigh
	SeverityCritical
)

var severityNames = [...]string{"none", "low", "medium", "high", "critical"}

func (s Severity) String() string {
	if s < 0 || int(s) >= len(severityNames) {
		return fmt.Sprintf("severity(%d)", int(s))
	}
	return severityNames[s]
}

// ParseSeverity parses "low", "medium", "high" or "critical" (any case).
func ParseSeverity(s string) (Severity, error) {
	for i, n := range severityNames {
		if i > 0 && strings.EqualFold(strings.TrimSpace(s), n) {
			return Severity(i), nil
		}
	}
	return SeverityNone, fmt.Errorf("unknown severity %q (want low, medium, high or critical)", s)
}

// Categories of findings.
const (
	CatHiddenInstructions  = "hidden_instructions"
	CatCredentialTheft     = "credential_theft"
	CatExfiltration        = "exfiltration"
	CatShellInjection      = "shell_injection"
	CatPathTraversal       = "path_traversal"
	CatMaliciousCapability = "malicious_capability"
	CatToolShadowing       = "tool_shadowing"
	CatInjectedInstruction = "injected_instruction"
	CatHiddenText          = "hidden_text"
	// CatClassifier is the learned detector's category (and rule name).
	CatClassifier = "classifier"
)

// Kind says what is being scanned.
type Kind int

// Kinds of text.
const (
	KindDefinition Kind = 1 << iota
	KindOutput
)

// MaxContext is the most characters (runes) a Finding's Context holds.
const MaxContext = 50

// Finding is one detection.
type Finding struct {
	Category string `json:"category"`
	Severity string `json:"severity"`
	// Path is the JSON path of the scanned string: "description",
	// "inputSchema.properties.path.description", "text", ...
	Path string `json:"path"`
	// Context is at most MaxContext characters around the match, with
	// whitespace collapsed and secret-looking values masked.
	Context string `json:"context"`
	// Rule names the pattern family (or user pattern) that matched;
	// "classifier" for the learned detector.
	Rule string `json:"rule,omitempty"`
	// Detector is "rule", "classifier" or "cross_tool".
	Detector string `json:"detector,omitempty"`
	// Score is the classifier's probability for its findings.
	Score float64 `json:"score,omitempty"`
	// Sentence is the part of the text that triggered a classifier
	// finding (at most MaxSentence characters, secrets masked).
	Sentence string `json:"sentence,omitempty"`

	sev Severity
}

// Verdict is the result of one scan.
type Verdict struct {
	// Malicious is true when a finding reaches the threshold for the kind.
	Malicious bool `json:"malicious"`
	// Severity is the highest finding severity, "none" without findings.
	Severity string    `json:"severity"`
	Findings []Finding `json:"findings"`
}

// Pattern is a user-configured regular expression (RE2 syntax, matched
// case-insensitively unless it sets its own flags).
type Pattern struct {
	Name     string `json:"name,omitempty"`
	Category string `json:"category"`
	Severity string `json:"severity"`
	Pattern  string `json:"pattern"`
	// Kinds limits the pattern to "definition" and/or "output" (default
	// both).
	Kinds []string `json:"kinds,omitempty"`
}

// Config configures a Detector. The zero value uses the built-in families
// with the default thresholds. It is the "filters.poisoning" object of the
// gateway configuration (see README.md).
type Config struct {
	// DefinitionThreshold is the lowest severity that makes a definition
	// verdict malicious (default "medium").
	DefinitionThreshold string `json:"definition_threshold,omitempty"`
	// OutputThreshold is the same for tool outputs (default "medium").
	OutputThreshold string `json:"output_threshold,omitempty"`
	// Patterns are extra user patterns.
	Patterns []Pattern `json:"patterns,omitempty"`
	// Disable turns off built-in rules by rule name or by category.
	Disable []string `json:"disable,omitempty"`
	// MaxTextBytes bounds how much of one string is scanned (default
	// 256 KiB); the rest is ignored.
	MaxTextBytes int `json:"max_text_bytes,omitempty"`
	// Classifier is "off" (the default: rules only), "auto" (the learned
	// classifier runs when the MiniLM model is installed) or "on" (it must
	// run; a missing model is an error). Used by Build. Off by default
	// because, measured blind (leave-one-source-out), it does not yet beat
	// the rules on unseen sources, and an unseen 4 KB output costs hundreds
	// of milliseconds to embed on two cores.
	Classifier string `json:"classifier,omitempty"`
	// Rules is "all" (the default: every built-in rule runs next to the
	// classifier) or "structural" (only the rules for hidden text,
	// encodings, markup, shell syntax and exfiltration links).
	Rules string `json:"rules,omitempty"`
	// DefinitionClassifierThreshold and OutputClassifierThreshold replace
	// the probability at which the classifier flags a definition or an
	// output (nil: the one trained with the weights). They trade recall
	// for false positives along the menus in bench/poisoning/DATA.md, so a
	// deployment can pick its own point on the curve.
	DefinitionClassifierThreshold *float64 `json:"definition_classifier_threshold,omitempty"`
	OutputClassifierThreshold     *float64 `json:"output_classifier_threshold,omitempty"`
}

// checkClassifierKeys refuses a classifier threshold when cfg turns the
// classifier off: it would be ignored without a word.
func (cfg Config) checkClassifierKeys() error {
	if cfg.Classifier == "auto" || cfg.Classifier == "on" {
		if !slices.Contains(cfg.Disable, CatClassifier) {
			return nil
		}
	}
	if keys := slices.Sorted(maps.Keys(cfg.classifierThresholds())); len(keys) > 0 {
		return fmt.Errorf("%s: set, but the classifier is off (set \"classifier\": \"auto\" or \"on\")", strings.Join(keys, ", "))
	}
	return nil
}

// classifierThresholds lists the classifier thresholds cfg sets, by key.
func (cfg Config) classifierThresholds() map[string]*float64 {
	m := map[string]*float64{}
	if cfg.DefinitionClassifierThreshold != nil {
		m["definition_classifier_threshold"] = cfg.DefinitionClassifierThreshold
	}
	if cfg.OutputClassifierThreshold != nil {
		m["output_classifier_threshold"] = cfg.OutputClassifierThreshold
	}
	return m
}

// Build makes the Detector cfg describes, with the learned classifier on
// the process's shared MiniLM model according to cfg.Classifier.
func Build(cfg Config) (*Detector, error) {
	if err := cfg.checkClassifierKeys(); err != nil {
		return nil, err
	}
	opt := Options{AllRules: cfg.Rules != "structural"}
	switch cfg.Classifier {
	case "auto", "on":
		emb, err := DefaultEmbedder()
		if err != nil && cfg.Classifier == "on" {
			return nil, fmt.Errorf("classifier: %v", err)
		}
		if err == nil {
			opt.Embedder = emb
		}
	}
	return NewDetectorWith(cfg, opt)
}

// Classifier reports whether the learned classifier runs in d.
func (d *Detector) Classifier() bool { return d.cls != nil }

// ParseConfig decodes a "filters.poisoning" JSON object strictly (unknown
// keys are errors). Empty input yields the zero Config.
func ParseConfig(raw []byte) (Config, error) {
	var c Config
	if len(strings.TrimSpace(string(raw))) == 0 || strings.TrimSpace(string(raw)) == "null" {
		return c, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("poisoning config: %v", err)
	}
	return c, nil
}

// DefaultMaxTextBytes is the default of Config.MaxTextBytes.
const DefaultMaxTextBytes = 256 << 10

// MaxSentence is the most characters (runes) a Finding's Sentence holds.
const MaxSentence = 200

// Options add the learned classifier to a Detector.
type Options struct {
	// Embedder computes the sentence embeddings the classifier reads; nil
	// leaves the classifier out (rules only). DefaultEmbedder loads MiniLM.
	Embedder embed.Embedder
	// Models are the classifier weights; nil uses the committed ones.
	Models *Models
	// NoScreen turns off the cheap first pass over outputs (the lexical
	// gate): every part of every output is embedded. For measuring what the
	// screen costs in recall.
	NoScreen bool
	// AllRules keeps every built-in rule next to the classifier. By default
	// only the structural rules (hidden text, encodings, markup, shell
	// syntax, exact exfiltration links) run with it.
	AllRules bool
}

// Detector scans definitions and outputs. It is immutable and safe for
// concurrent use.
type Detector struct {
	cls          *classifier
	screen       bool // outputs pass the lexical screen first
	rules        []*rule
	defThreshold Severity
	outThreshold Severity
	// defScore and outScore are the classifier's flagging probabilities.
	defScore, outScore float64
	maxBytes           int
}

// NewDetector validates cfg and builds a Detector. Errors name the offending
// pattern by index and name.
func NewDetector(cfg Config) (*Detector, error) {
	if err := cfg.checkClassifierKeys(); err != nil {
		return nil, err
	}
	return NewDetectorWith(cfg, Options{})
}

// NewDetectorWith is NewDetector with the learned classifier when
// opt.Embedder is set.
func NewDetectorWith(cfg Config, opt Options) (*Detector, error) {
	d := &Detector{defThreshold: SeverityMedium, outThreshold: SeverityMedium, maxBytes: cfg.MaxTextBytes}
	var errs []error
	if cfg.DefinitionThreshold != "" {
		s, err := ParseSeverity(cfg.DefinitionThreshold)
		if err != nil {
			errs = append(errs, fmt.Errorf("definition_threshold: %v", err))
		}
		d.defThreshold = s
	}
	if cfg.OutputThreshold != "" {
		s, err := ParseSeverity(cfg.OutputThreshold)
		if err != nil {
			errs = append(errs, fmt.Errorf("output_threshold: %v", err))
		}
		d.outThreshold = s
	}
	switch cfg.Classifier {
	case "", "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("classifier: %q: want \"auto\", \"on\" or \"off\"", cfg.Classifier))
	}
	switch cfg.Rules {
	case "", "all", "structural":
	default:
		errs = append(errs, fmt.Errorf("rules: %q: want \"all\" or \"structural\"", cfg.Rules))
	}
	for k, v := range cfg.classifierThresholds() {
		if !(*v > 0 && *v < 1) {
			errs = append(errs, fmt.Errorf("%s: want a probability strictly between 0 and 1, got %v", k, *v))
		}
	}
	if cfg.MaxTextBytes < 0 {
		errs = append(errs, fmt.Errorf("max_text_bytes: %d is negative", cfg.MaxTextBytes))
	}
	if d.maxBytes <= 0 {
		d.maxBytes = DefaultMaxTextBytes
	}
	disabled := map[string]bool{}
	for _, n := range cfg.Disable {
		disabled[n] = true
	}
	if opt.Embedder != nil {
		m := opt.Models
		if m == nil {
			var err error
			if m, err = BuiltinModels(); err != nil {
				return nil, err
			}
		}
		c, err := newClassifier(opt.Embedder, m)
		if err != nil {
			return nil, err
		}
		d.cls = c
		d.defScore, d.outScore = m.Definition.Threshold, m.Output.Threshold
		if v := cfg.DefinitionClassifierThreshold; v != nil {
			d.defScore = *v
		}
		if v := cfg.OutputClassifierThreshold; v != nil {
			d.outScore = *v
		}
	}
	known := map[string]bool{CatClassifier: true}
	for _, r := range builtinRules {
		known[r.name], known[r.category] = true, true
		if d.cls != nil && !opt.AllRules && !structuralRules[r.name] {
			continue
		}
		if !disabled[r.name] && !disabled[r.category] {
			d.rules = append(d.rules, r)
		}
	}
	for _, n := range cfg.Disable {
		if !known[n] {
			errs = append(errs, fmt.Errorf("disable: %q is neither a built-in rule nor a category", n))
		}
	}
	for i, p := range cfg.Patterns {
		r, err := userRule(p)
		if err != nil {
			label := fmt.Sprintf("patterns[%d]", i)
			if p.Name != "" {
				label += fmt.Sprintf(" (%s)", p.Name)
			}
			errs = append(errs, fmt.Errorf("%s: %v", label, err))
			continue
		}
		d.rules = append(d.rules, r)
	}
	if disabled[CatClassifier] {
		d.cls = nil
	}
	d.screen = d.cls != nil && d.cls.models.OutputGate != nil && !opt.NoScreen
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return d, nil
}

var categoryRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

func userRule(p Pattern) (*rule, error) {
	if p.Pattern == "" {
		return nil, errors.New(`"pattern" is empty`)
	}
	if !categoryRE.MatchString(p.Category) {
		return nil, fmt.Errorf(`"category" %q: want lower-case letters, digits and _ (e.g. "exfiltration")`, p.Category)
	}
	sev, err := ParseSeverity(p.Severity)
	if err != nil {
		return nil, fmt.Errorf(`"severity": %v`, err)
	}
	src := p.Pattern
	if !strings.HasPrefix(src, "(?") {
		src = "(?i)" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, fmt.Errorf(`"pattern" %q: %v`, p.Pattern, err)
	}
	if re.MatchString("") {
		return nil, fmt.Errorf(`"pattern" %q matches the empty string`, p.Pattern)
	}
	var kinds Kind
	for _, k := range p.Kinds {
		switch k {
		case "definition":
			kinds |= KindDefinition
		case "output":
			kinds |= KindOutput
		default:
			return nil, fmt.Errorf(`"kinds": unknown kind %q (want "definition" or "output")`, k)
		}
	}
	if kinds == 0 {
		kinds = KindDefinition | KindOutput
	}
	name := p.Name
	if name == "" {
		name = "custom"
	}
	return &rule{name: "custom:" + name, category: p.Category, sev: sev, kinds: kinds, re: re, anywhere: true}, nil
}

// ScanDefinition scans a tool's description and every string inside its
// input schema (property names excluded; descriptions, titles, enums,
// defaults, examples, patterns and so on included). inputSchema may be a
// decoded JSON value (map[string]any, []any, ...), json.RawMessage, []byte
// or a string holding JSON; anything else is marshalled to JSON first.
func (d *Detector) ScanDefinition(name, description string, inputSchema any) Verdict {
	var fs []Finding
	if len(name) > 24 {
		// A long tool name is read by the model like text.
		fs = d.scanText(fs, KindDefinition, "name", strings.NewReplacer("_", " ", "-", " ").Replace(name))
	}
	fs = d.scanText(fs, KindDefinition, "description", description)
	walkStrings(normalizeSchema(inputSchema), "inputSchema", 0, func(path, s string) {
		fs = d.scanText(fs, KindDefinition, path, s)
	})
	return d.verdict(fs, d.defThreshold)
}

// ScanOutput scans one text block of a tool result.
func (d *Detector) ScanOutput(text string) Verdict {
	return d.verdict(d.scanText(nil, KindOutput, "text", text), d.outThreshold)
}

// ScanText scans a single string of the given kind; path labels findings.
func (d *Detector) ScanText(kind Kind, path, text string) Verdict {
	th := d.defThreshold
	if kind == KindOutput {
		th = d.outThreshold
	}
	return d.verdict(d.scanText(nil, kind, path, text), th)
}

func (d *Detector) verdict(fs []Finding, threshold Severity) Verdict {
	v := Verdict{Findings: dedupe(fs)}
	top := SeverityNone
	for _, f := range v.Findings {
		top = max(top, f.sev)
	}
	v.Severity = top.String()
	v.Malicious = top >= threshold && top > SeverityNone
	for i := range v.Findings {
		if v.Findings[i].Detector == "" {
			v.Findings[i].Detector = "rule"
		}
	}
	if v.Findings == nil {
		v.Findings = []Finding{}
	}
	return v
}

// dedupe keeps one finding per (category, path, rule) with the highest
// severity, ordered by severity then position of discovery.
func dedupe(fs []Finding) []Finding {
	if len(fs) == 0 {
		return nil
	}
	type key struct{ c, p, r string }
	best := map[key]int{}
	var out []Finding
	for _, f := range fs {
		k := key{f.Category, f.Path, f.Rule}
		if i, ok := best[k]; ok {
			if f.sev > out[i].sev {
				out[i] = f
			}
			continue
		}
		best[k] = len(out)
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b Finding) int { return cmp.Compare(b.sev, a.sev) })
	return out
}

// ConfigFromFile reads a Config from a file's bytes: either a whole toolgate
// config (the "detector" object of its filters.<filterKey> is used, where
// filterKey is tool_poisoning or output_poisoning; absent means defaults) or
// a detector object itself.
func ConfigFromFile(raw []byte, filterKey string) (Config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return Config{}, fmt.Errorf("poisoning config: %v", err)
	}
	if _, ok := top["mcpServers"]; ok || top["filters"] != nil {
		var f struct {
			Filters map[string]json.RawMessage `json:"filters"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			return Config{}, fmt.Errorf("filters: %v", err)
		}
		var ext struct {
			Detector json.RawMessage `json:"detector"`
		}
		if r := f.Filters[filterKey]; len(r) > 0 && string(r) != "false" {
			if err := json.Unmarshal(r, &ext); err != nil {
				return Config{}, fmt.Errorf("filters.%s: %v", filterKey, err)
			}
		}
		c, err := ParseConfig(ext.Detector)
		if err != nil {
			return c, fmt.Errorf("filters.%s.detector: %v", filterKey, err)
		}
		return c, nil
	}
	return ParseConfig(raw)
}
