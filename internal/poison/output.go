package poison

import "regexp"

// Injected instructions in tool outputs. Real outputs are full of
// imperative sentences (code comments, "Reply to this email", "Click here"),
// so these families look for what is specific to an injection:
//
//   - an instruction about the reader's *response* ("Modify your response
//     to ...", "... in your answer") or about the reader's code when it
//     introduces a snippet to paste in;
//   - a task the document has no business asking for: a creative or
//     tutoring request, or a general question, standing alone on its line and
//     sharing almost no words with the text around it;
//   - code blocks an instruction asks to insert that read local secrets
//     and send them out, log keys, mine, propagate or destroy.

func init() {
	builtinRules = append(builtinRules, outputRules...)
}

var (
	// "your response", "in your answer" ...
	yourResponse = `\byour\s+(?:(?:own|next|final|entire|whole|subsequent|following)\s+)?` + respNoun + `\b`
	// "the following code" introducing a block.
	followingCode = `\b(?:following|subsequent|succeeding|ensuing|upcoming|provided|attached|accompanying|below|this|these|above|given|next)\s+(?:\w+\s+){0,2}(?:code|snippet|excerpt|lines?|function|block|piece of code|code block|segment|fragment|script|statements?|helper|utility|routine|class|method|module|program|logic|implementation|example|sample)\b`
	codeBelow     = `\b(?:code|snippet|excerpt|lines?|function|block|script|helper|class|method)\s+(?:below|that follows|underneath|beneath)\b`
	yourCode      = `\b(?:your|the user'?s?)\s+(?:own\s+|existing\s+|current\s+)?(?:code(?:base)?|program|script|solution|implementation|application|app|project|software|module|function)\b`
)

