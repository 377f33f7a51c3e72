package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"sync"
	"syscall"

	"github.com/toolgate/toolgate/internal/netguard"
)

// A Failure says what class of failure a remote server's start was, in
// words safe to show whoever asked for the connection: never the server's
// response, which for a URL chosen by a model may be an internal page it
// should not read (the full error goes to the log).
type Failure struct {
	// Class is one of the Failure* constants.
	Class string
	// Status is the HTTP status code, for FailureHTTPStatus.
	Status int
	// Refusal is the gateway's own reason, for FailureRefused: which rule
	// refused the address (it names no response content).
	Refusal error
}

// Failure classes.
const (
	FailureRefused          = "refused by the gateway"
	FailureConnRefused      = "connection refused"
	FailureTimeout          = "timeout"
	FailureDNS              = "name not found"
	FailureTLS              = "TLS error"
	FailureHTTPStatus       = "HTTP status"
	FailureNotMCP           = "not an MCP server"
	FailureTooLarge         = "response too large"
	FailureListFailed       = "connected, but listing its tools failed"
	FailureConnectionFailed = "connection failed"
)

func (f Failure) String() string {
	switch f.Class {
	case FailureHTTPStatus:
		return fmt.Sprintf("%s %d", f.Class, f.Status)
	case FailureRefused:
		return fmt.Sprintf("%s: %v", f.Class, f.Refusal)
	}
	return f.Class
}

// probe remembers what the HTTP exchanges of one server saw, so a failed
// start can be classed from facts rather than from the SDK's error text.
type probe struct {
	mu       sync.Mutex
	netErr   error // the last transport error
	status   int   // the last non-2xx status
	badType  bool  // a 2xx answer that was neither JSON nor SSE
	tooLarge bool
	answered bool // a 2xx JSON or SSE answer came back
}

func (p *probe) sawError(err error) {
	p.mu.Lock()
	p.netErr = err
	p.mu.Unlock()
}

func (p *probe) sawResponse(resp *http.Response) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// A 405 to the streamable GET, or a 4xx to a streamable POST on a
		// legacy server, is followed by the SSE fallback; the last one wins.
		p.status = resp.StatusCode
		return
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json", "text/event-stream", "":
		if mt != "" {
			p.answered = true
		}
	default:
		p.badType = true
	}
}

func (p *probe) sawTooLarge() {
	p.mu.Lock()
	p.tooLarge = true
	p.mu.Unlock()
}

func (p *probe) reset() {
	p.mu.Lock()
	p.netErr, p.status, p.badType, p.tooLarge, p.answered = nil, 0, false, false, false
	p.mu.Unlock()
}

// StartFailure classes err, the error of a failed start of the server (a
// ListTools or call that had to start it). It is for remote servers; any
// other error is FailureConnectionFailed.
func (s *Server) StartFailure(err error) Failure {
	var r *netguard.RefusedError
	if errors.As(err, &r) {
		return Failure{Class: FailureRefused, Refusal: r.Err}
	}
	s.mu.Lock()
	connected := s.starts > 0
	s.mu.Unlock()
	p := &s.probe
	p.mu.Lock()
	netErr, status, badType, tooLarge, answered := p.netErr, p.status, p.badType, p.tooLarge, p.answered
	p.mu.Unlock()
	if netErr != nil {
		if errors.As(netErr, &r) {
			return Failure{Class: FailureRefused, Refusal: r.Err}
		}
		return Failure{Class: classNetError(netErr)}
	}
	switch {
	case tooLarge:
		return Failure{Class: FailureTooLarge}
	case connected:
		return Failure{Class: FailureListFailed}
	case status != 0 && !answered:
		return Failure{Class: FailureHTTPStatus, Status: status}
	case badType || answered:
		return Failure{Class: FailureNotMCP}
	case errors.Is(err, context.DeadlineExceeded):
		return Failure{Class: FailureTimeout}
	}
	return Failure{Class: FailureConnectionFailed}
}

func classNetError(err error) string {
	var dns *net.DNSError
	var ne net.Error
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	var al tls.AlertError
	switch {
	case errors.As(err, &dns):
		return FailureDNS
	case errors.Is(err, syscall.ECONNREFUSED):
		return FailureConnRefused
	case errors.As(err, &rh), errors.As(err, &cv), errors.As(err, &ua), errors.As(err, &hn), errors.As(err, &ci), errors.As(err, &al):
		return FailureTLS
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return FailureTimeout
	}
	return FailureConnectionFailed
}
