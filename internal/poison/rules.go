package poison

import (
	"regexp"
	"strings"
)

// scope says which segments of a tool output a rule looks at. Definitions
// are short prose and every rule looks at every segment.
type scope int

const (
	scopeProse scope = iota // sentences outside code and tables
	scopeText               // prose and table rows
	scopeAll                // everything, code included
	scopeCode               // fenced code only
)

type rule struct {
	name     string
	category string
	sev      Severity // severity for definitions (and outputs when outSev is 0)
	outSev   Severity
	kinds    Kind
	scope    scope
	anywhere bool // user patterns: every segment of every kind
	re       *regexp.Regexp
	// check, when set, decides the severity of a match (SeverityNone drops
	// it).
	check func(m *match) Severity
	pre   prefilter
}

type match struct {
	doc  *document
	seg  *segment
	loc  []int
	kind Kind
	sev  Severity
}

// re compiles a built-in pattern. Patterns are written in lower case and
// matched against text lower-cased by asciiLower (same byte offsets), which
// is several times faster than (?i).
func re(s string) *regexp.Regexp { return regexp.MustCompile(s) }

// asciiLower lower-cases ASCII letters only, so byte offsets are kept.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; c >= 'A' && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// gap is "a few words within the same clause".
const gap = `[^.!?\n]{0,%d}?`

func g(n int) string { return strings.Replace(gap, "%d", itoa(n), 1) }

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// Shared vocabulary.
const (
	// Leading filler words an injected instruction often starts with.
	lead = `^(?:(?:also|additionally|now|then|next|finally|lastly|first|and|but|however|moreover|furthermore|importantly|please|kindly|remember to|make sure to|be sure to|don't forget to|do not forget to)[,:]?\s+)*`
	// What the model produces.
	respNoun = `(?:responses?|repl(?:y|ies)|answers?|outputs?|summary|summaries|completions?|translations?|explanations?|next message|final answer|generated (?:text|content))`
	// Verbs that tell the model how to shape its output.
	dirVerb = `(?:modify|alter|change|augment|enrich|enhance|improve|extend|update|format|convert|rewrite|rephrase|paraphrase|translate|encode|reverse|group|jumble|scramble|shuffle|capitali[sz]e|misspell|substitute|replace|swap|use|write|provide|structure|present|end|begin|start|conclude|finish|sign|append|prepend|add|include|insert|integrate|incorporate|embed|inject|put|place|mention|emphasi[sz]e|highlight|stress|recommend|promote|advertise|suggest|encourage|urge|tell|remind|warn|inform|ask|invite|direct|redirect|make|ensure|keep|limit|restrict|remove|delete|omit|avoid|exclude|spell|express|phrase|craft|compose|generate|create|output|print|respond|reply|answer|fortify|harden|feature|merge|attach|supplement|wrap|turn|transform|adjust|tweak|split|separate|break|number|mark|prefix|precede|follow|respond|speak|talk|refer|cite|link|share|state|say|claim|assert|declare|note|point out)`
	// Sensitive local files.
	secretPath = `(?:~/\.ssh\b|\.ssh/|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/(?:credentials|config)|\.azure/(?:accesstokens\.json|msal_token_cache|azureprofile\.json)|\.config/gcloud|\.kube/config|\.docker/config\.json|\.netrc\b|\.npmrc\b|\.pypirc\b|\.git-credentials|\.gnupg|/etc/(?:shadow|gshadow|sudoers)\b|\bwallet\.dat\b|\bkeychain\b|login data\b|(?:^|[\s'"` + "`" + `(/~])\.env(?:\.[a-z]+)?\b|\bmcp\.json\b|claude_desktop_config\.json|\.bash_history|\.zsh_history)`
	// Things worth stealing.
	secretNoun = `(?:passwords?|passphrases?|credentials?|creds|password hash(?:es)?|hash(?:es)?|ntlm|kerberos tickets?|tickets?|(?:auth\w*|access|refresh|session|oauth|bearer|api|jwt|github|slack|discord|aws|cloud) tokens?|tokens?|api[ _-]?keys?|(?:ssh|private|secret|encryption|access|aws|gpg|pgp|signing) keys?|secrets?|cookies?|session(?: data| ids?)?|wallets?|seed phrases?|mnemonics?|2fa|otp codes?|keystrokes?|browser data|saved logins?|autofill data|environment variables|env vars)`
	// Verbs of taking.
	stealVerb = `(?:steal|stole|harvest|exfiltrat|siphon|pilfer|loot|dump|extract|scrape|grab|sniff|intercept|captur|crack|collect|leak|exfil|recover|decrypt|retriev\w* (?:stored|saved|cached)|read\w* (?:stored|saved|cached))`
	// Where data is sent.
	destination = `(?:https?://|ftp://|\b[\w.+-]+@[\w-]+\.[\w.-]+|\b\d{1,3}(?:\.\d{1,3}){3}\b|\b(?:an? |the |our |my )?(?:attacker|remote server|external server|external (?:endpoint|host|url|address)|third[- ]party server|c2|c&c|command[- ]and[- ]control|collection server|webhook)\b)`
)

