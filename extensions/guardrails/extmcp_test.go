package extmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/exttest"
	pb "github.com/toolgate/toolgate/proto/extmcp"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func callReq() *extension.CallRequest {
	return (&extension.CallRequest{ToolName: "fs__read_file", ServerName: "fs", Tool: "read_file"}).WithArguments(map[string]any{"path": "/a"})
}

func denial(t *testing.T, err error) *extension.Denial {
	t.Helper()
	d, ok := extension.AsDenial(err)
	if !ok {
		t.Fatalf("got %v, want a denial", err)
	}
	return d
}

func TestCallPassPresentsUnprefixedTool(t *testing.T) {
	var n fakeNet
	f := &fake{}
	n.serve(t, "127.0.0.1:9001", f)
	g := n.build(t, `{"processors":[{"host":"127.0.0.1:9001","methods":{"tools/call":"request"}}]}`)
	if g.responseFilter() != nil || g.searchFilter() != nil {
		t.Error("filters for phases and methods nobody asked for")
	}
	req := callReq()
	req.Principal = "alice"
	seen, err := exttest.CallSeen(g, ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	reqs, _ := f.sent()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != "tools/call" || strings.Join(r.ServiceNames, ",") != "fs" || string(r.McpRequest) != `{"name":"read_file","arguments":{"path":"/a"}}` {
		t.Errorf("sent %v %v %s", r.Method, r.ServiceNames, r.McpRequest)
	}
	if r.MetadataContext.GetFields()["principal"].GetStringValue() != "alice" {
		t.Errorf("metadata %v", r.MetadataContext)
	}
	if seen.Args()["path"] != "/a" {
		t.Errorf("arguments changed on pass: %v", seen.Args())
	}
}

func TestCallChainMutateThenDeny(t *testing.T) {
	var n fakeNet
	first := &fake{onRequest: func(_ context.Context, r *pb.McpRequest) (*pb.McpRequestResult, error) {
		return mutateRequest(map[string]any{"name": "read_file", "arguments": map[string]any{"path": "/safe", "n": 12345678901234567}}), nil
	}}
	second := &fake{}
	n.serve(t, "127.0.0.1:9001", first)
	n.serve(t, "127.0.0.1:9002", second)
	g := n.build(t, `{"processors":[
		{"host":"127.0.0.1:9001","methods":{"tools/call":"request"}},
		{"host":"127.0.0.1:9002","methods":{"tools/*":"full"}}]}`)
	req := callReq()
	seen, err := exttest.CallSeen(g, ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if seen.Args()["path"] != "/safe" || fmt.Sprint(seen.Args()["n"]) != "12345678901234567" {
		t.Errorf("arguments after mutation: %v", seen.Args())
	}
	if req.Args()["path"] != "/a" {
		t.Errorf("the caller's request was modified: %v", req.Args())
	}
	reqs, _ := second.sent()
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].McpRequest), `"/safe"`) {
		t.Errorf("second processor saw %v, want the mutated params", reqs)
	}

	// The first denial short-circuits: the second is not asked.
	first.onRequest = func(context.Context, *pb.McpRequest) (*pb.McpRequestResult, error) {
		return denyRequest(pb.AuthorizationError_RESOURCE_EXHAUSTED, "quota used up"), nil
	}
	err = exttest.Call(g, ctxT(t), callReq())
	d := denial(t, err)
	if d.Code != extension.CodeResourceExhausted || d.RPCError().Code != -32003 || d.Reason != "quota used up" || d.Rule != "guardrails.processors[0]" {
		t.Errorf("denial %+v", d)
	}
	if reqs, _ := second.sent(); len(reqs) != 1 {
		t.Errorf("second processor called after a denial (%d requests)", len(reqs))
	}
}

func TestCallMutationErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		mut  *pb.McpRequestResult
	}{
		{"rename", mutateRequest(map[string]any{"name": "write_file", "arguments": map[string]any{}})},
		{"not an object", mutateRequest([]int{1})},
		{"arguments not an object", mutateRequest(map[string]any{"arguments": "x"})},
		{"empty", &pb.McpRequestResult{Result: &pb.McpRequestResult_Mutated{}}},
		{"no result", &pb.McpRequestResult{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var n fakeNet
			n.serve(t, "127.0.0.1:9001", &fake{onRequest: func(context.Context, *pb.McpRequest) (*pb.McpRequestResult, error) { return tt.mut, nil }})
			closed := n.build(t, `{"processors":[{"host":"127.0.0.1:9001","methods":{"tools/call":"request"}}]}`)
			d := denial(t, exttest.Call(closed, ctxT(t), callReq()))
			if d.RPCError().Code != -32603 || !strings.Contains(d.Reason, "cannot use") {
				t.Errorf("failClosed: %+v", d)
			}
			open := n.build(t, `{"processors":[{"host":"127.0.0.1:9001","failureMode":"failOpen","methods":{"tools/call":"request"}}]}`)
			req := callReq()
			if seen, err := exttest.CallSeen(open, ctxT(t), req); err != nil || seen.Args()["path"] != "/a" {
				t.Errorf("failOpen: %v, arguments %v", err, seen)
			}
		})
	}
}

