package console

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

// The charts cover the last hour in one-minute buckets, kept in a ring of
// 60: the gateway's Prometheus metrics are totals since start, and the
// console wants rates and percentiles over time.
const (
	chartMinutes = 60
	// maxKeys bounds the servers and refusal reasons one minute tracks; a
	// client can make up server names (a call_tool name that matches no
	// server), so the rest are counted as "other".
	maxKeys = 32
	// latency buckets: bucket i holds durations up to latBase·latFactor^i.
	latBuckets = 64
	latBase    = 0.1 // ms
	latFactor  = 1.25
)

type minute struct {
	at       int64 // Unix minute; 0: unused
	calls    map[string]int
	latency  map[string]*[latBuckets + 1]uint32
	refusals map[string]int
}

type charts struct {
	mu  sync.Mutex
	buf [chartMinutes]minute
}

func newCharts() *charts { return &charts{} }

// bucketFor returns the bucket of a duration in milliseconds.
func bucketFor(ms float64) int {
	if ms <= latBase {
		return 0
	}
	i := int(math.Ceil(math.Log(ms/latBase) / math.Log(latFactor)))
	return min(max(i, 0), latBuckets)
}

// bucketUpper is the upper bound of bucket i in milliseconds.
func bucketUpper(i int) float64 { return latBase * math.Pow(latFactor, float64(i)) }

func capKey(m map[string]int, k string) string {
	if _, ok := m[k]; ok || len(m) < maxKeys {
		return k
	}
	return "other"
}

func (c *charts) slot(t time.Time) *minute {
	at := t.Unix() / 60
	m := &c.buf[at%chartMinutes]
	if m.at != at {
		*m = minute{at: at, calls: map[string]int{}, latency: map[string]*[latBuckets + 1]uint32{}, refusals: map[string]int{}}
	}
	return m
}

func (c *charts) add(e Event) {
	switch {
	case e.Type == audit.ToolCalled:
	case e.Type == audit.ToolCallIntercepted && e.Action == "block":
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.slot(e.Time)
	if e.Type == audit.ToolCallIntercepted {
		reason := e.Reason
		if reason == "" {
			reason = "unspecified"
		}
		m.refusals[capKey(m.refusals, reason)]++
		return
	}
	server := capKey(m.calls, e.Server)
	m.calls[server]++
	if ms, ok := e.Fields["duration_ms"].(float64); ok {
		h := m.latency[server]
		if h == nil {
			h = new([latBuckets + 1]uint32)
			m.latency[server] = h
		}
		h[bucketFor(ms)]++
	}
}

// ChartData is what the Charts page and GET /ui/api/charts show.
type ChartData struct {
	// From is the start of the first minute; each series has one value a
	// minute, oldest first.
	From        time.Time       `json:"from"`
	CallsPerSec []float64       `json:"calls_per_sec"`
	Servers     []ServerLatency `json:"servers"`
	Refusals    []Count         `json:"refusals"`
}

// ServerLatency is one server's call count and latency percentiles over
// the hour.
type ServerLatency struct {
	Server string  `json:"server"`
	Calls  int     `json:"calls"`
	P50MS  float64 `json:"p50_ms"`
	P99MS  float64 `json:"p99_ms"`
}

// Count is a named total.
type Count struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func (c *charts) snapshot(now time.Time) ChartData {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := now.Unix() / 60
	d := ChartData{From: time.Unix((cur-chartMinutes+1)*60, 0).UTC(), CallsPerSec: make([]float64, chartMinutes)}
	hist := map[string]*[latBuckets + 1]uint32{}
	calls := map[string]int{}
	refusals := map[string]int{}
	for i := range chartMinutes {
		at := cur - chartMinutes + 1 + int64(i)
		m := &c.buf[at%chartMinutes]
		if m.at != at {
			continue
		}
		n := 0
		for s, k := range m.calls {
			n += k
			calls[s] += k
		}
		secs := 60.0
		if at == cur {
			secs = max(1, float64(now.Unix()%60+1))
		}
		d.CallsPerSec[i] = float64(n) / secs
		for s, h := range m.latency {
			t := hist[s]
			if t == nil {
				t = new([latBuckets + 1]uint32)
				hist[s] = t
			}
			for j, v := range h {
				t[j] += v
			}
		}
		for r, k := range m.refusals {
			refusals[r] += k
		}
	}
	for s, n := range calls {
		sl := ServerLatency{Server: s, Calls: n}
		if h := hist[s]; h != nil {
			sl.P50MS, sl.P99MS = quantile(h, 0.5), quantile(h, 0.99)
		}
		d.Servers = append(d.Servers, sl)
	}
	sort.Slice(d.Servers, func(i, j int) bool { return d.Servers[i].Server < d.Servers[j].Server })
	for r, n := range refusals {
		d.Refusals = append(d.Refusals, Count{r, n})
	}
	sort.Slice(d.Refusals, func(i, j int) bool {
		if d.Refusals[i].Count != d.Refusals[j].Count {
			return d.Refusals[i].Count > d.Refusals[j].Count
		}
		return d.Refusals[i].Name < d.Refusals[j].Name
	})
	return d
}

// quantile estimates the q-quantile of a histogram as the upper bound of
// the bucket it falls in (an overestimate of at most 25%).
func quantile(h *[latBuckets + 1]uint32, q float64) float64 {
	var total uint64
	for _, v := range h {
		total += uint64(v)
	}
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, v := range h {
		seen += uint64(v)
		if seen >= rank {
			return math.Round(bucketUpper(i)*100) / 100
		}
	}
	return math.Round(bucketUpper(latBuckets)*100) / 100
}

// svgLine is a polyline's points for values in a w×h box (y grows down).
func svgLine(vals []float64, w, h float64) (points string, top float64) {
	for _, v := range vals {
		top = max(top, v)
	}
	scale := 1.0
	if top > 0 {
		scale = (h - 4) / top
	}
	var b strings.Builder
	step := w / float64(max(len(vals)-1, 1))
	for i, v := range vals {
		fmt.Fprintf(&b, "%.1f,%.1f ", float64(i)*step, h-2-v*scale)
	}
	return strings.TrimSpace(b.String()), top
}

// jsonish renders a value of any type as plain JSON data.
func jsonish(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return string(b)
	}
	return out
}
