package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/relay"
)

// The HTTP frontend's relay: a POST on a stateful session whose body is
// one tools/call the relay takes (see peels) is answered here, through the
// same servePeeled as the stdio frontend's relay, as application/json,
// without the SDK handler's per-request streams, decode and encode. Every
// other request, and any POST the relay is unsure of, goes to the SDK
// handler with its body untouched, which answers it as before (including
// every refusal: a bad header, an unknown session, another user's
// session). Requests of the stateless revision never reach it (see
// httpHandler's route), nor does the relay take them (peelBefore).
//
// A notifications/cancelled naming a call the relay serves cancels it (and
// is answered 202, as the SDK answers a notification); any other goes to
// the SDK.
//
// What the SDK's path would send on the request's own stream while the
// call runs cannot go on a JSON answer, so calls that may cause any stay
// on the SDK's path: those with a progress token, and in passthrough mode
// those of a session that can be asked for sampling or elicitation, has set
// a logging level, or has no GET stream open on which the SDK would send
// anything else (see ptMode.relaysDuringCall).

// httpRelay answers the tools/call it takes for the live sessions of
// sessions, and hands every other request to next (the SDK's stateful
// handler).
func (g *Gateway) httpRelay(sessions *sessionLimiter, next http.Handler) http.Handler {
	if g.noRaw {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		live := g.httpRelaySession(sessions, r)
		if live == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := readBody(r)
		if err != nil {
			// As the SDK's transport answers a body it cannot read.
			http.Error(w, "failed to read body", http.StatusBadRequest)
			return
		}
		if id, ok := cancelsCall(body); ok && sessions.cancelRelayed(live, string(id)) {
			w.WriteHeader(http.StatusAccepted) // as the SDK answers a notification
			return
		}
		c, ok := g.httpPeel(sessions, live, body)
		// The call ends when the client goes away (net/http cancels the
		// request's context), cancels it, or the session ends.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		if !ok || !sessions.startRelayed(live, string(c.ID), cancel) {
			// (A reused id goes to the SDK, which refuses it if in flight
			// there, so that a cancellation names one call.)
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		defer sessions.endRelayed(live, string(c.ID))
		stop := context.AfterFunc(live.ctx, cancel)
		defer stop()
		ans := g.servePeeled(ctx, live.ss, c)
		g.httpPeeled.Add(1)
		buf := relay.AppendAnswer(getAnswerBuf(), c.ID, ans)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-cache, no-transform")
		_, _ = w.Write(buf)
		putAnswerBuf(buf)
	})
}

// httpRelaySession is the live session a request is for, if it is a POST
// the relay may take by its headers: a session the SDK would serve to
// this caller, the headers the SDK requires of a POST, and nothing that
// asks the SDK for more (a stream to resume).
func (g *Gateway) httpRelaySession(sessions *sessionLimiter, r *http.Request) *liveSession {
	if r.Method != http.MethodPost || len(r.Header.Values("Last-Event-ID")) > 0 {
		return nil
	}
	id := r.Header.Get("Mcp-Session-Id")
	if id == "" {
		return nil
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil
	}
	if jsonOK, streamOK := accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
		return nil
	}
	live := sessions.lookup(id)
	if live == nil {
		return nil
	}
	if live.userID != "" {
		// The SDK refuses a session to anyone but the user who opened it.
		if ti := sdkauth.TokenInfoFromContext(r.Context()); ti == nil || ti.UserID != live.userID {
			return nil
		}
	}
	ip := live.ss.InitializeParams()
	if ip == nil || ip.ProtocolVersion >= peelBefore {
		return nil
	}
	// A version header other than the session's own is the SDK's to judge
	// (it refuses one it does not support).
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v != ip.ProtocolVersion {
		return nil
	}
	return live
}

// httpPeel says whether body is one tools/call the relay takes for ss, and
// returns it.
func (g *Gateway) httpPeel(sessions *sessionLimiter, live *liveSession, body []byte) (relay.Call, bool) {
	if !bytes.Contains(body, toolsCallMethod) {
		return relay.Call{}, false
	}
	m, err := relay.Parse(body)
	if err != nil || m.Method != "tools/call" || m.ID == nil || !g.peels(m.Name) {
		return relay.Call{}, false
	}
	if m.Meta != nil {
		var meta map[string]json.RawMessage
		if json.Unmarshal(m.Meta, &meta) != nil {
			return relay.Call{}, false
		}
		// Progress goes on the request's stream; a per-request protocol
		// version is the SDK's to refuse on a stateful session.
		if _, ok := meta["progressToken"]; ok {
			return relay.Call{}, false
		}
		if _, ok := meta[mcp.MetaKeyProtocolVersion]; ok {
			return relay.Call{}, false
		}
	}
	if g.pt != nil && g.pt.relaysDuringCall(live.ss, sessions.streaming(live)) {
		return relay.Call{}, false
	}
	return relay.Call{ID: m.ID, Name: m.Name, Arguments: m.Arguments, Meta: m.Meta}, true
}

var (
	toolsCallMethod = []byte(`"tools/call"`)
	cancelledMethod = []byte(`"notifications/cancelled"`)
)

// cancelsCall reads body as a notifications/cancelled, and returns the id
// token of the request it cancels.
func cancelsCall(body []byte) ([]byte, bool) {
	if !bytes.Contains(body, cancelledMethod) {
		return nil, false
	}
	m, err := relay.Parse(body)
	if err != nil || m.Method != "notifications/cancelled" || m.ID != nil {
		return nil, false
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &p) != nil || len(p.RequestID) == 0 {
		return nil, false
	}
	return p.RequestID, true
}

// readBody reads a request's body whole, as the SDK's transport does.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	if n := r.ContentLength; n > 0 && n <= 1<<20 {
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, err
		}
		// Read to the end, so bodyDeadline lifts its read deadline; more
		// than announced is an error, as net/http reports it.
		if _, err := r.Body.Read(make([]byte, 1)); err != io.EOF {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return b, nil
	}
	return io.ReadAll(r.Body)
}

// accepts reads Accept as the SDK's streamable handler does: whether
// application/json and text/event-stream are both acceptable.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for raw := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getAnswerBuf() []byte { return (*answerBufs.Get().(*[]byte))[:0] }

func putAnswerBuf(b []byte) {
	if cap(b) > 1<<20 {
		return // a large answer's buffer is not kept
	}
	answerBufs.Put(&b)
}
