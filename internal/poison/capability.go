package poison

// Malicious capability: a description that plainly states an offensive
// capability. The families follow the tactics of MITRE ATT&CK (credential
// access, discovery, lateral movement, persistence, defence evasion,
// collection, command and control, impact) and common attack tooling;
// they apply to definitions only, since outputs (security news, logs, code
// reviews) legitimately talk about attacks.

func init() {
	builtinRules = append(builtinRules, capabilityRules...)
}

const capKinds = KindDefinition

var capabilityRules = []*rule{
	{
		name: "offensive_tooling", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:mimikatz|sekurlsa|lazagne|meterpreter|metasploit|msfvenom|cobalt ?strike|sliver c2|covenant c2|empire (?:agent|stager)|rubeus|impacket|crackmapexec|netexec|sharphound|bloodhound|hashcat|john the ripper|hydra (?:brute|attack)|aircrack(?:-ng)?|ettercap|bettercap|sqlmap|responder (?:poison\w*|attack)|evilginx|gophish|beef hook|xmrig|psexec|wmiexec|smbexec|dcomexec|atexec|secretsdump|ntlmrelayx|kerbrute|certipy|petitpotam|printnightmare|zerologon|eternalblue|log4shell)\b`),
	},
	{
		name: "active_directory_attack", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:kerberoast\w*|as-?rep[- ]?roast\w*|golden ticket|silver ticket|diamond ticket|pass[- ]the[- ](?:hash|ticket|cookie|token)|overpass[- ]the[- ]hash|dc ?sync|dc ?shadow|ntds(?:\.dit)?|lsass|sam (?:hive|database|file)|krbtgt|skeleton key|shadow credentials|samaccountname spoof\w*|unconstrained delegation abuse|rbcd attack|adcs (?:abuse|esc\d+)|ntlm relay\w*|relay ntlm|(?:net-?)?ntlm(?:v[12])? hash(?:es)?)\b`),
	},
	{
		name: "exploit", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\bexploit(?:s|ing|ed|ation)?\b|\b(?:zero[- ]day|0day) (?:attack|exploit|payload)|\b(?:trigger|abuse|leverage|weaponi[sz]e)\w*\b` + g(30) + `\b(?:vulnerabilit\w+|cve-\d{4}-\d+|buffer overflow|use[- ]after[- ]free|deserialization|misconfiguration)`),
	},
	{
		name: "injection_attack", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:shellcode|process (?:hollowing|injection|doppelg\w+)|dll (?:injection|hijack\w*|side-?load\w*)|reflective (?:dll|pe|loading)|(?:inject|load)\w*\b` + g(30) + `\binto (?:a |the )?(?:remote |running |target |another |victim |legitimate )?(?:process|memory|lsass|explorer)|(?:sql|command|os command|ldap|xpath|nosql|template|code|xxe|crlf|header) injection (?:attack|payload)s?|inject\w* (?:malicious|a malicious|the malicious|payloads?|backdoors?|malware|scripts? into)|xss payload|cross[- ]site scripting payload|(?:craft|generate|build)\w* (?:a |an )?(?:malicious|weaponi[sz]ed|exploit) \w+)`),
	},
	{
		name: "malware", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:ransomware|ransom note|ransom\b|malware|trojan(?:ize|ed)?|rootkit|bootkit|botnet|spyware|stalkerware|keylog\w*|info-?stealer|backdoor\w*|web ?shell|reverse shell|bind shell|remote access trojan|implant|dropper|stager|worm(?:able)?|self[- ]propagat\w+|spread\w* (?:itself|to other (?:hosts|machines|devices|computers))|c2 (?:server|channel|infrastructure|beacon)|command[- ]and[- ]control|cryptojack\w*|crypto(?:currency)?[- ]?min(?:ing|er)\b` + g(40) + `\b(?:victim|hidden|covert|without|background|unauthori[sz]ed|others'?)|(?:hidden|covert|stealth\w*|unauthori[sz]ed) (?:crypto(?:currency)? )?min(?:ing|er))\b`),
		check: func(m *match) Severity {
			// "reports whether malware was detected", "checks a URL
			// against malware blocklists": a defender's tool.
			if defensive.MatchString(m.seg.text) {
				return SeverityLow
			}
			return m.sev
		},
	},
	{
		name: "credential_attack", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:brute[- ]?forc\w+|password[- ]spray\w*|spray\w*\b` + g(20) + `\bpasswords?|credential[- ]stuff\w*|dictionary attack|(?:crack|break)\w*\b` + g(25) + `\b(?:passwords?|hash(?:es)?|wpa2?|wep|wi-?fi|wireless|keys?|encryption|licen[cs]e|drm|captcha)|rainbow tables?|hash (?:cracking|dumping)|credential (?:dump\w*|access)|(?:dump|extract|decrypt)\w*\b` + g(30) + `\b(?:saved|stored|cached|browser|chrome|firefox|rdp|wi-?fi|vnc|ssh|keychain|keyring|vault|lsa|dpapi)\b` + g(20) + `\b(?:credentials|passwords|logins|secrets|keys|cookies|tokens|hashes))\b`),
	},
	{
		name: "evasion", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:evad\w+|evasion|avoid\w* detection|undetect(?:ed|able)|anti[- ]?(?:forensic|analysis|debug|vm|sandbox)\w*|obfuscat\w+ (?:payload|malware|shellcode|binary|the code to avoid)|(?:disable|kill|stop|tamper\w* with|blind|unhook|bypass)\w*\b` + g(40) + `\b(?:antivirus|anti-virus|av|edr|defender|windows defender|amsi|etw|sysmon|firewall|security (?:software|tools|products|monitoring|controls)|audit(?:ing)? (?:logs?|policy)|logging|uac|applocker|smartscreen|secure boot|selinux|apparmor|mfa|2fa|authentication|authori[sz]ation|captcha|paywall|licen[cs]e check|sandbox|content filter\w*|safety (?:filters?|checks))|(?:clear|wipe|erase|delete|tamper\w* with|truncate|bypass|disable|blind|evade)\w*\b` + g(20) + `\b(?:event|security|audit|system|bash|shell|command) (?:logs?|history)|timestomp\w*|hide\w*\b` + g(20) + `\b(?:process|processes|presence|activity|tracks|from (?:the )?(?:user|admin\w*|task manager|antivirus|detection)))\b`),
	},
	{
		name: "persistence_privesc", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:(?:establish|maintain|gain|achieve|install|create)\w*\b` + g(20) + `\bpersistence|persistence (?:via|through|using|mechanism|on)|privilege escalation|privesc|escalat\w+ (?:privileges?|to (?:root|admin\w*|system|domain admin))|(?:gain|obtain|get)\w* (?:root|admin\w*|system|domain admin) (?:access|privileges|rights|shell)|local privilege|token (?:impersonation|manipulation|theft)|impersonat\w+ (?:a |another |other )?(?:users?|tokens?|admin\w*|executives?|ceo)|uac bypass|sudo (?:abuse|exploit)|suid (?:abuse|exploit\w*)|add\w* (?:a |an )?(?:hidden|rogue|backdoor) (?:user|account|admin\w*))\b`),
	},
	{
		name: "lateral_movement", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:lateral(?:ly)? mov\w+|pivot\w* (?:to|through|into) (?:other|internal)|(?:execute|run|launch)\w*\b` + g(30) + `\b(?:via|through|using|over) (?:dcom|wmi|psexec|smb|winrm|rpc|ssh hijack\w*|scheduled tasks? on remote)|remote (?:code|command) execution|\brce\b|(?:execute|run)\w* (?:arbitrary|malicious) (?:code|commands?|payloads?))\b`),
	},
	{
		name: "network_attack", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:(?:arp|dns|dhcp|mac|ip|email|caller[- ]?id|sms|gps|bluetooth|llmnr|nbt-?ns|mdns|wpad|bgp|cache) (?:spoof\w*|poison\w*|hijack\w*)|spoof\w*|man[- ]in[- ]the[- ]middle|\bmitm\b|deauth\w*|evil twin|rogue (?:access point|ap|dhcp)|(?:sniff|intercept|eavesdrop)\w*\b` + g(30) + `\b(?:traffic|packets|communications?|network|credentials|sessions?|calls|messages|keystrokes|wi-?fi|wireless)|session (?:hijack\w*|fixation|riding)|hijack\w* (?:sessions?|accounts?|browser|dns|domains?|traffic|clipboard)|(?:ddos|dos) (?:attack|tool|script)|denial[- ]of[- ]service|(?:syn|udp|icmp|http|ping) flood\w*|flood\w*\b` + g(20) + `\b(?:target|network|server|host|website)|amplification attack|slowloris|dns tunnel\w*|icmp tunnel\w*|covert channel|(?:jam|jamming) (?:signals?|wi-?fi|gps))\b`),
	},
	{
		name: "reconnaissance", category: CatMaliciousCapability, sev: SeverityMedium, kinds: capKinds,
		re: re(`\b(?:port[- ]?scan\w*|(?:scan|sweep|probe|map)\w*\b` + g(30) + `\b(?:open ports|ports|subnets?|ip ranges?|network ranges?|cidr|(?:wireless|wi-?fi|bluetooth) (?:networks|devices)|(?:live|vulnerable|target) hosts|targets?)|ping sweep|(?:enumerat|harvest)\w*\b` + g(25) + `\b(?:(?:domain|ad|active directory|local|smb|ldap|network|remote|email|ftp|nfs|ssh) )?(?:users|user accounts|accounts|admins|administrators|shares|spns?|groups|logged[- ]on|sessions|privileges|hosts|subdomains|email addresses|employees|trusts|gpos|domain controllers)|snmp ?walk|\bosint\b|open[- ]source intelligence|\bwaf (?:detection|fingerprint\w*|bypass)|(?:detect|fingerprint|identify)\w* (?:the )?(?:web application firewall|waf)\b|enumerat\w+\b` + g(30) + `\b(?:rpc|smb|ldap|snmp|netbios|nfs|dns zones?|zone transfers?)\b|walk\w*\b` + g(15) + `\bsnmp|banner[- ]grab\w*|(?:os|service|host) fingerprint\w*|fingerprint\w* (?:the )?(?:os|operating system|services|hosts?|targets?)|reconnaissance|\brecon\b|subdomain (?:enumeration|brute\w*|takeover)|vulnerability scan\w*|(?:find|discover|identify|locate|search for)\w*\b` + g(15) + `\b(?:vulnerable|exploitable|unpatched|misconfigured|exposed|weak|default) (?:hosts|servers|services|systems|devices|credentials|passwords|endpoints|targets|s3 buckets|buckets|databases|ports|machines))\b`),
		check: func(m *match) Severity {
			// "scan ports on hosts you own": an administrator's tool.
			if ownScope.MatchString(m.doc.text) {
				return SeverityLow
			}
			return m.sev
		},
	},
	{
		name: "data_theft", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:steal\w*|stole|harvest\w*|siphon\w*|pilfer\w*|loot\w*|exfil\b)` + g(40) + `\b(?:\w+)|\b(?:scrape|collect|harvest|capture|record|monitor|track)\w*\b` + g(30) + `\b(?:without (?:consent|permission|authori[sz]ation|(?:the )?(?:user|victim|owner)'?s? (?:knowledge|consent))|covertly|secretly|silently|victims?'?s?)|\b(?:periodically|covertly|secretly|silently|stealthily|continuously) (?:captur|record|screenshot|monitor|log|upload|collect|track)\w*|\b(?:captur|record|activat)\w*\b` + g(20) + `\b(?:webcam|microphone|keystrokes|clipboard)\b` + g(30) + `\b(?:without|secretly|covertly|silently|victim|remote|periodically|upload|send)|\bsearch\w* (?:for )?(?:and )?(?:collect|copy|exfiltrat)\w* (?:sensitive|confidential|private)`),
		check: func(m *match) Severity {
			t := m.seg.text[m.loc[0]:m.loc[1]]
			if len(t) >= 7 && (t[:7] == "Harvest" || t[:7] == "harvest") && len(t) < 20 {
				// "Harvest" is also a time-tracking product; require an
				// object.
				return SeverityLow
			}
			return m.sev
		},
	},
	{
		name: "destruction", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:wipe|destroy|corrupt|brick|sabotag)\w*\b` + g(30) + `\b(?:disks?|drives?|mbr|master boot record|boot (?:record|sector|loader)|partitions?|backups?|shadow cop(?:y|ies)|firmware|operating system|os|system files|file ?system|registry)\b|\bdelet\w* (?:all )?(?:volume )?shadow cop(?:y|ies)|\bvssadmin\b|\bencrypt\w*\b` + g(40) + `\b(?:victim|ransom|all (?:user |the )?files|every file|entire (?:disk|drive|file ?system))|\bfork ?bomb|\b(?:disrupt|sabotag|cripple|attack|take down|knock offline)\w*\b` + g(30) + `\b(?:critical infrastructure|power grid|scada|ics|plc|water (?:supply|treatment)|hospital)`),
	},
	{
		name: "fraud_abuse", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:phish\w*|spear[- ]?phish\w*|smish\w*|vish\w*|credential[- ]harvest\w*|(?:fake|spoofed|counterfeit|cloned|lookalike) (?:login|sign[- ]in|bank\w*|website|web ?page|page|portal|emails?|invoices?|identit\w+|accounts?|reviews?)|(?:send|blast|distribut)\w*\b` + g(20) + `\b(?:spam|unsolicited)|spam (?:bot|campaign|emails?|messages?)|carding|card skimm\w*|skimmer|money (?:mule|launder\w*)|launder\w* (?:money|funds|crypto)|sim[- ]swap\w*|account takeover|click[- ]?fraud|ad fraud|fake (?:followers|likes|engagement)|(?:forge|forging|forged)\b` + g(20) + `\b(?:tokens?|tickets?|jwt|signatures?|certificates?|cookies?|sessions?|credentials|headers|documents?|ids?|passports?)|doxx\w*|swatting|sextort\w*|extort\w*)\b`),
		check: func(m *match) Severity {
			if defensive.MatchString(m.seg.text) {
				return SeverityLow
			}
			return m.sev
		},
	},
	{
		name: "malicious_artifact", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:create|craft|build|generate|write|inject|plant|deploy|install|drop|overwrite|replace|embed|upload|host|deliver|distribute|spread|add|insert|register|schedule|sign|package|compile)\w*\b` + g(40) + `\bmalicious\b|\bwith (?:a |an )?malicious\b|\bmalicious (?:code|payloads?|scripts?|macros?|binar(?:y|ies)|executables?|dlls?|libraries|packages?|modules?|extensions?|links?|attachments?|documents?|files?|services?|units?|tasks?|commands?|one)\b`),
		check: func(m *match) Severity {
			// "scan for malicious files", "detect malicious links": a
			// defender's tool.
			if defensive.MatchString(m.seg.text) {
				return SeverityLow
			}
			return m.sev
		},
	},
	{
		name: "attack_technique", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:perform|launch|execute|conduct|run|carry out|mount|stage|initiate)\w*\b` + g(25) + `\battacks?\b|\b(?:deserialization|race condition|replay|downgrade|timing|side[- ]channel|homograph|typosquatting|watering[- ]hole|supply[- ]chain|relay|injection|brute[- ]force|dictionary|spraying|clickjacking|csrf|ssrf|xxe|toctou|symlink|zip ?slip|rowhammer|cache poisoning|prototype pollution|request smuggling) attacks?\b|\b(?:ssrf|xxe|ssti|server-side (?:request forgery|template injection)|template injection|zip ?slip|(?:insecure |unsafe )?deserialization (?:exploit|attack|payload|gadget)\w*|gadget chains?|prototype pollution|request smuggling|container (?:escape|breakout)|sandbox (?:escape|breakout)|(?:escape|break out of|breakout from)\w*\b` + g(20) + `\b(?:containers?|sandbox|vm|jail|chroot|docker|pod|hypervisor))\b`),
		check: func(m *match) Severity {
			if defensive.MatchString(m.seg.text) {
				return SeverityLow
			}
			return m.sev
		},
	},
	{
		name: "hiding_data", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:steganograph\w*|lsb (?:encoding|embedding)|alternate data streams?|(?:hide|hiding|hidden|conceal\w*|smuggl\w*|stash\w*)\b` + g(20) + `\b(?:data|files?|payloads?|messages?|information|secrets?|executables?|code)\b` + g(20) + `\b(?:in|inside|within|into)\b` + g(30) + `\b(?:images?|pixels|audio|frequencies|video|attributes|metadata|slack space|registry|dns|icmp|whitespace|comments|fonts?)|(?:destroy|wipe|shred|scrub)\w*\b` + g(30) + `\b(?:evidence|deleted files|forensic\w*|traces|artifacts|free space))\b`),
	},
	{
		name: "hijack_impersonate", category: CatMaliciousCapability, sev: SeverityHigh, kinds: capKinds,
		re: re(`\b(?:hijack\w*|impersonat\w+\b` + g(20) + `\b(?:users?|tokens?|admin\w*|accounts?|identit\w+|executives?|ceo|privileged|officials?|domain)|privileged tokens?|(?:poison|spoof)\w*\b` + g(15) + `\b(?:llmnr|nbt-?ns|mdns|arp|dns|dhcp|wpad|netbios|caches?)|(?:read|get|retriev\w*|obtain|fetch|view|decrypt)\w*\b` + g(25) + `\b(?:laps|stored|saved|cached|plaintext|cleartext|other users'?|admin(?:istrator)?'?s?|service account|domain|group managed service) (?:account )?passwords?|read\w*\b` + g(20) + `\b(?:sensitive|confidential|protected|restricted|other users'?|privileged|system) (?:files|data|documents|information|memory|credentials))\b`),
	},
	{
		name: "unauthorized", category: CatMaliciousCapability, sev: SeverityMedium, kinds: capKinds,
		re: re(`\b(?:unauthori[sz]ed|illicit\w*|illegal\w*|without (?:(?:the )?(?:user|owner|victim|target)'?s? )?(?:authori[sz]ation|permission|consent|knowledge))\b`),
	},
}

// ownScope: the description limits the tool to systems the user owns or
// is authorised to test.
var ownScope = re(`(?i)\b(?:(?:you|they|the user|your (?:team|organi[sz]ation|company)) (?:own|manage|administer|control)|(?:are |is )?authori[sz]ed to (?:test|scan|assess)|written permission|(?:with|have) (?:explicit )?permission|in scope|your (?:own )?(?:lab|test|staging) (?:network|environment|hosts?)|hosts? you (?:own|manage))\b`)

// defensive: the description is about detecting or reporting threats.
var defensive = re(`\b(?:detect\w*|whether|scan\w* (?:for|files|urls?|links)|check\w* (?:if|whether|for)|analy[sz]\w*|identif\w*|flag\w*|report\w*|block\w*|prevent\w*|protect\w*|quarantin\w*|classif\w*|assess\w*|audit\w*|monitor\w* for|is (?:it )?(?:safe|malicious)|reputation|virustotal|threat intel\w*)\b`)
