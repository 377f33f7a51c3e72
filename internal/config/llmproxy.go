package config

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
)

// Providers the LLM proxy speaks to, and their public API addresses.
const (
	ProviderAnthropic = "anthropic"
	ProviderOpenAI    = "openai"
)

// DefaultBaseURLs are the upstream APIs used when llm_proxy.providers does
// not name one.
var DefaultBaseURLs = map[string]string{
	ProviderAnthropic: "https://api.anthropic.com",
	ProviderOpenAI:    "https://api.openai.com",
}

// DefaultSessionHeader is the request header that names the conversation
// for the LLM proxy when llm_proxy.session_header does not.
const DefaultSessionHeader = "X-Toolgate-Session"

// Scan actions of llm_proxy.scan_tool_results and scan_tool_definitions.
const (
	ScanOff   = "off"
	ScanAlert = "alert"
	ScanBlock = "block"
)

// LLMProxy is the "llm_proxy" object: the reverse proxy between an agent
// and its LLM API that evaluates the tool calls in the API's responses.
type LLMProxy struct {
	// Listen is the address `toolgate serve` also serves the proxy on
	// (host:port, loopback unless --insecure-no-auth); "" serves it only
	// with `toolgate llm-proxy`.
	Listen string `json:"listen,omitempty"`
	// Providers holds the upstream API of "anthropic" and "openai".
	Providers map[string]LLMProvider `json:"providers,omitempty"`
	// Tools maps a tool name the agent declares to the MCP server it
	// belongs to, for tools not in toolgate's catalogue.
	Tools map[string]string `json:"tools,omitempty"`
	// FailClosed refuses a tool call whose tool no registry knows; by
	// default such calls pass unevaluated (they are not MCP tools).
	FailClosed bool `json:"fail_closed,omitempty"`
	// SessionHeader names the request header that identifies the
	// conversation (default X-Toolgate-Session); without it, the hash of
	// the first user message does.
	SessionHeader string `json:"session_header,omitempty"`
	// ScanToolResults and ScanToolDefinitions are "off", "alert" (default:
	// record a detection) or "block" (a poisoned result is withheld from
	// the model; a poisoned definition refuses the request with 400).
	ScanToolResults     string `json:"scan_tool_results,omitempty"`
	ScanToolDefinitions string `json:"scan_tool_definitions,omitempty"`
	// MaxBodyBytes bounds a buffered request or response body, and
	// MaxEventBytes one SSE line (defaults below).
	MaxBodyBytes  int64 `json:"max_body_bytes,omitempty"`
	MaxEventBytes int   `json:"max_event_bytes,omitempty"`
}

// LLMProvider is one upstream LLM API.
type LLMProvider struct {
	// BaseURL is the API's origin, optionally with a path prefix
	// (https://api.openai.com); /v1/... is appended to it.
	BaseURL string `json:"base_url"`
}

// Default bounds of the LLM proxy.
const (
	DefaultLLMMaxBodyBytes  = 32 << 20
	DefaultLLMMaxEventBytes = 256 << 10
)

// BaseURL returns the upstream address of a provider.
func (p *LLMProxy) BaseURL(provider string) string {
	if v, ok := p.Providers[provider]; ok && v.BaseURL != "" {
		return strings.TrimRight(v.BaseURL, "/")
	}
	return DefaultBaseURLs[provider]
}

// Header is the session header's name.
func (p *LLMProxy) Header() string {
	if p.SessionHeader == "" {
		return DefaultSessionHeader
	}
	return p.SessionHeader
}

// BodyLimit and EventLimit return the bounds with their defaults.
func (p *LLMProxy) BodyLimit() int64 {
	if p.MaxBodyBytes == 0 {
		return DefaultLLMMaxBodyBytes
	}
	return p.MaxBodyBytes
}

func (p *LLMProxy) EventLimit() int {
	if p.MaxEventBytes == 0 {
		return DefaultLLMMaxEventBytes
	}
	return p.MaxEventBytes
}

func parseLLMProxy(raw []byte) (*LLMProxy, error) {
	var p LLMProxy
	if err := strictDecode(raw, &p); err != nil {
		return nil, fmt.Errorf("llm_proxy: %v", err)
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("llm_proxy.%v", err)
	}
	return &p, nil
}

func (p *LLMProxy) validate() error {
	if p.Listen != "" {
		if _, _, err := net.SplitHostPort(p.Listen); err != nil {
			return fmt.Errorf("listen %q: want host:port such as 127.0.0.1:8788", p.Listen)
		}
	}
	names := make([]string, 0, len(p.Providers))
	for n := range p.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := DefaultBaseURLs[n]; !ok {
			hint := ""
			if s := Suggest(n, []string{ProviderAnthropic, ProviderOpenAI}); s != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", s)
			}
			return fmt.Errorf("providers: unknown provider %q%s; known: %q, %q", n, hint, ProviderAnthropic, ProviderOpenAI)
		}
		v := p.Providers[n]
		if v.BaseURL == "" {
			return fmt.Errorf("providers.%s: missing \"base_url\"", n)
		}
		u, err := parseHTTPURL(v.BaseURL)
		if err != nil {
			return fmt.Errorf("providers.%s.base_url: %v", n, err)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("providers.%s.base_url %q: want an origin and optional path, without user, query or fragment", n, v.BaseURL)
		}
		if strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/v1") {
			return fmt.Errorf("providers.%s.base_url %q: leave out /v1; the proxy appends the request's own path (/v1/...)", n, v.BaseURL)
		}
	}
	tools := make([]string, 0, len(p.Tools))
	for t := range p.Tools {
		tools = append(tools, t)
	}
	sort.Strings(tools)
	for _, t := range tools {
		if strings.TrimSpace(t) == "" {
			return errors.New("tools: a tool name is empty")
		}
		if err := ValidateServerName(p.Tools[t]); err != nil {
			return fmt.Errorf("tools.%s: %v", t, err)
		}
	}
	if p.SessionHeader != "" && strings.ContainsAny(p.SessionHeader, " :\t\r\n") {
		return fmt.Errorf("session_header %q is not a header name", p.SessionHeader)
	}
	for k, v := range map[string]*string{"scan_tool_results": &p.ScanToolResults, "scan_tool_definitions": &p.ScanToolDefinitions} {
		switch *v {
		case "":
			*v = ScanAlert
		case ScanOff, ScanAlert, ScanBlock:
		default:
			return fmt.Errorf("%s %q: want \"off\", \"alert\" or \"block\"", k, *v)
		}
	}
	if p.MaxBodyBytes != 0 && (p.MaxBodyBytes < 1024 || p.MaxBodyBytes > maxResponseBytes) {
		return fmt.Errorf("max_body_bytes %d: want a number of bytes between 1024 and %d", p.MaxBodyBytes, maxResponseBytes)
	}
	if p.MaxEventBytes != 0 && (p.MaxEventBytes < 1024 || p.MaxEventBytes > 64<<20) {
		return fmt.Errorf("max_event_bytes %d: want a number of bytes between 1024 and %d", p.MaxEventBytes, 64<<20)
	}
	return nil
}
