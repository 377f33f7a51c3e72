package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/toolgate/toolgate/extension"
)

// EnvLog names the environment variable that sets the audit log's path.
const EnvLog = "TOOLGATE_AUDIT_LOG"

// Audit is call middleware that appends one JSON line per call_tool that
// passed the discovery gate to a file, with how it ended and how long it
// took. It runs in the observe phase, outermost, so it sees every call
// and every outcome, including a later filter's refusal.
type Audit struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

// Record is one line of the audit log. It holds the argument names, not
// their values, which may be secret.
type Record struct {
	Time      time.Time `json:"time"`
	ToolName  string    `json:"tool_name"`
	Server    string    `json:"server_name"`
	Arguments []string  `json:"argument_names"`
	Session   string    `json:"session,omitempty"`
	Principal string    `json:"principal,omitempty"`
	// Outcome is "ok", "refused" (a filter's denial) or "error".
	Outcome    string  `json:"outcome"`
	Rule       string  `json:"rule,omitempty"`
	DurationMS float64 `json:"duration_ms"`
}

// ID is the extension's reverse-DNS identifier.
func (*Audit) ID() string { return "com.example/audit" }

// Phase puts the filter first in the call pipeline.
func (*Audit) Phase() extension.Phase { return extension.PhaseObserve }

// Provision opens the log file: $TOOLGATE_AUDIT_LOG, else audit.jsonl in
// the state directory. Construction has no side effects; this is where the
// file is opened.
func (a *Audit) Provision(_ context.Context, h extension.Host) error {
	a.path = os.Getenv(EnvLog)
	if a.path == "" {
		if h.StateDir == "" {
			return fmt.Errorf("no audit log: set %s or --state-dir", EnvLog)
		}
		a.path = filepath.Join(h.StateDir, "audit.jsonl")
	}
	f, err := os.OpenFile(a.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	a.f = f
	if h.Logger != nil {
		h.Logger.Info("audit log open", "path", a.path)
	}
	return nil
}

// Validate checks the file is open.
func (a *Audit) Validate() error {
	if a.f == nil {
		return errors.New("audit log not open")
	}
	return nil
}

// Close closes the file.
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}

// WrapCall wraps the rest of the pipeline and the upstream call: it times
// the call and writes the record once the outcome is known. While the log
// is closed calls are refused (fail closed): an audited gateway does not
// run unaudited calls. A record that cannot be written turns the result
// into an error.
func (a *Audit) WrapCall(next extension.CallHandler) extension.CallHandler {
	return func(ctx context.Context, req *extension.CallRequest) (*extension.CallResult, error) {
		a.mu.Lock()
		open := a.f != nil
		a.mu.Unlock()
		if !open {
			return nil, errors.New("audit log closed")
		}
		start := time.Now()
		res, err := next(ctx, req)
		rec := Record{
			Time: start.UTC(), ToolName: req.ToolName, Server: req.ServerName,
			Arguments: argumentNames(req), Session: req.Session, Principal: req.Principal,
			Outcome: "ok", DurationMS: float64(time.Since(start).Microseconds()) / 1000,
		}
		if d, ok := extension.AsDenial(err); ok {
			rec.Outcome, rec.Rule = "refused", d.Rule
		} else if err != nil {
			rec.Outcome = "error"
		}
		if werr := a.write(rec); werr != nil {
			return nil, werr
		}
		return res, err
	}
}

// argumentNames lists the argument names, sorted; never their values.
func argumentNames(req *extension.CallRequest) []string {
	args, _ := req.Arguments()
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func (a *Audit) write(rec Record) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return errors.New("audit log closed")
	}
	_, err = a.f.Write(append(line, '\n'))
	return err
}
