package console

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/upstream"
)

//go:embed templates/*.html static/*
var assets embed.FS

// pages are the console's pages, in navigation order.
var pages = []struct{ Path, Name, Title string }{
	{"", "servers", "Servers"},
	{"activity", "activity", "Live activity"},
	{"detections", "detections", "Detections"},
	{"pins", "pins", "Pins"},
	{"search", "search", "Search playground"},
	{"charts", "charts", "Charts"},
}

// Paths of the console, under gateway.ConsolePath.
const (
	base         = gateway.ConsolePath
	csrfHeader   = "X-CSRF-Token"
	csrfField    = "csrf_token"
	maxFormBytes = 64 << 10
	// maxListed bounds the events a page or an API answer lists.
	maxListed = 500
)

var templates = map[string]*template.Template{}

var funcs = template.FuncMap{
	"base": func() string { return base },
	"ms": func(v float64) string {
		switch {
		case v >= 1000:
			return fmt.Sprintf("%.2f s", v/1000)
		case v >= 10:
			return fmt.Sprintf("%.0f ms", v)
		}
		return fmt.Sprintf("%.2f ms", v)
	},
	"score": func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"scorep": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%.3f", *v)
	},
	"rfc3339": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	},
	"clock": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("15:04:05")
	},
	"short": func(h string) string {
		if len(h) > 12 {
			return h[:12]
		}
		if h == "" {
			return "–"
		}
		return h
	},
	"value": func(v any) string {
		if s, ok := v.(string); ok {
			return s
		}
		b, _ := json.Marshal(v)
		s := string(b)
		if len(s) > 600 {
			s = s[:600] + "…"
		}
		return s
	},
	"sortedKeys": func(m map[string]any) []string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	},
	"headline": headline,
	"index1":   func(i int) int { return i + 1 },
	"pct":      func(v, top float64) float64 { return pct(v, top) },
	"mul":      func(a, b float64) float64 { return a * b },
	"add":      func(a, b float64) float64 { return a + b },
	"itof":     func(i int) float64 { return float64(i) },
}

func pct(v, top float64) float64 {
	if top <= 0 {
		return 0
	}
	return v / top * 100
}

func init() {
	for _, p := range append(pages[:len(pages):len(pages)], struct{ Path, Name, Title string }{"login", "login", "Sign in"}) {
		templates[p.Name] = template.Must(template.New(p.Name).Funcs(funcs).ParseFS(assets,
			"templates/layout.html", "templates/partials.html", "templates/"+p.Name+".html"))
	}
}

func (c *Console) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET "+base+"static/", http.StripPrefix(base+"static/", cacheStatic(http.FileServerFS(static))))
	m.HandleFunc("GET "+base+"{$}", c.pageServers)
	m.HandleFunc("GET "+base+"activity", c.pageActivity)
	m.HandleFunc("GET "+base+"detections", c.pageDetections)
	m.HandleFunc("GET "+base+"pins", c.pagePins)
	m.HandleFunc("GET "+base+"search", c.pageSearch)
	m.HandleFunc("GET "+base+"charts", c.pageCharts)
	m.HandleFunc("GET "+base+"login", c.pageLogin)
	m.Handle("POST "+base+"login", sameOrigin(http.HandlerFunc(c.login)))
	m.Handle("POST "+base+"logout", c.protect(http.HandlerFunc(c.logout)))

	m.HandleFunc("GET "+base+"fragment/servers", c.fragmentServers)
	m.HandleFunc("GET "+base+"fragment/charts", c.fragmentCharts)

	m.HandleFunc("GET "+base+"api/servers", c.apiServers)
	m.HandleFunc("GET "+base+"api/events", c.apiEvents)
	m.HandleFunc("GET "+base+"api/stream", c.apiStream)
	m.HandleFunc("GET "+base+"api/detections", c.apiDetections)
	m.HandleFunc("GET "+base+"api/pins", c.apiPins)
	m.HandleFunc("GET "+base+"api/search", c.apiSearch)
	m.HandleFunc("GET "+base+"api/charts", c.apiCharts)
	m.Handle("POST "+base+"api/servers/{name}/{action}", c.protect(http.HandlerFunc(c.serverAction)))
	m.Handle("POST "+base+"api/pins/trust", c.protect(http.HandlerFunc(c.trust)))
	c.mux = http.NewServeMux()
	c.mux.Handle(base, securityHeaders(m))
}

// securityHeaders: no framing (clickjacking of the buttons), no caching of
// pages that show live state, and a content policy that allows the
// console's own files only (no inline script, nothing from elsewhere).
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "same-origin")
		if !strings.HasPrefix(r.URL.Path, base+"static/") {
			hd.Set("Cache-Control", "no-store")
		}
		h.ServeHTTP(w, r)
	})
}

