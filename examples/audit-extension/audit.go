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

// Audit is a call filter that appends one JSON line per call_tool that
// passed the discovery gate to a file. It runs in the observe phase, before
// any filter can refuse the call, so it sees every call; it never refuses
// one itself.
type Audit struct {
	extension.Base

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

// CallFilter writes the record. A write failure is returned as a plain
// error, so the gateway refuses the call (fail closed): an audited gateway
// does not run unaudited calls.
func (a *Audit) CallFilter() extension.CallFilter {
	return func(_ context.Context, req *extension.CallRequest) error {
		names := make([]string, 0, len(req.Arguments))
		for k := range req.Arguments {
			names = append(names, k)
		}
		slices.Sort(names)
		line, err := json.Marshal(Record{
			Time: time.Now().UTC(), ToolName: req.ToolName, Server: req.ServerName,
			Arguments: names, Session: req.Session, Principal: req.Principal,
		})
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
}
