// Package console is toolgate's web console: server-rendered pages (with a
// little vanilla JavaScript, all embedded in the binary) that show a
// running gateway's servers, live activity with each call's filter steps,
// detections, pins, a search playground and charts, and let an operator
// restart, stop and start servers and trust changed pins. The gateway
// mounts it at /ui/ behind its host guard and authentication (see
// gateway.MountConsole); this package adds the CSRF protection of its
// state-changing endpoints and never shows a secret the gateway knows.
package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/toolgate/toolgate/extension"
	pin "github.com/toolgate/toolgate/extensions/version_pinning"
	"github.com/toolgate/toolgate/internal/gateway"
)

// Console serves the pages and their API. It keeps what the gateway does
// not: a bounded ring of recent events and per-minute figures for the last
// hour, both fed by the gateway's event stream.
type Console struct {
	g   *gateway.Gateway
	log *slog.Logger
	mux *http.ServeMux

	csrfKey []byte
	events  *eventRing
	charts  *charts
	now     func() time.Time

	closeOnce sync.Once
	done      chan struct{}
}

// Options configure a Console.
type Options struct {
	Logger *slog.Logger
	// RingSize is how many recent events are kept (default 1000).
	RingSize int
}

// New builds a console over g and starts observing g's events. Mount its
// Handler with g.MountConsole.
func New(g *gateway.Gateway, opts Options) *Console {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RingSize <= 0 {
		opts.RingSize = defaultRingSize
	}
	c := &Console{g: g, log: opts.Logger.With("component", "console"), csrfKey: make([]byte, 32),
		now: time.Now, done: make(chan struct{})}
	_, _ = rand.Read(c.csrfKey) // crypto/rand.Read never fails
	c.events = newEventRing(opts.RingSize)
	c.charts = newCharts()
	c.routes()
	c.backfill(g.AuditPath())
	g.Observe(c.observe)
	return c
}

// Handler serves the console; paths start with gateway.ConsolePath.
func (c *Console) Handler() http.Handler { return c.mux }

// Close ends the live streams (the HTTP server's shutdown waits for
// handlers, and a stream would otherwise last until its client leaves).
func (c *Console) Close() { c.closeOnce.Do(func() { close(c.done) }) }

// observe takes one recorded event from the gateway: redacted once, here,
// so nothing the console keeps or sends holds a known secret.
func (c *Console) observe(o gateway.Observed) {
	e := c.convert(o)
	c.charts.add(e)
	c.events.add(e)
}

// csrfToken is the token a principal's pages carry for their POSTs: an
// HMAC of who they are under a key made at start, so a token is useless to
// another principal and after a restart.
func (c *Console) csrfToken(r *http.Request) string {
	m := hmac.New(sha256.New, c.csrfKey)
	m.Write([]byte("console-csrf\x00" + extension.PrincipalFrom(r.Context()).ID()))
	return hex.EncodeToString(m.Sum(nil))
}

// pinStore is the version_pinning extension's store, or nil when pinning
// is off.
func (c *Console) pinStore() *pin.Store {
	for _, e := range c.g.Extensions() {
		if p, ok := e.(interface{ Store() *pin.Store }); ok {
			return p.Store()
		}
	}
	return nil
}