func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

var crossOrigin = http.NewCrossOriginProtection()

// sameOrigin refuses a browser request sent from another origin (told by
// Sec-Fetch-Site, or Origin against Host).
func sameOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := crossOrigin.Check(r); err != nil {
			writeError(w, http.StatusForbidden, "refused: a cross-origin request (the console's buttons work from its own pages only)")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// protect guards a state-changing endpoint: same origin, and the CSRF
// token of the caller's pages in the X-CSRF-Token header or the form.
func (c *Console) protect(h http.Handler) http.Handler {
	return sameOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		got := r.Header.Get(csrfHeader)
		if got == "" {
			if err := r.ParseForm(); err != nil {
				writeError(w, http.StatusBadRequest, "bad form: "+err.Error())
				return
			}
			got = r.PostForm.Get(csrfField)
		}
		if got == "" {
			writeError(w, http.StatusForbidden, "refused: no CSRF token (reload the page and try again)")
			return
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(c.csrfToken(r))) != 1 {
			writeError(w, http.StatusForbidden, "refused: the CSRF token does not match (reload the page and try again)")
			return
		}
		h.ServeHTTP(w, r)
	}))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// page is what every page template gets.
type page struct {
	Name, Title string
	Nav         []navItem
	CSRF        string
	Auth        bool
	Data        any
}

type navItem struct {
	Href, Title string
	Current     bool
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, name string, data any) {
	p := page{Name: name, CSRF: c.csrfToken(r), Auth: c.g.AuthEnabled(), Data: data}
	for _, pg := range pages {
		p.Nav = append(p.Nav, navItem{Href: base + pg.Path, Title: pg.Title, Current: pg.Name == name})
		if pg.Name == name {
			p.Title = pg.Title
		}
	}
	if name == "login" {
		p.Title = "Sign in"
	}
	c.execute(w, templates[name], "layout", p)
}

func (c *Console) execute(w http.ResponseWriter, t *template.Template, name string, data any) {
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, name, data); err != nil {
		c.log.Error("console: render", "template", name, "error", err)
		http.Error(w, "console: the page could not be rendered (see the gateway's log)", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// ---- Servers

// ServerView is one server on the Servers page and in GET /ui/api/servers.
type ServerView struct {
	gateway.ServerStatus
	Pins *PinSummary `json:"pins,omitempty"`
	// Actions are the buttons that apply: start, restart, stop.
	Actions []string `json:"actions"`
}

// PinSummary counts a server's pinned tools and changed definitions.
type PinSummary struct {
	Pinned   int    `json:"pinned"`
	Mismatch int    `json:"mismatch"`
	Binary   string `json:"binary,omitempty"`
}

// ServersData is GET /ui/api/servers.
type ServersData struct {
	Time     time.Time    `json:"time"`
	Version  string       `json:"version"`
	Tools    int          `json:"tools"`
	Starting []string     `json:"starting,omitempty"`
	Servers  []ServerView `json:"servers"`
}

func (c *Console) servers() ServersData {
	st := c.g.Status()
	d := ServersData{Time: st.Time, Version: st.Version, Tools: st.Tools, Starting: st.Starting, Servers: []ServerView{}}
	pins := map[string]*PinSummary{}
	if s := c.pinStore(); s != nil {
		if f, err := s.Current(); err == nil {
			for _, e := range f.ToolEntries() {
				p := pins[e.Server]
				if p == nil {
					p = &PinSummary{}
					pins[e.Server] = p
				}
				switch e.Status() {
				case "match":
					p.Pinned++
				case "mismatch":
					p.Pinned++
					p.Mismatch++
				}
			}
			for name, b := range f.Binaries {
				p := pins[name]
				if p == nil {
					p = &PinSummary{}
					pins[name] = p
				}
				p.Binary = b.Status()
			}
		}
	}
	for _, s := range st.Servers {
		if s.Egress != nil {
			e := *s.Egress
			e.LastRefused = c.g.Redact(e.LastRefused)
			s.Egress = &e
		}
		v := ServerView{ServerStatus: s, Pins: pins[s.Name], Actions: []string{}}
		switch s.State {
		case upstream.StateRunning, upstream.StateIdle:
			v.Actions = []string{"restart", "stop"}
		case upstream.StateStopped, upstream.StateFailed:
			v.Actions = []string{"start"}
		}
		d.Servers = append(d.Servers, v)
	}
	return d
}

func (c *Console) pageServers(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "servers", c.servers())
}

func (c *Console) fragmentServers(w http.ResponseWriter, r *http.Request) {
	c.execute(w, templates["servers"], "serverRows", page{CSRF: c.csrfToken(r), Data: c.servers()})
}

func (c *Console) apiServers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.servers())
}

