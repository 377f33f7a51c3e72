// Command extmcp-processor is a reference ExtMCP guardrail processor: a gRPC
// server that toolgate (or agentgateway) calls before and after MCP methods.
// It denies tools by name pattern, redacts a regular expression from tool
// arguments and results, and can deny on content or answer slowly, which the
// end-to-end tests use.
//
//	extmcp-processor -listen 127.0.0.1:9001 -deny 'delete_*,*/drop_*' -redact 'sk-[A-Za-z0-9]+'
//
// What it does for each hook:
//
//   - CheckRequest tools/call: deny when the tool matches -deny or the params
//     match -deny-content; else redact -redact from the arguments' strings.
//   - CheckResponse tools/call: deny when the result matches -deny-content;
//     else redact -redact from text content and structured content.
//   - CheckResponse tools/list: drop the tools that match -deny and redact
//     -redact from descriptions.
//   - anything else: pass.
//
// A pattern without '/' matches the tool name; one with '/' matches
// "server/tool", the server being the first service name. Patterns use
// path.Match syntax.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path"
	"regexp"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	pb "github.com/toolgate/toolgate/proto/extmcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "extmcp-processor:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		listen      = flag.String("listen", "127.0.0.1:9001", "gRPC listen address (port 0 picks a free port; the address is logged)")
		deny        = flag.String("deny", "", "comma-separated tool name patterns to deny (path.Match syntax; with '/', matches server/tool)")
		denyContent = flag.String("deny-content", "", "regular expression: deny a tools/call request or result whose JSON matches")
		denyCode    = flag.String("deny-code", "permission_denied", "code of denials: permission_denied, resource_exhausted, invalid or unknown")
		denyReason  = flag.String("deny-reason", "blocked by the example policy", "reason of denials (shown to the client)")
		mcpError    = flag.String("mcp-error", "", "a JSON-RPC error object to send as mcp_error with denials, overriding the code mapping")
		redact      = flag.String("redact", "", "regular expression to redact from tool arguments, results and tool descriptions")
		redactWith  = flag.String("redact-with", "[REDACTED]", "replacement for -redact matches")
		delay       = flag.Duration("delay", 0, "wait this long before answering each check (to test timeouts)")
	)
	flag.Parse()
	p := &policy{reason: *denyReason, with: *redactWith, delay: *delay, log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	for _, pat := range strings.Split(*deny, ",") {
		if pat = strings.TrimSpace(pat); pat != "" {
			if _, err := path.Match(pat, ""); err != nil {
				return fmt.Errorf("-deny %q: %v", pat, err)
			}
			p.deny = append(p.deny, pat)
		}
	}
	code, ok := pb.AuthorizationError_Code_value[strings.ToUpper(*denyCode)]
	if !ok {
		return fmt.Errorf("-deny-code %q: want permission_denied, resource_exhausted, invalid or unknown", *denyCode)
	}
	p.code = pb.AuthorizationError_Code(code)
	if *mcpError != "" {
		if !json.Valid([]byte(*mcpError)) {
			return fmt.Errorf("-mcp-error is not JSON")
		}
		p.mcpError = []byte(*mcpError)
	}
	var err error
	if *denyContent != "" {
		if p.denyContent, err = regexp.Compile(*denyContent); err != nil {
			return fmt.Errorf("-deny-content: %v", err)
		}
	}
	if *redact != "" {
		if p.redact, err = regexp.Compile(*redact); err != nil {
			return fmt.Errorf("-redact: %v", err)
		}
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	pb.RegisterExtMcpServer(srv, p)
	p.log.Info("listening", "addr", ln.Addr().String())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		srv.GracefulStop()
	}()
	return srv.Serve(ln)
}

// policy is the processor. It keeps no state between calls.
type policy struct {
	pb.UnimplementedExtMcpServer
	deny        []string
	denyContent *regexp.Regexp
	code        pb.AuthorizationError_Code
	reason      string
	mcpError    []byte
	redact      *regexp.Regexp
	with        string
	delay       time.Duration
	log         *slog.Logger
}