func TestMutationWithoutArgumentsClearsThem(t *testing.T) {
	var n fakeNet
	n.serve(t, "127.0.0.1:9001", &fake{onRequest: func(context.Context, *pb.McpRequest) (*pb.McpRequestResult, error) {
		return mutateRequest(map[string]any{"name": "read_file"}), nil
	}})
	g := n.build(t, `{"processors":[{"host":"127.0.0.1:9001","methods":{"tools/call":"request"}}]}`)
	req := callReq()
	seen, err := exttest.CallSeen(g, ctxT(t), req)
	if err != nil || len(seen.Args()) != 0 || seen.Args() == nil {
		t.Errorf("%v %#v", err, seen)
	}
	if raw, _ := seen.ArgumentsJSON(); string(raw) != "{}" {
		t.Errorf("forwarded arguments %s, want {}", raw)
	}
}

func TestFailureModes(t *testing.T) {
	var n fakeNet
	slow := &fake{onRequest: func(ctx context.Context, _ *pb.McpRequest) (*pb.McpRequestResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	n.serve(t, "127.0.0.1:9003", slow)
	failing := &fake{onRequest: func(context.Context, *pb.McpRequest) (*pb.McpRequestResult, error) {
		return nil, status.Error(codes.Internal, "boom")
	}}
	n.serve(t, "127.0.0.1:9004", failing)
	tests := []struct {
		name, host, mode string
		reason           string // "" when allowed
	}{
		{"unreachable, failClosed", "127.0.0.1:9009", "failClosed", "could not be reached"},
		{"unreachable, default", "127.0.0.1:9009", "", "could not be reached"},
		{"unreachable, failOpen", "127.0.0.1:9009", "failOpen", ""},
		{"timeout, failClosed", "127.0.0.1:9003", "failClosed", "did not answer in time"},
		{"timeout, failOpen", "127.0.0.1:9003", "failOpen", ""},
		{"rpc error, failClosed", "127.0.0.1:9004", "failClosed", "could not be reached"},
		{"rpc error, failOpen", "127.0.0.1:9004", "failOpen", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := n.build(t, fmt.Sprintf(`{"processors":[{"host":%q,"failureMode":%q,"timeout":"50ms","methods":{"tools/call":"request"}}]}`, tt.host, tt.mode))
			start := time.Now()
			err := exttest.Call(g, ctxT(t), callReq())
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("took %v", el)
			}
			if tt.reason == "" {
				if err != nil {
					t.Errorf("failOpen refused: %v", err)
				}
				return
			}
			d := denial(t, err)
			if !strings.Contains(d.Reason, tt.reason) || d.Code != extension.CodeUnknown || d.RPCError().Code != -32603 || d.Detail == "" {
				t.Errorf("denial %+v, want reason containing %q and -32603", d, tt.reason)
			}
		})
	}
}

func TestProcessorStoppedAndRestarted(t *testing.T) {
	var n fakeNet
	f := &fake{}
	stop := n.serve(t, "127.0.0.1:9001", f)
	g := n.build(t, `{"processors":[{"host":"127.0.0.1:9001","timeout":"200ms","methods":{"tools/call":"request"}}]}`)
	if err := exttest.Call(g, ctxT(t), callReq()); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := exttest.Call(g, ctxT(t), callReq()); err == nil {
		t.Fatal("allowed with the processor stopped (failClosed)")
	}
	n.serve(t, "127.0.0.1:9001", f)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := exttest.Call(g, ctxT(t), callReq())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused 10s after the processor came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSlowCallDoesNotBlockOthers(t *testing.T) {
	var n fakeNet
	release := make(chan struct{})
	n.serve(t, "127.0.0.1:9001", &fake{onRequest: func(ctx context.Context, r *pb.McpRequest) (*pb.McpRequestResult, error) {
		if strings.Contains(string(r.McpRequest), `"slow"`) {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return passRequest(), nil
	}})
	g := n.build(t, `{"processors":[{"host":"127.0.0.1:9001","timeout":"10s","methods":{"tools/call":"request"}}]}`)
	filter := exttest.CallFunc(g)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			r := callReq()
			r.Tool = "slow"
			_ = filter(ctxT(t), r)
		})
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	for range 20 {
		if err := filter(ctxT(t), callReq()); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("20 fast calls took %v behind 4 slow ones", el)
	}
	close(release)
	wg.Wait()
}

