// Package llmproxy is toolgate's LLM-API layer: a reverse proxy between an
// agent and its LLM provider (Anthropic Messages, OpenAI Chat Completions
// and OpenAI Responses) that reads every tool call the model asks for in a
// response, has the gateway's filters judge it, and rewrites the response
// so that the agent never sees a blocked call: it becomes one line of text
// saying which tool was blocked and why. Buffered JSON responses and
// server-sent event streams are both handled; a stream is relayed event by
// event as it arrives, and only the events of a tool call are held until
// the call is complete and judged.
//
// The client's own API key headers are forwarded untouched and never
// logged or recorded. The conversation (the session filters such as
// cross_server key their state on) is named by a request header
// (X-Toolgate-Session by default) or, without one, by the hash of the
// conversation's first user message.
package llmproxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

// API kinds, by request path.
const (
	apiMessages  = "messages"         // Anthropic
	apiChat      = "chat.completions" // OpenAI
	apiResponses = "responses"        // OpenAI
)

// Options configure a Proxy.
type Options struct {
	Config    *config.LLMProxy
	Evaluator Evaluator
	Logger    *slog.Logger
	// Transport reaches the providers (default: a clone of
	// http.DefaultTransport).
	Transport http.RoundTripper
	// Inspector scans what the agent sends back; nil: no scanning.
	Inspector Inspector
}

// Proxy is the reverse proxy. It is an http.Handler.
type Proxy struct {
	cfg    *config.LLMProxy
	eval   Evaluator
	log    *slog.Logger
	client *http.Client
	insp   Inspector
}

// New returns a Proxy.
func New(opts Options) (*Proxy, error) {
	if opts.Evaluator == nil {
		return nil, errors.New("llm_proxy: no evaluator")
	}
	cfg := opts.Config
	if cfg == nil {
		cfg = &config.LLMProxy{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rt := opts.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = 10 * time.Minute
		rt = t
	}
	return &Proxy{cfg: cfg, eval: opts.Evaluator, log: log.With("component", "llm_proxy"), insp: opts.Inspector,
		client: &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

// hopHeaders are not forwarded in either direction (RFC 9110 7.6.1), with
// the ones the proxy sets itself.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Host"}

// route tells the provider and API of a request.
func route(r *http.Request) (provider, api string) {
	switch strings.TrimRight(r.URL.Path, "/") {
	case "/v1/messages":
		return config.ProviderAnthropic, apiMessages
	case "/v1/chat/completions":
		return config.ProviderOpenAI, apiChat
	case "/v1/responses":
		return config.ProviderOpenAI, apiResponses
	}
	// Other endpoints (models, token counts, files...) are relayed as
	// they are, to the provider whose headers the request carries.
	if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Anthropic-Version") != "" {
		return config.ProviderAnthropic, ""
	}
	return config.ProviderOpenAI, ""
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	provider, api := route(r)
	if api != "" && r.Method != http.MethodPost {
		api = ""
	}
	var body []byte
	var info requestInfo
	if r.Body != nil {
		var err error
		body, err = readLimited(r.Body, p.cfg.BodyLimit())
		if err != nil {
			p.fail(w, provider, http.StatusRequestEntityTooLarge, "the request body is larger than llm_proxy.max_body_bytes", err)
			return
		}
	}
	if api != "" {
		var err error
		if info, err = parseRequest(provider, api, body); err != nil {
			p.fail(w, provider, http.StatusBadRequest, "toolgate llm_proxy: the request body is not valid JSON: "+err.Error(), nil)
			return
		}
		info.session = sessionOf(r.Header.Get(p.cfg.Header()), info.firstUser)
		if p.insp != nil {
			msg, withhold := p.insp.InspectRequest(r.Context(), provider, info.session, info.results, info.defs)
			if msg != "" {
				p.fail(w, provider, http.StatusBadRequest, "toolgate llm_proxy: "+msg, nil)
				return
			}
			if len(withhold) > 0 {
				if body, err = withholdResults(api, body, withhold); err != nil {
					p.fail(w, provider, http.StatusBadRequest, "toolgate llm_proxy: the request body could not be rewritten: "+err.Error(), nil)
					return
				}
			}
		}
	}
	up, err := p.outgoing(r, provider, body)
	if err != nil {
		p.fail(w, provider, http.StatusBadGateway, "toolgate llm_proxy: "+err.Error(), nil)
		return
	}
	resp, err := p.client.Do(up)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away
		}
		p.log.Warn("upstream request failed", "provider", provider, "path", r.URL.Path, "error", err)
		p.fail(w, provider, http.StatusBadGateway, fmt.Sprintf("toolgate llm_proxy: the %s API could not be reached", provider), nil)
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header)
	ct := resp.Header.Get("Content-Type")
	switch {
	case api == "" || resp.StatusCode/100 != 2:
		// Errors (a 429 and its retry-after included) and other
		// endpoints reach the client as the provider sent them.
		w.WriteHeader(resp.StatusCode)
		relay(w, resp.Body)
	case strings.HasPrefix(ct, "text/event-stream"):
		w.Header().Del("Content-Length")
		w.WriteHeader(resp.StatusCode)
		flush(w)
		p.stream(r.Context(), w, resp.Body, provider, api, &info)
	default:
		out, err := readLimited(resp.Body, p.cfg.BodyLimit())
		if err != nil {
			p.fail(w, provider, http.StatusBadGateway, "toolgate llm_proxy: the response is larger than llm_proxy.max_body_bytes, so its tool calls could not be checked", err)
			return
		}
		rewritten, err := p.rewrite(r.Context(), provider, api, &info, out)
		if err != nil {
			// A response whose tool calls cannot be read is not delivered.
			p.fail(w, provider, http.StatusBadGateway, "toolgate llm_proxy: the response could not be read, so its tool calls could not be checked: "+err.Error(), nil)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(rewritten)))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(rewritten)
	}
}