func (p *policy) wait(ctx context.Context) error {
	if p.delay <= 0 {
		return nil
	}
	select {
	case <-time.After(p.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *policy) denial() *pb.AuthorizationError {
	return &pb.AuthorizationError{Code: p.code, Reason: p.reason, McpError: p.mcpError}
}

// denied reports whether tool of server matches a -deny pattern.
func (p *policy) denied(server, tool string) bool {
	for _, pat := range p.deny {
		name := tool
		if strings.Contains(pat, "/") {
			name = server + "/" + tool
		}
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func (p *policy) CheckRequest(ctx context.Context, req *pb.McpRequest) (*pb.McpRequestResult, error) {
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	pass := &pb.McpRequestResult{Result: &pb.McpRequestResult_Pass{Pass: &pb.Pass{}}}
	if req.GetMethod() != "tools/call" {
		p.log.Info("request", "method", req.GetMethod(), "services", req.GetServiceNames(), "decision", "pass")
		return pass, nil
	}
	var params struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	}
	if err := decode(req.GetMcpRequest(), &params); err != nil {
		d := &pb.AuthorizationError{Code: pb.AuthorizationError_INVALID, Reason: "malformed tools/call params"}
		return &pb.McpRequestResult{Result: &pb.McpRequestResult_Error{Error: d}}, nil
	}
	log := p.log.With("method", req.GetMethod(), "services", req.GetServiceNames(), "tool", params.Name)
	if p.denied(first(req.GetServiceNames()), params.Name) || p.denyContent != nil && p.denyContent.Match(req.GetMcpRequest()) {
		log.Info("request", "decision", "deny")
		return &pb.McpRequestResult{Result: &pb.McpRequestResult_Error{Error: p.denial()}}, nil
	}
	if p.redact != nil {
		args, changed := p.redactAll(params.Arguments)
		if changed {
			params.Arguments = args.(map[string]any)
			b, err := json.Marshal(params)
			if err != nil {
				return nil, err
			}
			log.Info("request", "decision", "mutate")
			return &pb.McpRequestResult{Result: &pb.McpRequestResult_Mutated{Mutated: b}}, nil
		}
	}
	log.Info("request", "decision", "pass")
	return pass, nil
}

func (p *policy) CheckResponse(ctx context.Context, res *pb.McpResponse) (*pb.McpResponseResult, error) {
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	pass := &pb.McpResponseResult{Result: &pb.McpResponseResult_Pass{Pass: &pb.Pass{}}}
	log := p.log.With("method", res.GetMethod(), "services", res.GetServiceNames())
	var out any
	var err error
	switch res.GetMethod() {
	case "tools/call":
		if p.denyContent != nil && p.denyContent.Match(res.GetMcpResponse()) {
			log.Info("response", "decision", "deny")
			return &pb.McpResponseResult{Result: &pb.McpResponseResult_Error{Error: p.denial()}}, nil
		}
		out, err = p.callResult(res.GetMcpResponse())
	case "tools/list":
		out, err = p.listResult(first(res.GetServiceNames()), res.GetMcpResponse())
	}
	if err != nil {
		d := &pb.AuthorizationError{Code: pb.AuthorizationError_INVALID, Reason: "malformed " + res.GetMethod() + " result"}
		return &pb.McpResponseResult{Result: &pb.McpResponseResult_Error{Error: d}}, nil
	}
	if out == nil {
		log.Info("response", "decision", "pass")
		return pass, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	log.Info("response", "decision", "mutate")
	return &pb.McpResponseResult{Result: &pb.McpResponseResult_Mutated{Mutated: b}}, nil
}

// callResult redacts a tools/call result's text content and structured
// content; nil means unchanged.
func (p *policy) callResult(raw []byte) (any, error) {
	if p.redact == nil {
		return nil, nil
	}
	var r map[string]any
	if err := decode(raw, &r); err != nil {
		return nil, err
	}
	changed := false
	if content, ok := r["content"].([]any); ok {
		for _, c := range content {
			if item, ok := c.(map[string]any); ok {
				if s, ok := item["text"].(string); ok {
					if t := p.redact.ReplaceAllString(s, p.with); t != s {
						item["text"], changed = t, true
					}
				}
			}
		}
	}
	if sc, ok := r["structuredContent"]; ok {
		v, c := p.redactAll(sc)
		r["structuredContent"], changed = v, changed || c
	}
	if !changed {
		return nil, nil
	}
	return r, nil
}

// listResult drops denied tools from a tools/list result and redacts their
// descriptions; nil means unchanged.
func (p *policy) listResult(server string, raw []byte) (any, error) {
	var r map[string]any
	if err := decode(raw, &r); err != nil {
		return nil, err
	}
	tools, ok := r["tools"].([]any)
	if !ok {
		return nil, errors.New("no tools array")
	}
	changed := false
	kept := make([]any, 0, len(tools))
	for _, t := range tools {
		tool, ok := t.(map[string]any)
		if !ok {
			continue
		}
		name, _ := tool["name"].(string)
		if p.denied(server, name) {
			changed = true
			continue
		}
		if d, ok := tool["description"].(string); ok && p.redact != nil {
			if t := p.redact.ReplaceAllString(d, p.with); t != d {
				tool["description"], changed = t, true
			}
		}
		kept = append(kept, tool)
	}
	if !changed {
		return nil, nil
	}
	r["tools"] = kept
	return r, nil
}

// redactAll redacts every string in a decoded JSON value (not object keys).
func (p *policy) redactAll(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		t := p.redact.ReplaceAllString(x, p.with)
		return t, t != x
	case map[string]any:
		changed := false
		for k, e := range x {
			nv, c := p.redactAll(e)
			x[k], changed = nv, changed || c
		}
		return x, changed
	case []any:
		changed := false
		for i, e := range x {
			nv, c := p.redactAll(e)
			x[i], changed = nv, changed || c
		}
		return x, changed
	}
	return v, false
}

func decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
