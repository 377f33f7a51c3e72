package gateway

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/secrets"
	"github.com/toolgate/toolgate/internal/upstream"
)

// Status is what GET /status and `toolgate status` report.
type Status struct {
	Version    string         `json:"version"`
	PID        int            `json:"pid"`
	Goroutines int            `json:"goroutines"`
	Time       time.Time      `json:"time"`
	Tools      int            `json:"tools"`
	Servers    []ServerStatus `json:"servers"`
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
	st := Status{Version: Version, PID: os.Getpid(), Goroutines: runtime.NumGoroutine(), Time: time.Now().UTC(), Tools: len(all)}
	for _, s := range g.ups.Servers() {
		us := s.Status()
		us.LastError = secrets.StripURLs(g.redactString(us.LastError))
		st.Servers = append(st.Servers, ServerStatus{Status: us, Tools: perServer[us.Name]})
	}
	return st
}

// statusHandler serves GET /status as JSON. Like /mcp, a loopback listener
// refuses a Host that is not loopback (DNS rebinding).
func (g *Gateway) statusHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && loopback(la.String()) && !loopback(r.Host) {
		http.Error(w, "forbidden: invalid Host header", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(g.Status())
}

// loopback reports whether a host or host:port names the loopback interface.
func loopback(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
