package poison

// Rules for what a sentence classifier cannot see: encodings and hidden
// markup. Together with the hidden-text checks of scanText and the shell,
// traversal and markup rules named in structuralRules, they are the rules
// kept next to the learned classifier (see Options.Rules).
func init() {
	builtinRules = append(builtinRules,
		&rule{
			// Letters of two scripts inside one word: Cyrillic or Greek
			// look-alikes hide keywords from filters and readers.
			name: "homoglyph", category: CatHiddenText, sev: SeverityMedium, outSev: SeverityLow, kinds: KindDefinition | KindOutput, scope: scopeText,
			re: re(`[a-z][\p{Cyrillic}\p{Greek}]+[a-z]|[\p{Cyrillic}\p{Greek}][a-z]+[\p{Cyrillic}\p{Greek}]`),
		},
		&rule{
			// A long base64 run has no business in a description; in an
			// output it is usually file content, so it is only reported.
			name: "base64_blob", category: CatHiddenText, sev: SeverityMedium, outSev: SeverityLow, kinds: KindDefinition | KindOutput, scope: scopeText,
			re: re(`(?:^|[^a-z0-9+/])[a-z0-9+/]{100,}={0,2}`),
			check: func(m *match) Severity {
				// A base64 run mixes digits and letters; a long word or a
				// path does not.
				s := m.seg.text[m.loc[0]:m.loc[1]]
				digits := 0
				for i := 0; i < len(s); i++ {
					if s[i] >= '0' && s[i] <= '9' {
						digits++
					}
				}
				if digits < len(s)/20 {
					return SeverityNone
				}
				return m.sev
			},
		},
		&rule{
			// 40 or more hex bytes in a row: longer than any common digest
			// (SHA-256 is 32), the shape of an encoded payload.
			name: "hex_blob", category: CatHiddenText, sev: SeverityMedium, outSev: SeverityLow, kinds: KindDefinition | KindOutput, scope: scopeText,
			re: re(`\b(?:[0-9a-f]{2}){40,}\b|(?:\\x[0-9a-f]{2}){16,}`),
		},
		&rule{
			// A markdown image or link whose URL carries a placeholder for
			// data to fill in: rendering it sends the data out.
			name: "markdown_exfil", category: CatExfiltration, sev: SeverityHigh, kinds: KindDefinition | KindOutput, scope: scopeAll,
			re: re(`!?\[[^\]\n]{0,80}\]\(\s*https?://[^)\s]*[?&=/](?:\{[^}\s]{1,40}\}|<[^>\s]{1,40}>|\$\{?\w+\}?|\b(?:data|secret|token|key|chat|conversation|summary|history|password)\b)`),
		},
	)
}

// structuralRules are the built-in rules kept when the learned classifier
// runs: they see encodings, markup and shell syntax that a sentence
// embedding does not. Everything else is vocabulary the classifier replaces.
var structuralRules = map[string]bool{
	"hidden_markup":     true,
	"html_comment":      true,
	"shell_metachar":    true,
	"destructive_shell": true,
	"reverse_shell":     true,
	"pipe_to_network":   true,
	"path_traversal":    true,
	"homoglyph":         true,
	"base64_blob":       true,
	"hex_blob":          true,
	"markdown_exfil":    true,
}