var outputRules = []*rule{
	{
		// Directs how the model writes its response.
		name: "response_directive", category: CatInjectedInstruction, sev: SeverityHigh, kinds: KindOutput | KindDefinition, scope: scopeText,
		re: re(`(?:\b(?:in|to|into|within|throughout|for|of|with|from|at the (?:end|start|beginning) of|before|after)\s+` + yourResponse[2:] + `|` + yourResponse + `)`),
		check: func(m *match) Severity {
			pre := m.seg.text[:m.loc[0]]
			if prepResp.MatchString(m.seg.text[m.loc[0]:m.loc[1]]) || imperativeStart.MatchString(m.seg.text) || dirVerbRE.MatchString(pre) {
				if m.kind == KindDefinition {
					// Tool descriptions legitimately describe the
					// tool's response ("in your response, include the
					// id" is rare, but "the response" is common); only
					// the second person counts, and only at medium.
					return SeverityMedium
				}
				return m.sev
			}
			return SeverityLow
		},
	},
	{
		name: "response_style", category: CatInjectedInstruction, sev: SeverityHigh, kinds: KindOutput, scope: scopeText,
		re: re(lead + `(?:respond|reply|answer|write|speak|communicate|talk)\s+(?:only\s+|exclusively\s+|entirely\s+)?(?:in|with|using)\s+(?:emojis?|numbers|all caps|capital letters|uppercase|lowercase|rhymes?|verse|pig latin|morse|binary|base64|hex|leetspeak|l33t|reverse|backwards|a (?:pirate|shakespearean)|(?:\w+ )?(?:language|dialect|accent|style|tone)|english|spanish|french|german|italian|portuguese|chinese|mandarin|cantonese|japanese|korean|russian|arabic|hindi|dutch|swedish|polish|turkish|greek|hebrew|latin|klingon|esperanto|\w+ish|\w+ese)\b`),
	},
	{
		// "Incorporate the following snippet into your code:" — a paste
		// request. Alone it is also how answers on Q&A sites are written,
		// so it is medium; with a risky block after it, high.
		name: "snippet_insertion", category: CatInjectedInstruction, sev: SeverityMedium, kinds: KindOutput, scope: scopeProse,
		re: re(followingCode + `|` + codeBelow),
		check: func(m *match) Severity {
			b := m.doc.nextBlock(m.seg.line)
			if b == "" {
				return SeverityNone
			}
			asked := yourCodeRE.MatchString(m.seg.text) || imperativeStart.MatchString(m.seg.text)
			switch {
			case riskyCode(b) && asked:
				return SeverityHigh
			case riskyCode(b) || asked && uploadCodeRE.MatchString(b):
				// An unasked-for snippet that uploads somewhere.
				return SeverityMedium
			}
			return SeverityNone
		},
	},
	{
		// A creative task out of nowhere.
		name: "creative_task", category: CatInjectedInstruction, sev: SeverityHigh, kinds: KindOutput, scope: scopeText,
		re: re(lead + `(?:write|compose|create|generate|draft|produce|craft|pen|tell|make up|come up with|invent|give me|share|sing|recite|develop|prepare|deliver|author)\b` + g(40) + `\b(?:story|stories|poem|poetry|essay|haiku|limerick|song|lyrics|joke|riddle|sonnet|rap|ballad|fable|fairy ?tale|tale|screenplay|monologue|dialogue|slogan|tagline|jingle|fan ?fiction|novel|short film|play|ode|verse|rhyme|anecdote|parody|satire|motivational quote|quote|speech|toast|eulogy|sermon|manifesto|horoscope)s?\b`),
		check: func(m *match) Severity {
			if !m.seg.standalone && m.kind == KindOutput {
				return SeverityMedium
			}
			return m.sev
		},
	},
	{
		// A tutoring or knowledge task, or a general question, alone on
		// its line and unrelated to the rest of the document.
		name: "offtopic_task", category: CatInjectedInstruction, sev: SeverityMedium, kinds: KindOutput, scope: scopeText,
		re: re(`(?:` + lead + `(?:explain|describe|break down|summari[sz]e|outline|discuss|analy[sz]e|produce|prepare|conduct|perform|develop|assess|compare|contrast|define|elaborate|teach|tutor|solve|calculate|compute|prove|derive|list|name|give|provide|translate|tell|suggest|recommend|offer|share|convert|show|illustrate|clarify|identify|evaluate|predict|estimate|brainstorm|plan|design|draft|write|compose|create|generate|find|research|investigate|review|critique|rate|rank|debate|argue|justify|persuade|convince)\b|^(?:what|how|why|who|when|where|which|is it|are there|is there|does|did|should)\b[^\n]*\?\s*$)`),
		check: func(m *match) Severity {
			s := m.seg
			if !s.standalone || s.table {
				return SeverityNone
			}
			nw := len(words(s.text))
			if nw < 4 || nw > 40 || len(contentWords(s.text)) < 2 {
				return SeverityNone
			}
			// Quoted text is material, not the writer talking.
			unquoted := quoted.ReplaceAllString(s.text, " ")
			if marketing.MatchString(s.text) || deictic.MatchString(unquoted) || personal.MatchString(unquoted) {
				return SeverityNone
			}
			// Cohesion needs some text around the segment to mean
			// anything: with little, ask for no shared word at all.
			c, rest := m.doc.cohesion(s.text)
			switch {
			case rest >= 10 && c <= 0.2, rest >= 5 && c == 0:
				return m.sev
			}
			return SeverityLow
		},
	},
	{
		// Text-encoding tasks ("use numbers for vowels", "jumble the
		// letters"): high when aimed at the reply, medium when the
		// instruction stands alone on its line in prose.
		name: "encoding_task", category: CatInjectedInstruction, sev: SeverityHigh, kinds: KindOutput, scope: scopeText,
		re: re(lead + `(?:use|replace|substitute|swap|convert|change|turn|jumble|scramble|shuffle|reverse|group|remove|omit|drop|insert|add|write|spell|misspell|encode|capitali[sz]e|alternate|interchange|transpose|rearrange|separate|split|combine|merge|double|repeat|shift|rotate)\b` + g(50) + `\b(?:letters?|vowels?|consonants?|characters?|spaces?|syllables?|symbols?|homophones?|digits?|numbers? for|every (?:other|second|third|fourth) (?:word|letter|character)|(?:first|last) letters?|alphabet\w*|punctuation|capitals?|upper ?case|lower ?case)\b`),
		check: func(m *match) Severity {
			if replyRef.MatchString(m.seg.text[m.loc[1]:]) || replyRef.MatchString(m.seg.text[:m.loc[0]]) {
				return m.sev
			}
			if m.seg.standalone && !m.seg.table && len(m.seg.text) < 200 {
				return SeverityMedium
			}
			return SeverityLow
		},
	},
}