func TestOneConnectionPerHost(t *testing.T) {
	var n fakeNet
	n.serve(t, "127.0.0.1:9001", &fake{})
	g := n.build(t, `{"processors":[
		{"host":"127.0.0.1:9001","methods":{"tools/call":"request"}},
		{"host":"127.0.0.1:9001","methods":{"tools/call":"response"}},
		{"host":"127.0.0.1:9002","methods":{"tools/list":"response"}}]}`)
	if len(g.conns) != 2 {
		t.Errorf("%d connections for 2 hosts", len(g.conns))
	}
	if err := g.Close(); err != nil {
		t.Error(err)
	}
	if g.conns != nil {
		t.Error("connections kept after Close")
	}
}

func TestResponseMutateAndDeny(t *testing.T) {
	var n fakeNet
	redact := &fake{onResponse: func(_ context.Context, r *pb.McpResponse) (*pb.McpResponseResult, error) {
		var res mcp.CallToolResult
		if err := json.Unmarshal(r.McpResponse, &res); err != nil {
			return nil, err
		}
		text := res.Content[0].(*mcp.TextContent).Text
		return mutateResponse(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.ReplaceAll(text, "secret", "[x]")}}}), nil
	}}
	n.serve(t, "127.0.0.1:9001", redact)
	g := n.build(t, `{"processors":[{"host":"127.0.0.1:9001","methods":{"tools/call":"response"}}]}`)
	if g.callFilter() != nil {
		t.Error("a request filter for a response-only processor")
	}
	in := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the secret is 42"}}, IsError: true}
	out, err := exttest.Respond(g, ctxT(t), callReq(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Content[0].(*mcp.TextContent).Text; got != "the [x] is 42" {
		t.Errorf("mutated result %q", got)
	}
	_, resps := redact.sent()
	if len(resps) != 1 || resps[0].Method != "tools/call" || resps[0].ServiceNames[0] != "fs" || !strings.Contains(string(resps[0].McpResponse), `"isError":true`) {
		t.Errorf("sent %v", resps)
	}

	redact.onResponse = func(context.Context, *pb.McpResponse) (*pb.McpResponseResult, error) {
		e := &pb.AuthorizationError{Code: pb.AuthorizationError_INVALID, Reason: "leaks data", McpError: []byte(`{"code":-32099,"message":"dlp"}`)}
		return &pb.McpResponseResult{Result: &pb.McpResponseResult_Error{Error: e}}, nil
	}
	_, err = exttest.Respond(g, ctxT(t), callReq(), in)
	d := denial(t, err)
	if d.Code != extension.CodeInvalid || d.RPCError().Code != -32099 || d.Reason != "dlp" || !strings.Contains(d.Detail, "leaks data") {
		t.Errorf("denial %+v rpc %+v", d, d.RPCError())
	}
}

func results(names ...string) []extension.SearchResult {
	out := make([]extension.SearchResult, len(names))
	for i, q := range names {
		server, tool, _ := strings.Cut(q, "__")
		out[i] = extension.SearchResult{Name: q, Server: server, Tool: tool, Description: "does " + tool, Def: &mcp.Tool{Name: tool, Description: "does " + tool}, Score: 1 - float64(i)/100}
	}
	return out
}

func names(rs []extension.SearchResult) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.Name)
	}
	return strings.Join(s, ",")
}

// dropper drops every tool whose name starts with "drop" from tools/list
// results and redacts "does" in descriptions.
func dropper() *fake {
	return &fake{onResponse: func(_ context.Context, r *pb.McpResponse) (*pb.McpResponseResult, error) {
		var l struct {
			Tools []map[string]any `json:"tools"`
		}
		if err := json.Unmarshal(r.McpResponse, &l); err != nil {
			return nil, err
		}
		var kept []map[string]any
		for _, tl := range l.Tools {
			if !strings.HasPrefix(tl["name"].(string), "drop") {
				tl["description"] = strings.ReplaceAll(tl["description"].(string), "does", "[x]")
				kept = append(kept, tl)
			}
		}
		return mutateResponse(map[string]any{"tools": kept, "extra": 1}), nil
	}}
}

