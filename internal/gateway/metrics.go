package gateway

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
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
	m.reg.MustRegister(m.calls, m.decisions, m.duration, m.searches, m.events, m.sessions, m.sessionsEvicted,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(e extension.Event) {
	m.events.WithLabelValues(e.Type, e.Action).Inc()
	switch e.Type {
	case audit.Search:
		m.searches.Inc()
	case audit.ToolCallIntercepted:
		m.decisions.WithLabelValues(e.Server, e.Action, e.Reason).Inc()
	case audit.ToolCalled:
		outcome := "ok"
		if e.Action == "error" {
			outcome = "error"
		} else if isErr, _ := e.Fields["is_error"].(bool); isErr {
			outcome = "tool_error"
		}
		m.calls.WithLabelValues(e.Server, outcome).Inc()
		if ms, ok := e.Fields["duration_ms"].(float64); ok {
			m.duration.WithLabelValues(e.Server).Observe(float64(ms) / 1000)
		}
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
