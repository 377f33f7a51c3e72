package pipeline

import (
	"context"
	"errors"
	"testing"

	"github.com/toolgate/toolgate/extension"
)

// TestTraceRecordsEachFilter: with a trace in the context, every call
// middleware that runs leaves a step, in the order they were entered, with its verdict, up to the one that
// denies; search filters name the tools they hid; without a trace nothing
// is recorded.
func TestTraceRecordsEachFilter(t *testing.T) {
	var order []string
	pass := &rec{id: "com.example/pass", trace: &order}
	deny := &rec{id: "com.example/deny", trace: &order, callErr: extension.Deny("deny.rule", "no")}
	never := &rec{id: "com.example/never", trace: &order}
	p, err := Build(context.Background(), nil, host, nil, []extension.Extension{pass, deny, never})
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithTrace(context.Background())
	if WithTrace(ctx) != ctx {
		t.Error("WithTrace replaced the trace a context already had")
	}
	if _, err := p.Decide(ctx, &extension.CallRequest{}); err == nil {
		t.Fatal("not denied")
	}
	steps := TraceFrom(ctx).Steps()
	if len(steps) != 2 {
		t.Fatalf("steps = %+v, want pass then deny", steps)
	}
	if s := steps[0]; s.Extension != "com.example/pass" || s.Pipeline != "call" || s.Verdict != "pass" || s.Rule != "" {
		t.Errorf("first step %+v", s)
	}
	if s := steps[1]; s.Extension != "com.example/deny" || s.Verdict != "deny" || s.Rule != "deny.rule" {
		t.Errorf("second step %+v", s)
	}

	sctx := WithTrace(context.Background())
	if _, err := p.Search(sctx, &extension.SearchRequest{}, []extension.SearchResult{{Name: "a__delete_x"}, {Name: "a__read"}}); err != nil {
		t.Fatal(err)
	}
	ss := TraceFrom(sctx).Steps()
	if len(ss) != 3 || len(ss[0].Hid) != 1 || ss[0].Hid[0] != "a__delete_x" || ss[0].Pipeline != "search" || len(ss[1].Hid) != 0 {
		t.Errorf("search steps %+v", ss)
	}

	failing := &rec{id: "com.example/broken", trace: &order, callErr: errors.New("cannot decide")}
	p2, _ := Build(context.Background(), nil, host, nil, []extension.Extension{failing})
	ectx := WithTrace(context.Background())
	_, _ = p2.Decide(ectx, &extension.CallRequest{})
	if s := TraceFrom(ectx).Steps(); len(s) != 1 || s[0].Verdict != "error" {
		t.Errorf("failing filter: %+v", s)
	}

	if TraceFrom(context.Background()).Steps() != nil {
		t.Error("a context without a trace has steps")
	}
}

// TestTraceBounded: a context reused for many operations keeps at most
// maxSteps steps.
func TestTraceBounded(t *testing.T) {
	var order []string
	p, _ := Build(context.Background(), nil, host, nil, []extension.Extension{&rec{id: "com.example/pass", trace: &order}})
	ctx := WithTrace(context.Background())
	for range maxSteps + 10 {
		_, _ = p.Decide(ctx, &extension.CallRequest{})
	}
	if n := len(TraceFrom(ctx).Steps()); n != maxSteps {
		t.Errorf("%d steps kept, want %d", n, maxSteps)
	}
}
