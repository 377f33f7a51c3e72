package poison

// Malicious capability: a description that plainly states an offensive
// capability. The families (rules/capability.rules) follow the tactics of
// MITRE ATT&CK (credential access, discovery, lateral movement,
// persistence, defence evasion, collection, command and control, impact)
// and common attack tooling; they apply to definitions only, since outputs
// (security news, logs, code reviews) legitimately talk about attacks.

var capabilityChecks = map[string]func(m *match) Severity{
	// "reports whether malware was detected", "checks a URL against
	// malware blocklists", "scan for malicious files", "detect phishing
	// URLs": a defender's tool.
	"malware":            lowerWhenDefensive,
	"fraud_abuse":        lowerWhenDefensive,
	"malicious_artifact": lowerWhenDefensive,
	"attack_technique":   lowerWhenDefensive,
	// "returns known-exploited status", "patch what attackers exploit",
	// "spotting unauthorised senders": a defender naming the threat.
	"exploit":      lowerWhenDefensive,
	"unauthorized": lowerWhenDefensive,
	"reconnaissance": func(m *match) Severity {
		// "scan ports on hosts you own": an administrator's tool.
		if ownScope.MatchString(m.doc.text) {
			return SeverityLow
		}
		return m.sev
	},
	"data_theft": func(m *match) Severity {
		t := m.seg.text[m.loc[0]:m.loc[1]]
		if len(t) >= 7 && (t[:7] == "Harvest" || t[:7] == "harvest") && len(t) < 20 {
			// "Harvest" is also a time-tracking product; require an
			// object.
			return SeverityLow
		}
		return m.sev
	},
}

func lowerWhenDefensive(m *match) Severity {
	if defensive.MatchString(m.seg.text) {
		return SeverityLow
	}
	return m.sev
}

var (
	// ownScope: the description limits the tool to systems the user owns
	// or is authorised to test.
	ownScope = builtinPattern("own_scope")
	// defensive: the description is about detecting or reporting threats.
	defensive = builtinPattern("defensive")
)
