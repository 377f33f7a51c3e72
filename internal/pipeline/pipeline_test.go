package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/extension"
)

// rec is a test extension that records the order its filters run in.
type rec struct {
	id       string
	phase    extension.Phase
	trace    *[]string
	callErr  error
	panicky  bool
	provErr  error
	closed   *[]string
	rewrites map[string]any
}

func (r *rec) ID() string                                      { return r.id }
func (r *rec) Phase() extension.Phase                          { return r.phase }
func (r *rec) Provision(context.Context, extension.Host) error { return r.provErr }
func (r *rec) Close() error {
	if r.closed != nil {
		*r.closed = append(*r.closed, r.id)
	}
	return nil
}
func (r *rec) WrapCall(next extension.CallHandler) extension.CallHandler {
	return func(ctx context.Context, c *extension.CallRequest) (*extension.CallResult, error) {
		*r.trace = append(*r.trace, r.id)
		if r.panicky {
			panic("boom")
		}
		if r.callErr != nil {
			return nil, r.callErr
		}
		if r.rewrites != nil {
			c = c.WithArguments(r.rewrites)
		}
		res, err := next(ctx, c)
		*r.trace = append(*r.trace, r.id+" after")
		return res, err
	}
}
func (r *rec) FilterSearch(_ context.Context, _ *extension.SearchRequest, in []extension.SearchResult) ([]extension.SearchResult, error) {
	return slices.DeleteFunc(in, func(s extension.SearchResult) bool { return strings.Contains(s.Name, "delete") }), nil
}

// upstream is a terminal handler that records the arguments it got.
func upstream(got *map[string]any) extension.CallHandler {
	return func(_ context.Context, c *extension.CallRequest) (*extension.CallResult, error) {
		if got != nil {
			*got, _ = c.Arguments()
		}
		return extension.NewCallResult(&mcp.CallToolResult{}), nil
	}
}

func call(p *Pipeline, req *extension.CallRequest) error {
	_, err := p.Wrap(upstream(nil))(context.Background(), req)
	return err
}

func host(string) extension.Host { return extension.Host{} }

func TestPhaseOrderBuiltinsBeforeExtras(t *testing.T) {
	var trace []string
	mk := func(id string, p extension.Phase) *rec { return &rec{id: id, phase: p, trace: &trace} }
	p, err := Build(context.Background(), nil, host,
		[]extension.Extension{mk("dev.toolgate/inspect", extension.PhaseInspect), mk("dev.toolgate/authz", extension.PhaseAuthorize)},
		[]extension.Extension{mk("com.example/observe", extension.PhaseObserve), mk("com.example/authz", extension.PhaseAuthorize)})
	if err != nil {
		t.Fatal(err)
	}
	if err := call(p, &extension.CallRequest{}); err != nil {
		t.Fatal(err)
	}
	// The first is the outermost: it sees the request first, the result last.
	want := []string{"com.example/observe", "dev.toolgate/authz", "com.example/authz", "dev.toolgate/inspect",
		"dev.toolgate/inspect after", "com.example/authz after", "dev.toolgate/authz after", "com.example/observe after"}
	if !slices.Equal(trace, want) {
		t.Fatalf("order = %v, want %v", trace, want)
	}
}

func TestDenyStopsChainAndFailClosed(t *testing.T) {
	var trace []string
	deny := &rec{id: "com.example/deny", trace: &trace, callErr: extension.Deny("rule.x", "not today")}
	after := &rec{id: "com.example/after", trace: &trace}
	p, _ := Build(context.Background(), nil, host, nil, []extension.Extension{deny, after})
	err := call(p, &extension.CallRequest{})
	d, ok := extension.AsDenial(err)
	if !ok || d.Rule != "rule.x" || d.Reason != "not today" || slices.Contains(trace, "com.example/after") {
		t.Fatalf("err %v trace %v", err, trace)
	}

	for name, e := range map[string]*rec{
		"error": {id: "com.example/err", trace: &trace, callErr: errors.New("db down: password=hunter2")},
		"panic": {id: "com.example/panic", trace: &trace, panicky: true},
	} {
		p, _ := Build(context.Background(), nil, host, nil, []extension.Extension{e})
		err := call(p, &extension.CallRequest{})
		d, ok := extension.AsDenial(err)
		if !ok || d.Rule != e.id || strings.Contains(d.Reason, "hunter2") || strings.Contains(d.Reason, "boom") {
			t.Fatalf("%s: want a generic denial by %s, got %#v", name, e.id, err)
		}
	}
}