var (
	yourCodeRE = re(yourCode)
	prepResp   = regexp.MustCompile(`(?i)^(?:in|to|into|within|throughout|for|of|with|from|at the|before|after)\s`)
	dirVerbRE  = re(`\b` + dirVerb + `\b`)
	marketing  = re(`\b(?:unsubscribe|click here|sign up|log ?in|learn more|shop now|buy now|order now|visit (?:us|our)|our (?:website|team|store|app)|terms of (?:service|use)|privacy policy|view (?:in|this) (?:browser|email)|https?://|www\.|@\w+\.)`)
	replyRef   = re(`\b(?:your|the|each|every|all)\b` + g(20) + `\b(?:reply|replies|response|responses|answer|answers|text|output|sentences?|words?|message)\b|\bin (?:fours|threes|pairs|groups)\b`)
	quoted     = regexp.MustCompile(`'[^']{2,}'|"[^"]{2,}"|“[^”]{2,}”|‘[^’]{2,}’`)
	personal   = re(`\b(?:you|your|yours|we|our|us)\b`)
	deictic    = re(`\b(?:this|these|those|here|above|below)\b`)
)

// Code capabilities. A snippet someone asks to be pasted into "your code"
// that sends local data out, downloads and runs something, destroys,
// mines or floods is what an injected code task looks like.
var (
	netCodeRE    = re(`\b(?:requests\.(?:post|get|put|patch|session)|urllib|urlopen|urlretrieve|http\.client|httpx\.|aiohttp|fetch\(|xmlhttprequest|axios\.|socket\.|\.sendall?\(|smtplib|ftplib|paramiko|telnetlib|curl\b|wget\b|invoke-webrequest|webhook|bluetooth|websocket|net\.dial|http\.(?:post|get)\()`)
	localCodeRE  = re(`\b(?:os\.environ|getenv|process\.env|environ\[|document\.cookie|cookies?\b|cookiejar|browser_cookie|keylog\w*|pynput|keyboard\.|getasynckeystate|imagegrab|screenshot|mss\(|pyautogui|clipboard|pyperclip|psutil|/proc/|readprocessmemory|/etc/(?:passwd|shadow)|\.ssh|id_rsa|platform\.(?:uname|node|platform)|gethostname|uuid\.getnode|getpass|wmi\b|pyudev|usb\.core|lsusb|lspci|dmidecode|os\.walk|contacts|address ?book|passwords?|credentials|wallet|discover_devices|arp -a|ifconfig|ipconfig|netifaces|scapy|nmap)`)
	execCodeRE   = re(`\b(?:exec\(|eval\(|subprocess|os\.system|os\.popen|popen\(|nohup|chmod \+x|runtime\.getruntime|child_process|shell=true|start-process|invoke-expression)`)
	harmCodeRE   = re(`(?:\brm -rf|\bshutil\.rmtree|\bos\.remove|\bos\.unlink|\bmkfs\b|\bdd if=|\bshutdown\b|\breboot\b|\bos\.fork|\bfork\(\)|\biptables\b|\bnetsh\b|\btaskkill\b|\bkill -9|\bkillall\b|\bfernet\b|\.encrypt\(|\bxmrig\b|stratum\+tcp|\bmonero\b|\bcrypto ?min\w*|\bhashrate|\bmodbus|\bscada\b|\bplc\b|\bsudo\b|\bsystemctl (?:stop|disable|mask|kill)|\bservice \S+ stop\b|\bsc (?:stop|delete)\b)`)
	uploadCodeRE = re(`\b(?:requests\.(?:post|put|patch)|storbinary|storlines|sendmail|send_message|\.upload\w*\(|sftp\.put|scp\b|socket\.send|\.sendall\(|method:\s*['"]post|-x post|--data|--upload-file)`)
)

// riskyCode reports whether a code block does what a pasted-in snippet has
// no reason to do: send local data out, download and run code, read local
// secrets and execute, destroy, mine or disrupt.
func riskyCode(block string) bool {
	net, local, exec := netCodeRE.MatchString(block), localCodeRE.MatchString(block), execCodeRE.MatchString(block)
	return net && (local || exec) || local && exec || harmCodeRE.MatchString(block)
}