// serverActionTimeout bounds a start from the console.
const serverActionTimeout = 60 * time.Second

// serverAction restarts, stops or starts an upstream, and records who did
// it in the audit log.
func (c *Console) serverAction(w http.ResponseWriter, r *http.Request) {
	name, action := r.PathValue("name"), r.PathValue("action")
	srv, ok := c.g.Upstreams().Get(name)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no server %q is running in this gateway", name))
		return
	}
	var err error
	switch action {
	case "stop":
		srv.Stop()
	case "restart":
		srv.Stop()
		err = c.start(r.Context(), srv)
	case "start":
		err = c.start(r.Context(), srv)
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown action %q (want start, restart or stop)", action))
		return
	}
	fields := map[string]any{"via": "console"}
	if err != nil {
		fields["error"] = c.g.Redact(err.Error())
	}
	if rerr := c.g.Record(r.Context(), extension.Event{Type: ActionEvent, Server: name, Action: "server_" + action, Fields: fields}); rerr != nil {
		c.log.Error("console: action not recorded", "action", action, "server", name, "error", rerr)
	}
	if err != nil {
		c.reply(w, r, http.StatusBadGateway, fmt.Sprintf("%s %s: %s", action, name, c.g.Redact(err.Error())), base)
		return
	}
	c.reply(w, r, http.StatusOK, fmt.Sprintf("%s: %s done", name, action), base)
}

// ActionEvent is the audit event type of what an operator did in the
// console (Action says what: server_restart, server_stop, server_start,
// pin_trust), with the principal who did it.
const ActionEvent = "console_action"

func (c *Console) start(ctx context.Context, srv *upstream.Server) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), serverActionTimeout)
	defer cancel()
	_, done, err := srv.Use(ctx)
	if err != nil {
		return err
	}
	done(nil)
	return nil
}

// reply answers a button: JSON to the console's script, a redirect back
// to the page for a plain form post (no script).
func (c *Console) reply(w http.ResponseWriter, r *http.Request, status int, msg, back string) {
	if r.Header.Get(csrfHeader) == "" && status < 300 {
		http.Redirect(w, r, back+"?done="+url.QueryEscape(msg), http.StatusSeeOther)
		return
	}
	if status >= 300 {
		writeError(w, status, msg)
		return
	}
	writeJSON(w, status, map[string]any{"ok": true, "message": msg})
}

// ---- Activity and detections

// eventFilter selects events by the activity page's fields: server, tool,
// session and principal by case-insensitive substring, decision exactly.
type eventFilter struct {
	Server, Tool, Session, Principal, Decision string
	Detections                                 bool
}

func filterOf(q url.Values) eventFilter {
	return eventFilter{Server: q.Get("server"), Tool: q.Get("tool"), Session: q.Get("session"),
		Principal: q.Get("principal"), Decision: q.Get("decision"), Detections: q.Get("detections") == "1"}
}

func (f eventFilter) Query() string {
	v := url.Values{}
	for k, s := range map[string]string{"server": f.Server, "tool": f.Tool, "session": f.Session, "principal": f.Principal, "decision": f.Decision} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if f.Detections {
		v.Set("detections", "1")
	}
	return v.Encode()
}

func has(s, sub string) bool {
	return sub == "" || strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func (f eventFilter) match(e *Event) bool {
	if f.Detections && !e.IsDetection() {
		return false
	}
	return has(e.Server, f.Server) && has(e.Tool, f.Tool) && has(e.Session, f.Session) &&
		has(e.Principal, f.Principal) && (f.Decision == "" || e.Action == f.Decision)
}

// recent returns the newest matching events, newest first.
func (c *Console) recent(f eventFilter, after uint64) []Event {
	all := c.events.since(after)
	out := []Event{}
	for i := len(all) - 1; i >= 0 && len(out) < maxListed; i-- {
		if f.match(&all[i]) {
			out = append(out, all[i])
		}
	}
	return out
}

type activityData struct {
	Filter    eventFilter
	Events    []Event
	Stream    string
	Decisions []string
}

func (c *Console) pageActivity(w http.ResponseWriter, r *http.Request) {
	f := filterOf(r.URL.Query())
	f.Detections = false
	c.render(w, r, "activity", activityData{Filter: f, Events: c.recent(f, 0), Stream: base + "api/stream?" + f.Query(),
		Decisions: []string{"allow", "block", "ok", "error"}})
}

func (c *Console) pageDetections(w http.ResponseWriter, r *http.Request) {
	f := eventFilter{Detections: true}
	c.render(w, r, "detections", activityData{Filter: f, Events: c.recent(f, 0), Stream: base + "api/stream?" + f.Query()})
}

func (c *Console) apiEvents(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	writeJSON(w, http.StatusOK, map[string]any{"events": c.recent(filterOf(r.URL.Query()), after)})
}

func (c *Console) apiDetections(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"events": c.recent(eventFilter{Detections: true}, 0)})
}