func TestRewriteAndSearchFilter(t *testing.T) {
	var trace []string
	p, _ := Build(context.Background(), nil, host, nil, []extension.Extension{&rec{id: "com.example/rw", trace: &trace, rewrites: map[string]any{"safe": true}}})
	req := (&extension.CallRequest{}).WithArguments(map[string]any{"x": 1})
	var got map[string]any
	if _, err := p.Wrap(upstream(&got))(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got["safe"] != true {
		t.Fatalf("rewrite lost: %v", got)
	}
	if orig, _ := req.Arguments(); orig["x"] != 1 || orig["safe"] != nil {
		t.Fatalf("the caller's request was modified: %v", orig)
	}
	out, _ := p.Search(context.Background(), &extension.SearchRequest{}, []extension.SearchResult{{Name: "a__delete_x"}, {Name: "a__read"}})
	if len(out) != 1 || out[0].Name != "a__read" {
		t.Fatalf("search = %v", out)
	}
}

func TestBuildErrors(t *testing.T) {
	var trace, closed []string
	ok1 := &rec{id: "com.example/one", trace: &trace, closed: &closed}
	bad := &rec{id: "com.example/bad", trace: &trace, provErr: errors.New("cannot open x.rego")}
	_, err := Build(context.Background(), nil, host, nil, []extension.Extension{ok1, bad})
	if err == nil || !strings.Contains(err.Error(), "extension com.example/bad: provision: cannot open x.rego") {
		t.Fatalf("err = %v", err)
	}
	if !slices.Equal(closed, []string{"com.example/one"}) {
		t.Fatalf("provisioned extensions not closed: %v", closed)
	}
	for _, id := range []string{"audit", "com.example", "Com.Example/x", "com.example/", "/x"} {
		if _, err := Build(context.Background(), nil, host, nil, []extension.Extension{&rec{id: id, trace: &trace}}); err == nil {
			t.Errorf("id %q accepted", id)
		}
	}
	dup := []extension.Extension{&rec{id: "com.example/a", trace: &trace}, &rec{id: "com.example/a", trace: &trace}}
	if _, err := Build(context.Background(), nil, host, nil, dup); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("duplicate: %v", err)
	}
}

// An upstream's error passes through every middleware unchanged: it is not
// blamed on the middleware that called next.
func TestUpstreamErrorPassesThrough(t *testing.T) {
	var trace []string
	p, err := Build(context.Background(), nil, host, nil, []extension.Extension{&rec{id: "com.example/a", trace: &trace}, &rec{id: "com.example/b", trace: &trace}})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("upstream closed the connection")
	_, err = p.Wrap(func(context.Context, *extension.CallRequest) (*extension.CallResult, error) { return nil, boom })(context.Background(), &extension.CallRequest{})
	if err != boom {
		t.Fatalf("err = %#v, want the upstream's error unchanged", err)
	}
}

// nilResult is a middleware that swallows the call.
type nilResult struct{}

func (nilResult) ID() string { return "com.example/nil" }
func (nilResult) WrapCall(extension.CallHandler) extension.CallHandler {
	return func(context.Context, *extension.CallRequest) (*extension.CallResult, error) { return nil, nil }
}

func TestMiddlewareWithoutResultFailsClosed(t *testing.T) {
	p, err := Build(context.Background(), nil, host, nil, []extension.Extension{nilResult{}})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := extension.AsDenial(call(p, &extension.CallRequest{})); !ok || d.Rule != "com.example/nil" {
		t.Fatalf("want a denial by com.example/nil, got %v", d)
	}
}

// hider is a visibility filter that hides tools named "*secret*".
type hider struct{}

func (hider) ID() string { return "com.example/hider" }
func (hider) FilterVisible(_ context.Context, _ *extension.VisibilityRequest, in []extension.SearchResult) ([]extension.SearchResult, error) {
	return slices.DeleteFunc(in, func(s extension.SearchResult) bool { return strings.Contains(s.Name, "secret") }), nil
}

// A listing runs the visibility filters only; a search runs them and then
// the search filters, which judge a query.
func TestVisibilityIsNotASearch(t *testing.T) {
	var trace []string
	p, err := Build(context.Background(), nil, host, nil, []extension.Extension{hider{}, &rec{id: "com.example/search", trace: &trace}})
	if err != nil {
		t.Fatal(err)
	}
	in := func() []extension.SearchResult {
		return []extension.SearchResult{{Name: "a__secret"}, {Name: "a__delete_x"}, {Name: "a__read"}}
	}
	listed, err := p.Visible(context.Background(), &extension.VisibilityRequest{}, in())
	if err != nil || len(listed) != 2 || listed[0].Name != "a__delete_x" {
		t.Fatalf("listing = %v, %v: want the visibility filter only", listed, err)
	}
	found, err := p.Search(context.Background(), &extension.SearchRequest{Query: "q", TopK: 5}, in())
	if err != nil || len(found) != 1 || found[0].Name != "a__read" {
		t.Fatalf("search = %v, %v: want both filters", found, err)
	}
}
