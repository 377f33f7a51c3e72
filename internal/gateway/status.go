package gateway

import (
	"encoding/json"
	"net/http"
	"os"
	"runtime"
	"sort"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/secrets"
	"github.com/toolgate/toolgate/internal/upstream"
)

// Status is what GET /status and `toolgate status` report.
type Status struct {
	Version    string    `json:"version"`
	PID        int       `json:"pid"`
	Goroutines int       `json:"goroutines"`
	Time       time.Time `json:"time"`
	Tools      int       `json:"tools"`
	// Starting lists the configured servers not yet indexed (serve
	// answers clients while its upstreams start).
	Starting []string       `json:"starting,omitempty"`
	Servers  []ServerStatus `json:"servers"`
	// Audit is the audit chain's last record (absent when auditing is off).
	Audit *audit.Head `json:"audit,omitempty"`
}

// ServerStatus is one upstream's state plus the number of its tools in the
// catalogue.
type ServerStatus struct {
	upstream.Status
	Tools int `json:"tools"`
}

// Status snapshots the gateway and every upstream. Error texts pass the
// redactor, like everything else the gateway hands out.
func (g *Gateway) Status() Status {
	perServer := map[string]int{}
	all := g.cat.All()
	for _, t := range all {
		perServer[t.Server]++
	}
	st := Status{Version: Version, PID: os.Getpid(), Goroutines: runtime.NumGoroutine(), Time: time.Now().UTC(), Tools: len(all), Starting: g.Starting()}
	for _, s := range g.ups.Servers() {
		us := s.Status()
		us.LastError = secrets.StripURLs(g.redactString(us.LastError))
		st.Servers = append(st.Servers, ServerStatus{Status: us, Tools: perServer[us.Name]})
	}
	// Configured servers that are not running because of the config (a
	// variable that is not set) are listed too, with the reason as their
	// error, so a missing token shows here rather than only in the log.
	var disabled []string
	for name, s := range g.cfg.Servers {
		if _, up := g.ups.Get(name); s.Disabled && s.DisabledReason != "" && !up {
			disabled = append(disabled, name)
		}
	}
	sort.Strings(disabled)
	for _, name := range disabled {
		s := g.cfg.Servers[name]
		st.Servers = append(st.Servers, ServerStatus{Status: upstream.Status{
			Name: name, State: StateDisabled, Transport: s.Transport, LastError: g.redact.String(s.DisabledReason),
		}})
	}
	if g.audit != nil {
		h := g.audit.Head()
		st.Audit = &h
	}
	return st
}

// StateDisabled is the /status state of a configured server the gateway did
// not start because its config entry cannot be used as it is.
const StateDisabled upstream.State = "disabled"

// statusHandler serves GET /status as JSON (behind the host guard, like
// every path).
func (g *Gateway) statusHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(g.Status())
}
