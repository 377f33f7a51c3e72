package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/egress"
)

// openAudit opens the audit log the config asks for, or returns nil.
func (g *Gateway) openAudit() error {
	a := g.cfg.Audit
	if !a.On() {
		return nil
	}
	path := a.Path
	if path == "" {
		if g.stateDir == "" {
			return nil
		}
		path = filepath.Join(g.stateDir, "audit.jsonl")
	}
	var redact func(string) string
	if g.redact != nil {
		redact = g.redact.String
	}
	var onAppend func([]byte)
	if g.shared != nil {
		// Replicas sharing state also mirror their records into one
		// Redis Stream, the merged view `toolgate events --state` reads.
		g.stream = g.shared.StartAuditStream()
		onAppend = g.stream.Push
	}
	l, err := audit.Open(path, audit.Options{NoSync: !a.Fsync, Redact: redact,
		MaxSize: int64(a.MaxSizeMB) << 20, MaxFiles: a.MaxFiles, Logger: g.log, OnAppend: onAppend})
	if err != nil {
		return err
	}
	g.audit = l
	// The chain's head, for a monitor to keep outside the state folder: a
	// seq that goes down means the log was cut or replaced.
	g.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "toolgate_audit_seq", Help: "Sequence number of the last audit record (its hash is in /status).",
	}, func() float64 { return float64(l.Head().Seq) }))
	g.log.Info("audit log", "path", path, "fsync", a.Fsync, "seq", l.Head().Seq)
	return nil
}

// emit records an event for extensions. A failure to record is logged:
// extensions report detections, and the gateway's own call path checks
// record() itself.
func (g *Gateway) emit(ctx context.Context, e extension.Event) {
	if err := g.record(ctx, e); err != nil {
		g.log.Error("audit: event not recorded", "type", e.Type, "error", err)
	}
}

// record appends one event to the audit log (written before it returns).
func (g *Gateway) record(ctx context.Context, e extension.Event) error {
	// Guarded: the call boxes ten values, on every event, even when debug
	// logging is off.
	if g.log.Enabled(ctx, slog.LevelDebug) {
		g.log.DebugContext(ctx, "event", "type", e.Type, "server", e.Server, "tool", e.Tool, "action", e.Action, "reason", e.Reason)
	}
	g.metrics.observe(e)
	g.observe(ctx, e)
	if g.audit == nil {
		return nil
	}
	// Names come from upstreams too: none is written unmasked.
	// The principal travels in ctx from the MCP handler (see
	// withPrincipal), so every event of a request carries it, whichever
	// filter emits it.
	return g.audit.Append(audit.Event{
		Type: e.Type, Session: e.Session, Principal: extension.PrincipalFrom(ctx).ID(), Replica: g.replica, Server: g.redact.String(e.Server), Tool: g.redact.String(e.Tool),
		Action: e.Action, Reason: e.Reason, Fields: e.Fields,
	})
}

// AuditPath is the audit log's path, or "" when auditing is off.
func (g *Gateway) AuditPath() string {
	if g.audit == nil {
		return ""
	}
	return g.audit.Path()
}

// argsField describes call arguments for an event: their hash, or the
// values themselves when the operator asked for them.
func (g *Gateway) argsFieldOf(args map[string]any) (string, any) {
	if g.cfg.Audit.RecordArguments {
		return "arguments", args
	}
	b, err := json.Marshal(args) // map keys are sorted: a canonical form
	if err != nil {
		return "arguments_hash", fmt.Sprintf("unencodable: %v", err)
	}
	sum := sha256.Sum256(b)
	return "arguments_hash", "sha256:" + hex.EncodeToString(sum[:])
}

// egressEvent records a connection a stdio server made or tried through
// its egress proxy.
func (g *Gateway) egressEvent(ev egress.Event) {
	g.emit(context.Background(), extension.Event{
		Type: audit.NetworkConnection, Server: ev.Server,
		Action: ev.Decision, Reason: ev.Reason, Fields: ev.Fields(),
	})
}