func TestSearchDropsAndRefills(t *testing.T) {
	var n fakeNet
	f := dropper()
	n.serve(t, "127.0.0.1:9001", f)
	g := n.build(t, `{"processors":[{"host":"127.0.0.1:9001","methods":{"tools/list":"response"}}]}`)
	in := results("a__one", "b__drop1", "a__drop2", "b__two", "a__three", "c__four", "c__five")
	out, err := g.FilterVisible(ctxT(t), &extension.VisibilityRequest{Limit: 3}, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(out); got != "a__one,b__two,a__three" {
		t.Errorf("got %s", got)
	}
	if out[0].Description != "[x] one" {
		t.Errorf("description not rewritten: %q", out[0].Description)
	}
	if in[0].Description != "does one" || in[0].Def.Description != "does one" {
		t.Error("the filter modified its input")
	}
	// First round: the top 3 (a: one, drop2; b: drop1), one call per
	// server. Second round: the next 2 (b: two; a: three). c is never shown
	// so never presented.
	_, resps := f.sent()
	var seen []string
	for _, r := range resps {
		if r.Method != "tools/list" || len(r.ServiceNames) != 1 {
			t.Errorf("sent %v %v", r.Method, r.ServiceNames)
		}
		var l struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		json.Unmarshal(r.McpResponse, &l)
		var ns []string
		for _, tl := range l.Tools {
			ns = append(ns, tl.Name)
		}
		seen = append(seen, r.ServiceNames[0]+":"+strings.Join(ns, "+"))
	}
	got := strings.Join(seen, " ")
	if len(resps) != 4 || !strings.Contains(got, "a:one+drop2") || !strings.Contains(got, "b:drop1") || !strings.Contains(got, "b:two") || !strings.Contains(got, "a:three") {
		t.Errorf("presented %s", got)
	}
}

func TestSearchDenyAndRequestPhase(t *testing.T) {
	var n fakeNet
	f := &fake{onRequest: func(_ context.Context, r *pb.McpRequest) (*pb.McpRequestResult, error) {
		if r.Method != "tools/list" || string(r.McpRequest) != "{}" {
			return nil, errors.New("unexpected request")
		}
		if r.ServiceNames[0] == "b" {
			return denyRequest(pb.AuthorizationError_PERMISSION_DENIED, "server b is off limits"), nil
		}
		return passRequest(), nil
	}}
	n.serve(t, "127.0.0.1:9001", f)
	g := n.build(t, `{"processors":[{"host":"127.0.0.1:9001","methods":{"*/list":"request","tools/call":"off"}}]}`)
	out, err := g.FilterVisible(ctxT(t), &extension.VisibilityRequest{Limit: 5}, results("a__one", "a__two"))
	if err != nil || names(out) != "a__one,a__two" {
		t.Fatalf("%v %s", err, names(out))
	}
	_, err = g.FilterVisible(ctxT(t), &extension.VisibilityRequest{Limit: 5}, results("a__one", "b__two", "c__three"))
	d := denial(t, err)
	if d.RPCError().Code != -32001 || d.Reason != "server b is off limits" {
		t.Errorf("denial %+v", d)
	}
}

func TestSearchFailOpenKeepsResults(t *testing.T) {
	var n fakeNet
	g := n.build(t, `{"processors":[{"host":"127.0.0.1:9009","failureMode":"failOpen","timeout":"100ms","methods":{"tools/list":"full"}}]}`)
	out, err := g.FilterVisible(ctxT(t), &extension.VisibilityRequest{Limit: 2}, results("a__one", "b__two", "c__three"))
	if err != nil || names(out) != "a__one,b__two" {
		t.Errorf("%v %s", err, names(out))
	}
	closed := n.build(t, `{"processors":[{"host":"127.0.0.1:9009","timeout":"100ms","methods":{"tools/list":"response"}}]}`)
	if _, err := closed.FilterVisible(ctxT(t), &extension.VisibilityRequest{Limit: 2}, results("a__one")); err == nil {
		t.Error("failClosed allowed a search with the processor down")
	}
}

func TestFailOpenRecordsEvent(t *testing.T) {
	var n fakeNet
	var mu sync.Mutex
	var events []extension.Event
	emit := func(_ context.Context, e extension.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	g := n.buildHost(t, `{"processors":[{"host":"127.0.0.1:9009","failureMode":"failOpen","methods":{"tools/call":"request"}}]}`, extension.Host{Emit: emit})
	req := callReq()
	req.Session = "s1"
	if err := exttest.Call(g, ctxT(t), req); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 1 {
		t.Fatalf("%d events", len(events))
	}
	e := events[0]
	if e.Type != "guardrails_fail_open" || e.Action != "allow" || e.Session != "s1" || e.Server != "fs" || e.Tool != "read_file" || e.Reason != "guardrails.processors[0]" || e.Fields["phase"] != "request" {
		t.Errorf("event %+v", e)
	}
}