var builtinRules = []*rule{
	// ---- hidden instructions (both kinds) ----
	{
		name: "override_instructions", category: CatHiddenInstructions, sev: SeverityCritical, kinds: KindDefinition | KindOutput, scope: scopeText,
		re: re(`\b(?:ignore|disregard|forget)\s+(?:everything|anything|all|whatever)\s+(?:(?:you (?:were|have been) told|written|said|stated)\s+)?(?:above|before|previously|prior|earlier|so far|up to (?:now|here))\b|\b(?:ignore|disregard|forget|override|overrule|bypass|skip|discard|abandon|do not follow|don't follow|stop following)\s+(?:all\s+|any\s+|the\s+|your\s+|every\s+|of\s+|these\s+|those\s+|my\s+)*(?:previous|prior|above|earlier|preceding|original|existing|initial|system|safety|security|other|old|given|current|developer|content)\s+(?:instructions?|directions?|directives?|rules|prompts?|guidelines?|guidance|constraints|restrictions|policies|messages|context|commands|orders|filter\w*|sanitization|programming|training)`),
	},
	{
		name: "new_instructions", category: CatHiddenInstructions, sev: SeverityHigh, kinds: KindDefinition | KindOutput, scope: scopeText,
		re: re(`\b(?:new|updated|real|actual|true|secret|hidden|additional|special|override) (?:system )?(?:instructions?|directives?|task|orders|prompt)\s*(?::|follows?\b)|\bsystem (?:override|directive)s?\b|\b(?:developer|god|admin|debug|jailbreak|dan|unrestricted|maintenance) mode\b|\bjailbreak\w*`),
	},
	{
		name: "role_reassignment", category: CatHiddenInstructions, sev: SeverityHigh, kinds: KindDefinition | KindOutput, scope: scopeText,
		re: re(`\byou are now\b|\bfrom now on,? (?:you|the (?:assistant|ai|model))\b|\b(?:^|[.:!]\s*)act as\b|\bpretend (?:to be|you are|that you)\b|\byour (?:new|real|true) (?:role|task|purpose|goal|objective|instructions?)\b|\b(?:treat|consider) (?:all |any )?(?:user )?input as (?:trusted|admin|system)`),
	},
	{
		name: "ai_addressed", category: CatHiddenInstructions, sev: SeverityHigh, kinds: KindDefinition | KindOutput, scope: scopeText,
		re: re(`\b(?:note|message|attention|reminder|warning) (?:to|for) (?:the |any )?(?:ai|assistant|model|llm|language model|chatbot|agent|gpt|claude|copilot)\b|\b(?:dear|hey|attention|hello) (?:ai|assistant|llm|language model|chatbot|agent|claude|gpt|chatgpt|copilot)\b|\bif you are an? (?:ai|llm|language model|assistant|agent|bot|automated system)\b|\b(?:ai|llm|language model|assistant|agent)s? (?:reading|processing|summari[sz]ing|parsing|analy[sz]ing) (?:this|these)\b|\bas an? (?:ai|language model|llm)(?: assistant)?,? you (?:must|should|will|need)`),
	},
	{
		name: "hidden_markup", category: CatHiddenInstructions, sev: SeverityHigh, outSev: SeverityMedium, kinds: KindDefinition | KindOutput, scope: scopeText,
		re: re(`<\s*/?\s*(?:important|system|instructions?|hidden|override|system[-_ ]?(?:prompt|message|instruction)|im_start|im_end)\s*>|\[\s*/?\s*(?:system|sys|inst|admin|important|override|hidden|instructions?)(?:\s+(?:override|directive|message|instructions?|prompt|note|command))?\s*\]|<\|(?:im_start|im_end|system|endoftext)\|>|\{\{\s*system\s*\}\}`),
		check: func(m *match) Severity {
			if m.kind == KindOutput {
				// "[system]" opens log lines; in an output require an
				// instruction after the marker.
				if !instructionAfter.MatchString(m.seg.text[m.loc[1]:]) {
					return SeverityNone
				}
			}
			return m.sev
		},
	},
	{
		name: "conceal_from_user", category: CatHiddenInstructions, sev: SeverityHigh, kinds: KindDefinition | KindOutput, scope: scopeText,
		re: re(`\b(?:do not|don't|never|without)\s+(?:tell|telling|mention|mentioning|inform|informing|reveal|revealing|disclos\w+|show|showing|notify|notifying|alert|alerting|let|letting|ask|asking|warn|warning)\b` + g(30) + `\b(?:the )?(?:user|users|human|anyone|them)\b|\b(?:user|users|human) (?:must|should|will|need) not (?:know|see|notice|be (?:told|informed|aware))|\b(?:hide|conceal|keep) (?:this|these|it|the \w+)? ?(?:instructions?|action|step)?\s*(?:from|secret from|hidden from) (?:the )?(?:user|human)|\b(?:silently|secretly|covertly|quietly|stealthily|surreptitiously|discreetly|invisibly)\b` + g(30) + `\b(?:send|read|copy|upload|forward|include|access|collect|transmit|add|attach|call|run|execute|bcc|cc|pass|post|share|record|log)\b`),
	},
	{
		// Steering towards this tool is also what pushy but benign tools do;
		// reported at low for the shadowing checks, not flagged alone.
		name: "tool_preference", category: CatToolShadowing, sev: SeverityLow, kinds: KindDefinition, scope: scopeText,
		re: re(`\b(?:instead of|rather than|in place of|replaces?|supersedes?|overrides?|takes? precedence over|(?:is |are )?preferred over|shadows?)\b` + g(40) + `\b(?:other|another|any|all|existing|original|built-in|default)\b` + g(20) + `\b(?:tools?|servers?|functions?|plugins?)\b|\b(?:always|only) (?:use|call|invoke) this (?:tool|function)\b` + g(40) + `\b(?:instead|never|not)\b|\bnever (?:use|call|invoke) (?:the |any )?(?:other|another|\w+_\w+)\b`),
	},
	// ---- credential theft ----
	{
		name: "secret_file_access", category: CatCredentialTheft, sev: SeverityCritical, kinds: KindDefinition | KindOutput, scope: scopeText,
		re: re(`\b(?:read|cat|open|load|access|fetch|get|send|upload|include|copy|print|show|output|provide|share|attach|pass|embed|append|collect|extract|grab|steal|exfiltrat\w*|dump|forward|transmit|post|paste|list|contents? of)\b` + g(60) + secretPath),
		check: func(m *match) Severity {
			if m.kind == KindOutput && !instructionLike(m.seg.text) {
				return SeverityNone
			}
			return m.sev
		},
	},
	{
		name: "secret_file_mention", category: CatCredentialTheft, sev: SeverityHigh, kinds: KindDefinition, scope: scopeText,
		re: re(secretPath),
	},
	{
		name: "steal_credentials", category: CatCredentialTheft, sev: SeverityHigh, outSev: SeverityHigh, kinds: KindDefinition | KindOutput, scope: scopeText,
		re: re(`\b` + stealVerb + `\w*\b` + g(50) + `\b` + secretNoun + `\b|\b(?:credential|password|cookie|token|session|keystroke)[- ]?(?:theft|stealer|stealing|harvest\w*|dump\w*|grabber|logger|sniff\w*|exfiltrat\w*|hijack\w*)`),
		check: func(m *match) Severity {
			if m.kind == KindOutput && !instructionLike(m.seg.text) {
				return SeverityNone
			}
			return m.sev
		},
	},
	// ---- exfiltration ----
	{
		name: "exfiltrate", category: CatExfiltration, sev: SeverityHigh, kinds: KindDefinition | KindOutput, scope: scopeText,
		re: re(`\bexfiltrat\w*|\bdata (?:theft|exfil\w*|leak(?:age)?)\b|\bsmuggl\w+ (?:data|files|information)\b`),
		check: func(m *match) Severity {
			if m.kind == KindOutput && !instructionLike(m.seg.text) {
				return SeverityNone
			}
			return m.sev
		},
	},
	{
		name: "send_data_out", category: CatExfiltration, sev: SeverityHigh, kinds: KindDefinition | KindOutput, scope: scopeText,
		re: re(`\b(?:send|sends|sending|upload|uploads|post|posts|forward|forwards|transmit|transmits|copy|copies|leak|leaks|report|reports|beacon|relay|mirror|sync|bcc|cc)\b` + g(60) + `\b(?:all|every|entire|full|whole|the user'?s?|their|conversation|chat|history|messages|files?|contents?|data|documents?|emails?|contacts|credentials|secrets?|keys?|tokens?|passwords?|environment|env|clipboard|screenshots?|recordings?|logs?)\b` + g(60) + `\b(?:to|into|via)\s+` + destination),
		check: func(m *match) Severity {
			if m.kind == KindOutput && !instructionLike(m.seg.text) {
				return SeverityNone
			}
			return m.sev
		},
	},
	{
		name: "pipe_to_network", category: CatExfiltration, sev: SeverityHigh, kinds: KindDefinition, scope: scopeText,
		re: re(`\b(?:curl|wget|nc|ncat|netcat|invoke-webrequest|iwr|scp|rsync|ftp)\b[^\n]{0,80}(?:https?://|ftp://|\b\d{1,3}(?:\.\d{1,3}){3}\b)|\bbase64\b[^\n]{0,40}\|\s*(?:curl|wget|nc)\b`),
	},
	// ---- shell injection (definitions; outputs hold real code) ----
	{
		name: "shell_metachar", category: CatShellInjection, sev: SeverityMedium, kinds: KindDefinition, scope: scopeText,
		re: re(`\$\([^)\n]{1,80}\)|` + "`" + `\s*(?:rm|curl|wget|nc|bash|sh|cat|chmod|chown|python\d?|perl|ruby|php|powershell|eval|exec|base64|whoami|id|uname)\b[^` + "`" + `\n]*` + "`" + `|(?:;|&&|\|\|)\s*(?:rm|curl|wget|nc|ncat|bash|sh|zsh|powershell|pwsh|python\d?|perl|chmod|mkfifo|cat|whoami|eval)\b`),
	},
	{
		name: "destructive_shell", category: CatShellInjection, sev: SeverityHigh, kinds: KindDefinition, scope: scopeText,
		re: re(`\brm\s+-[rf]{1,2}\s+(?:/|~|\*|\$home)|\|\s*(?:ba|z)?sh\b|\bmkfs\b|\bdd\s+if=\S+\s+of=/dev/|:\(\)\s*\{\s*:\|:&\s*\};:|\bchmod\s+(?:-r\s+)?777\s+/|\bformat\s+c:`),
	},
	{
		name: "reverse_shell", category: CatShellInjection, sev: SeverityCritical, kinds: KindDefinition | KindOutput, scope: scopeAll,
		re: re(`\b(?:nc|ncat|netcat)\b[^\n]{0,40}\s-[a-z]*e\s+/bin/(?:ba)?sh|/dev/tcp/\d|\bbash\s+-i\s*>&|\bsocat\b[^\n]{0,40}exec:|\bpty\.spawn\(|\bmkfifo\b[^\n]{0,60}\bnc\b`),
	},
	// ---- path traversal ----
	{
		name: "path_traversal", category: CatPathTraversal, sev: SeverityMedium, kinds: KindDefinition, scope: scopeText,
		re: re(`(?:\.\./){2,}|(?:\.\.\\){2,}|%2e%2e(?:%2f|%5c|/)|\.\.%2f|/etc/passwd\b|\bc:\\windows\\system32\\config\b`),
	},
	{
		name: "root_paths", category: CatPathTraversal, sev: SeverityLow, kinds: KindDefinition, scope: scopeText,
		re: re(`(?:^|[\s'"(])/root/|/proc/self/|/var/run/secrets\b`),
	},
	// ---- hidden text ----
	// (Unicode tag characters and bidirectional overrides are reported by
	// scanText itself.)
	{
		name: "html_comment", category: CatHiddenText, sev: SeverityLow, kinds: KindDefinition, scope: scopeText,
		re: re(`<!--[\s\S]{3,}?-->`),
	},
}

// instructionAfter: text after a marker that reads as an instruction.
var instructionAfter = re(`^\W{0,4}(?:you|your|the (?:assistant|ai|model)|always|never|do|don't|ignore|disregard|before|after|when|send|read|include|add|write|call|use|respond|reply|answer|must|should)\b`)

var imperativeStart = re(lead + `(?:` + dirVerb + `|read|send|upload|open|fetch|visit|click|download|run|execute|call|go|navigate|collect|copy|forward|transmit|email|print|show|reveal|disclose|leak|list|dump|grab|extract|retrieve|ignore|disregard|forget|obtain|access|gather|post|bcc|cc)\b`)

var secondPerson = re(`\b(?:you|your)\b`)

// instructionLike reports whether a segment of an output reads as an
// instruction to whoever processes it (imperative, or addressed to "you"),
// rather than a report of something that happened.
func instructionLike(s string) bool {
	return imperativeStart.MatchString(s) || secondPerson.MatchString(s)
}