// streamMessage is one SSE message: the event and its row as the page
// renders it.
type streamMessage struct {
	Event Event  `json:"event"`
	HTML  string `json:"html"`
}

// keepAlive is how often an idle stream sends a comment, so proxies and
// the browser keep it open.
const keepAlive = 15 * time.Second

// streamWriteTimeout bounds one write to a live stream.
const streamWriteTimeout = 30 * time.Second

// apiStream sends matching events as Server-Sent Events: those after
// Last-Event-ID (or ?after=) still in the ring, then each new one.
func (c *Console) apiStream(w http.ResponseWriter, r *http.Request) {
	f := filterOf(r.URL.Query())
	after, _ := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	if a := r.URL.Query().Get("after"); a != "" {
		after, _ = strconv.ParseUint(a, 10, 64)
	}
	backlog, ch, ok := c.events.subscribe(after)
	if !ok {
		writeError(w, http.StatusServiceUnavailable, "too many live streams are open; close a console tab")
		return
	}
	defer c.events.unsubscribe(ch)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A browser that stops reading must not hold its handler for ever:
	// each write gets a deadline (the ring has dropped it by then).
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout)) }
	send := func(e Event) error {
		if !f.match(&e) {
			return nil
		}
		deadline()
		var b bytes.Buffer
		if err := templates["activity"].ExecuteTemplate(&b, "eventRow", e); err != nil {
			return err
		}
		msg, err := json.Marshal(streamMessage{Event: e, HTML: b.String()})
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "id: %d\nevent: event\ndata: %s\n\n", e.ID, msg); err != nil {
			return err
		}
		return rc.Flush()
	}
	deadline()
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}
	for _, e := range backlog {
		if send(e) != nil {
			return
		}
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return // fell behind: the browser reconnects
			}
			if send(e) != nil {
				return
			}
		case <-tick.C:
			deadline()
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		}
	}
}

// ---- Charts

type chartsView struct {
	ChartData
	Points   string
	Top      float64
	MaxP99   float64
	MaxCount int
}

func (c *Console) chartsView() chartsView {
	d := c.charts.snapshot(c.now())
	v := chartsView{ChartData: d}
	v.Points, v.Top = svgLine(d.CallsPerSec, 600, 120)
	for _, s := range d.Servers {
		v.MaxP99 = max(v.MaxP99, s.P99MS)
	}
	for _, r := range d.Refusals {
		v.MaxCount = max(v.MaxCount, r.Count)
	}
	return v
}

func (c *Console) pageCharts(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "charts", c.chartsView())
}

func (c *Console) fragmentCharts(w http.ResponseWriter, r *http.Request) {
	c.execute(w, templates["charts"], "chartBody", c.chartsView())
}

func (c *Console) apiCharts(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, c.charts.snapshot(c.now()))
}

// ---- Login (with "auth" configured)

func (c *Console) pageLogin(w http.ResponseWriter, r *http.Request) {
	if !c.g.AuthEnabled() {
		http.Redirect(w, r, base, http.StatusSeeOther)
		return
	}
	c.render(w, r, "login", nil)
}

// login keeps the token a person pastes in a cookie for the console's
// paths only (HttpOnly, SameSite=Strict); the gateway checks it on every
// request as it checks an Authorization header.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "bad form: "+err.Error())
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if token == "" || strings.ContainsAny(token, " ;,\"\\") {
		writeError(w, http.StatusBadRequest, "login: paste a bearer token (an API key or an access token with the operator scope or group)")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: gateway.ConsoleCookie, Value: token, Path: base, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, base, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: gateway.ConsoleCookie, Value: "", Path: base, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, base+"login", http.StatusSeeOther)
}

var errNoPins = errors.New("version pinning is off in this gateway's config")

// headline is what an event's summary line says triggered it, from the
// fields detectors write: the description, the sentence of the first
// finding, the name a server resembles, the rule.
func headline(f map[string]any) string {
	pick := func() string {
		if d, ok := f["description"].(string); ok && d != "" {
			return d
		}
		if fs, ok := f["findings"].([]any); ok {
			for _, x := range fs {
				if m, ok := x.(map[string]any); ok {
					if s, ok := m["sentence"].(string); ok && s != "" {
						return "“" + s + "”"
					}
				}
			}
		}
		if s, ok := f["similar_to"].(string); ok && s != "" {
			return "similar to " + s
		}
		for _, k := range []string{"rule", "error"} {
			if s, ok := f[k].(string); ok && s != "" {
				return s
			}
		}
		return ""
	}
	s := strings.Join(strings.Fields(pick()), " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:160]) + "…"
	}
	return s
}
