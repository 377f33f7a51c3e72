package gateway

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
)

// metrics are derived from the event stream, so every decision that is
// recorded is also counted, and nothing else needs instrumenting.
type metrics struct {
	reg       *prometheus.Registry
	calls     *prometheus.CounterVec
	decisions *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	searches  prometheus.Counter
	events    *prometheus.CounterVec

	sessions        prometheus.Gauge
	sessionsEvicted prometheus.Counter

	// serverLabel maps an event's server to its label value. A server
	// name in an event may come from a client (a call_tool name that
	// splits into an unknown server), and each distinct label value is a
	// new time series kept forever; see Gateway.metricServer.
	serverLabel func(string) string

	// The series already looked up, by label values: WithLabelValues
	// hashes the labels and takes the vector's lock on every event.
	mu             sync.RWMutex
	eventSeries    map[[2]string]prometheus.Counter
	decisionSeries map[[3]string]prometheus.Counter
	callSeries     map[[2]string]prometheus.Counter
	durationSeries map[string]prometheus.Observer
}

// series returns m[k], made by mk on first use. Label values are bounded
// (see serverLabel), as the vectors' own series are.
func series[K comparable, V any](mu *sync.RWMutex, m map[K]V, k K, mk func() V) V {
	mu.RLock()
	v, ok := m[k]
	mu.RUnlock()
	if ok {
		return v
	}
	v = mk()
	mu.Lock()
	m[k] = v
	mu.Unlock()
	return v
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_tool_calls_total", Help: "Upstream tool calls by server and outcome (ok, tool_error, error).",
		}, []string{"server", "outcome"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_call_decisions_total", Help: "call_tool decisions by server, action (allow, block) and rule.",
		}, []string{"server", "action", "rule"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolgate_tool_call_duration_seconds", Help: "Upstream tool call latency by server.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"server"}),
		searches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_searches_total", Help: "search_tools calls.",
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_events_total", Help: "Recorded events by type and action.",
		}, []string{"type", "action"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolgate_http_sessions", Help: "Stateful streamable HTTP sessions open (and being opened).",
		}),
		sessionsEvicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_http_sessions_evicted_total", Help: "Sessions closed because http.max_sessions was reached (least recently used first).",
		}),
	}
	m.eventSeries = map[[2]string]prometheus.Counter{}
	m.decisionSeries = map[[3]string]prometheus.Counter{}
	m.callSeries = map[[2]string]prometheus.Counter{}
	m.durationSeries = map[string]prometheus.Observer{}
	m.reg.MustRegister(m.calls, m.decisions, m.duration, m.searches, m.events, m.sessions, m.sessionsEvicted,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(e extension.Event) {
	series(&m.mu, m.eventSeries, [2]string{e.Type, e.Action}, func() prometheus.Counter { return m.events.WithLabelValues(e.Type, e.Action) }).Inc()
	server := "unknown"
	if m.serverLabel != nil {
		server = m.serverLabel(e.Server)
	}
	switch e.Type {
	case audit.Search:
		m.searches.Inc()
	case audit.ToolCallIntercepted:
		series(&m.mu, m.decisionSeries, [3]string{server, e.Action, e.Reason}, func() prometheus.Counter { return m.decisions.WithLabelValues(server, e.Action, e.Reason) }).Inc()
	case audit.ToolCalled:
		outcome := "ok"
		if e.Action == "error" {
			outcome = "error"
		} else if isErr, _ := e.Fields["is_error"].(bool); isErr {
			outcome = "tool_error"
		}
		series(&m.mu, m.callSeries, [2]string{server, outcome}, func() prometheus.Counter { return m.calls.WithLabelValues(server, outcome) }).Inc()
		if ms, ok := e.Fields["duration_ms"].(float64); ok {
			series(&m.mu, m.durationSeries, server, func() prometheus.Observer { return m.duration.WithLabelValues(server) }).Observe(float64(ms) / 1000)
		}
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// metricServer is the metrics label of a server: its name when the config
// names it, "loaded" for a server connected at run time by
// load_mcp_server (whose name a client chose), and "unknown" for any other
// name, such as the server part of a call_tool name that matches nothing.
func (g *Gateway) metricServer(name string) string {
	if _, ok := g.cfg.Servers[name]; ok {
		return name
	}
	if _, ok := g.ups.Get(name); ok {
		return "loaded"
	}
	return "unknown"
}
