package state_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

// Two replicas' audit logs mirrored into one stream: the merged view holds
// every record of both, interleaved, each replica's chain checks out, and
// a record slipped into the stream is caught.
func TestAuditStreamMergedView(t *testing.T) {
	a, b := redistest.Shared(t)
	ctx := context.Background()
	var streams []*state.AuditStream
	var logs []*audit.Log
	for _, be := range []*state.Backend{a, b} {
		s := be.StartAuditStream()
		l, err := audit.Open(filepath.Join(t.TempDir(), "audit.jsonl"), audit.Options{NoSync: true, OnAppend: s.Push})
		if err != nil {
			t.Fatal(err)
		}
		streams, logs = append(streams, s), append(logs, l)
	}
	for i := range 20 {
		for r, l := range logs {
			if err := l.Append(audit.Event{Type: "tool_called", Replica: fmt.Sprint("r", r), Tool: fmt.Sprint("t", i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range logs {
		logs[i].Close()
		streams[i].Close()
	}

	var chains audit.Chains
	per := map[string]int{}
	err := state.ReadAuditStream(ctx, a, func(replica string, line []byte) error {
		e, err := chains.Add(replica, line)
		if err != nil {
			return err
		}
		per[replica]++
		if e.Replica != "r0" && e.Replica != "r1" {
			return fmt.Errorf("record without its replica: %+v", e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if per["a"] != 20 || per["b"] != 20 {
		t.Fatalf("records per replica in the stream: %v, want 20 each", per)
	}

	// A forged record of replica a, re-using a real line with a changed tool.
	var last string
	_ = state.ReadAuditStream(ctx, a, func(replica string, line []byte) error {
		if replica == "a" {
			last = string(line)
		}
		return nil
	})
	forged := strings.Replace(last, `"tool":"t19"`, `"tool":"t99"`, 1)
	a.Client.XAdd(ctx, &redis.XAddArgs{Stream: a.AuditStreamKey(), Values: []any{"r", "a", "l", forged}})
	chains = audit.Chains{}
	err = state.ReadAuditStream(ctx, a, func(replica string, line []byte) error {
		_, err := chains.Add(replica, line)
		return err
	})
	if err == nil {
		t.Fatal("a forged record in the stream was accepted")
	}
}
