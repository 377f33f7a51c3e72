package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
)

// richUpstream serves a tool, a resource, a resource template, a prompt
// and completions over streamable HTTP.
func richUpstream(t *testing.T, name string) string {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{name + "-" + req.Params.Argument.Value}}}, nil
		},
	})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes back the message"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	s.AddResource(&mcp.Resource{URI: "file:///" + name + ".txt", Name: name}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "contents of " + name}}}, nil
	})
	s.AddResource(&mcp.Resource{URI: "file:///shared.txt", Name: "shared"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "shared from " + name}}}, nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "notes://" + name + "/{id}", Name: "note"}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "note"}}}, nil
	})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}}, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: name + " greets " + req.Params.Arguments["who"]}}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPassthroughRelays: resources, templates, prompts and completions of
// two upstreams reach a passthrough client under their exposed names, and
// requests find their way back to the upstream that owns each.
func TestPassthroughRelays(t *testing.T) {
	ctx := context.Background()
	servers := map[string]*config.Server{
		"a": {Name: "a", URL: richUpstream(t, "a") + "/", Transport: config.TransportStreamableHTTP},
		"b": {Name: "b", URL: richUpstream(t, "b") + "/", Transport: config.TransportStreamableHTTP},
	}
	cfg := &config.Config{Exposure: config.Exposure{Mode: config.ModePassthrough}, Servers: servers, Filters: config.Filters{SimilarityThreshold: config.DefaultSimilarityThreshold}}
	g, err := New(ctx, Options{Config: cfg, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := g.Connect(ctx, st); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	uris := map[string]bool{}
	for _, r := range res.Resources {
		uris[r.URI] = true
	}
	for _, want := range []string{"file:///a.txt", "file:///b.txt", "toolgate://a/file:///shared.txt", "toolgate://b/file:///shared.txt"} {
		if !uris[want] {
			t.Errorf("resources/list lacks %s: %v", want, uris)
		}
	}
	for uri, want := range map[string]string{
		"file:///b.txt":                   "contents of b",
		"toolgate://a/file:///shared.txt": "shared from a",
		"toolgate://b/file:///shared.txt": "shared from b",
	} {
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != want || rr.Contents[0].URI != uri {
			t.Errorf("read %s = %+v, %v; want %q under the exposed URI", uri, rr, err, want)
		}
	}
	tr, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tr.ResourceTemplates) != 2 {
		t.Fatalf("templates = %+v, %v", tr, err)
	}
	if rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "notes://b/7"}); err != nil || rr.Contents[0].Text != "note" {
		t.Errorf("read through a template: %+v, %v", rr, err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "toolgate://nope/x"}); err == nil {
		t.Error("a resource of an unknown server was read")
	}

	pr, err := cs.ListPrompts(ctx, nil)
	if err != nil || len(pr.Prompts) != 2 {
		t.Fatalf("prompts = %+v, %v", pr, err)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "b__greet", Arguments: map[string]string{"who": "you"}})
	if err != nil || gp.Messages[0].Content.(*mcp.TextContent).Text != "b greets you" {
		t.Errorf("prompts/get b__greet = %+v, %v", gp, err)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "c__greet"}); err == nil {
		t.Error("a prompt of an unknown server was relayed")
	}

	cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "a__greet"}, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "x"}})
	if err != nil || len(cr.Completion.Values) != 1 || cr.Completion.Values[0] != "a-x" {
		t.Errorf("completion/complete = %+v, %v", cr, err)
	}
	if _, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "nameless"}, Argument: mcp.CompleteParamsArgument{Name: "who"}}); err == nil {
		t.Error("a completion for an unknown prompt was relayed")
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 2 {
		t.Fatalf("tools = %+v, %v", tools, err)
	}
	out, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a__echo", Arguments: map[string]any{"message": "hi"}})
	if err != nil || out.IsError || out.Content[0].(*mcp.TextContent).Text != "hi" {
		t.Errorf("tools/call a__echo = %+v, %v", out, err)
	}
}

// A passthrough client called tools/call and has no search_tools: the
// call path's failures must not be worded as call_tool's, nor send the
// model to a tool it does not have, and must name the server.
func TestPassthroughFailureWording(t *testing.T) {
	for _, fail := range []string{"timeout", "status"} {
		t.Run(fail, func(t *testing.T) {
			var failing atomic.Bool
			up := richUpstream(t, "up")
			release := make(chan struct{})
			front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if failing.Load() && bytes.Contains(body, []byte(`"tools/call"`)) {
					if fail == "status" {
						http.Error(w, "upstream is down", http.StatusServiceUnavailable)
						return
					}
					// Slower than the call timeout.
					select {
					case <-r.Context().Done():
					case <-release:
					}
					return
				}
				proxyTo(t, up, w, r)
			}))
			t.Cleanup(front.Close)
			t.Cleanup(func() { close(release) }) // (runs first)
			g := passthroughGateway(t, front.URL, func(s *config.Server) { timeout := 0.2; s.CallTimeout = &timeout })
			ctx := context.Background()
			cs := memClient(t, g, nil, nil, nil)
			defer cs.Close()
			failing.Store(true)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}})
			var msg string
			switch {
			case err != nil:
				msg = err.Error()
			case res.IsError:
				for _, c := range res.Content {
					if tc, ok := c.(*mcp.TextContent); ok {
						msg += tc.Text
					}
				}
			default:
				t.Fatalf("the call succeeded with its upstream failing: %+v", res)
			}
			if !strings.Contains(msg, `server "up"`) || strings.Contains(msg, "call_tool") || strings.Contains(msg, "search_tools") {
				t.Fatalf("a failed tools/call in passthrough mode answered %q: want the server named, and neither call_tool nor search_tools", msg)
			}
		})
	}
}

// proxyTo forwards r to the server at base.
func proxyTo(t *testing.T, base string, w http.ResponseWriter, r *http.Request) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, base+r.URL.Path, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