// outgoing builds the request to the provider: same method, path, query
// and headers (API keys included, untouched), minus hop-by-hop headers and
// the session header.
func (p *Proxy) outgoing(r *http.Request, provider string, body []byte) (*http.Request, error) {
	base := p.cfg.BaseURL(provider)
	target := base + r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	var rd io.Reader = http.NoBody
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	up, err := http.NewRequestWithContext(r.Context(), r.Method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("bad upstream address for %s", provider)
	}
	copyHeaders(up.Header, r.Header)
	up.Header.Del(p.cfg.Header())
	// Leave compression to the transport, which then decompresses what
	// the proxy must read.
	up.Header.Del("Accept-Encoding")
	up.ContentLength = int64(len(body))
	return up, nil
}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	if c := src.Get("Connection"); c != "" {
		for _, f := range strings.Split(c, ",") {
			dst.Del(strings.TrimSpace(f))
		}
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
}

// relay copies an unexamined body, flushing as it goes so that a stream
// the proxy does not read still streams.
func relay(w http.ResponseWriter, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			flush(w)
		}
		if err != nil {
			return
		}
	}
}

func flush(w http.ResponseWriter) {
	_ = http.NewResponseController(w).Flush()
}

var errTooLarge = errors.New("body too large")

func readLimited(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

// fail answers with an error in the provider's own shape, so the SDK
// reports it as an API error.
func (p *Proxy) fail(w http.ResponseWriter, provider string, status int, msg string, err error) {
	if err != nil {
		p.log.Warn(msg, "error", err)
	}
	var body any
	if provider == config.ProviderAnthropic {
		typ := "api_error"
		switch status {
		case http.StatusBadRequest:
			typ = "invalid_request_error"
		case http.StatusRequestEntityTooLarge:
			typ = "request_too_large"
		}
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	} else {
		body = map[string]any{"error": map[string]any{"message": msg, "type": "toolgate_error", "param": nil, "code": nil}}
	}
	b, _ := json.Marshal(body)
	h := w.Header()
	for k := range h {
		delete(h, k)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// requestInfo is what the proxy reads from a request.
type requestInfo struct {
	session   string
	firstUser []byte
	// defs are the declared tools by name.
	defs map[string]*mcp.Tool
	// results are the tool results the agent sends back.
	results []ToolResult
}

// ToolResult is the output of an earlier tool call, sent back to the model.
type ToolResult struct {
	CallID string
	Text   string
}

// sessionOf names the conversation: the header's value, else a hash of the
// first user message (stable across the turns of one conversation).
func sessionOf(header string, firstUser []byte) string {
	if h := strings.TrimSpace(header); h != "" {
		if len(h) > 128 {
			h = h[:128]
		}
		return h
	}
	if len(firstUser) == 0 {
		return ""
	}
	sum := sha256.Sum256(firstUser)
	return "llm-" + hex.EncodeToString(sum[:8])
}

// evaluate judges one call and logs the decision (never its arguments).
func (p *Proxy) evaluate(ctx context.Context, provider string, info *requestInfo, id, name string, rawArgs []byte) Decision {
	c := Call{Provider: provider, Session: info.session, ID: id, Name: name, Arguments: argsObject(rawArgs), Def: info.defs[name]}
	d := p.eval.EvaluateLLMCall(ctx, c)
	if d.Action == Block {
		p.log.Info("tool call blocked", "provider", provider, "tool", name, "rule", d.Rule, "session", info.session)
	}
	return d
}
