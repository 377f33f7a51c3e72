// Package extmcp is the guardrails extension: it sends MCP operations to
// remote guardrail processors over the ExtMCP gRPC protocol (wire-compatible
// with agentgateway's), which pass, rewrite or deny them.
//
// Config (filters.guardrails):
//
//	{"processors": [{"kind": "remote", "host": "127.0.0.1:9001", "failureMode": "failClosed",
//	  "timeout": "200ms", "methods": {"tools/call": "request", "tools/list": "response"}}]}
//
// toolgate presents its meta-tools to processors the way a plain MCP proxy
// would present the upstream traffic: a call_tool is the tools/call of the
// real (un-prefixed) tool, with the upstream server in service_names, and a
// search_tools result is a tools/list response per server of the tools it
// would show. See README.md.
package extmcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/toolgate/toolgate/extension"
	pb "github.com/toolgate/toolgate/proto/extmcp"
)

// Key is the filters config key; ID the extension identifier.
const (
	Key = "guardrails"
	ID  = "dev.toolgate/" + Key
)

// DefaultTimeout bounds one processor call when the config gives none.
const DefaultTimeout = time.Second

// maxMessage bounds a processor's answer; a mutated tool result may carry
// images.
const maxMessage = 64 << 20

func init() { extension.Register(Key, FromConfig) }

// Config is the guardrails object.
type Config struct {
	// Processors run in this order; the first denial short-circuits.
	Processors []ProcessorConfig `json:"processors"`
}

// ProcessorConfig is one remote processor.
type ProcessorConfig struct {
	// Kind is "remote" (the default and the only kind).
	Kind string `json:"kind"`
	// Host is the processor's gRPC address, host:port.
	Host string `json:"host"`
	// FailureMode is "failClosed" (default: deny when the processor cannot
	// be reached, times out or errs) or "failOpen" (allow and log).
	FailureMode string `json:"failureMode"`
	// Timeout bounds each call to the processor, as a Go duration ("200ms");
	// default 1s.
	Timeout string `json:"timeout"`
	// Methods maps method keys to phases; see Methods.
	Methods map[string]string `json:"methods"`
}

// Guardrails is the extension. After Provision it holds no mutable state but
// its connections, which are safe for concurrent use.
type Guardrails struct {
	procs []*processor
	conns map[string]*grpc.ClientConn // one per distinct host
	log   *slog.Logger
	emit  func(context.Context, extension.Event)

	// dialOptions replace the default transport options (tests dial an
	// in-process listener).
	dialOptions []grpc.DialOption
}

type processor struct {
	index    int
	rule     string // "guardrails.processors[i]"
	host     string
	failOpen bool
	timeout  time.Duration
	methods  Methods
	client   pb.ExtMcpClient
}

// New builds the extension from its raw config, decoded strictly.
var New = extension.ConfigFactory(FromConfig)

// FromConfig builds the extension from a decoded Config. It opens nothing.
func FromConfig(c Config) (*Guardrails, error) {
	if len(c.Processors) == 0 {
		return nil, errors.New("processors: empty; list at least one processor or remove the guardrails key")
	}
	g := &Guardrails{log: slog.New(slog.DiscardHandler), emit: func(context.Context, extension.Event) {}}
	for i, pc := range c.Processors {
		p, err := newProcessor(i, pc)
		if err != nil {
			return nil, fmt.Errorf("processors[%d]: %w", i, err)
		}
		g.procs = append(g.procs, p)
	}
	return g, nil
}

func newProcessor(i int, pc ProcessorConfig) (*processor, error) {
	p := &processor{index: i, rule: fmt.Sprintf("%s.processors[%d]", Key, i), host: pc.Host, timeout: DefaultTimeout}
	if pc.Kind != "" && pc.Kind != "remote" {
		return nil, fmt.Errorf("kind: %q is not supported (want \"remote\")", pc.Kind)
	}
	if pc.Host == "" {
		return nil, errors.New("host: missing; give the processor's gRPC address, e.g. \"127.0.0.1:9001\"")
	}
	if h, port, err := net.SplitHostPort(pc.Host); err != nil || h == "" || port == "" {
		return nil, fmt.Errorf("host: %q is not host:port", pc.Host)
	}
	switch {
	case pc.FailureMode == "" || strings.EqualFold(pc.FailureMode, "failClosed"):
	case strings.EqualFold(pc.FailureMode, "failOpen"):
		p.failOpen = true
	default:
		return nil, fmt.Errorf("failureMode: %q is not failClosed or failOpen", pc.FailureMode)
	}
	if pc.Timeout != "" {
		d, err := time.ParseDuration(pc.Timeout)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("timeout: %q is not a positive duration such as \"200ms\"", pc.Timeout)
		}
		p.timeout = d
	}
	if len(pc.Methods) == 0 {
		return nil, errors.New("methods: empty; the processor would never be called (e.g. {\"tools/call\": \"request\"})")
	}
	ms, err := ParseMethods(pc.Methods)
	if err != nil {
		return nil, fmt.Errorf("methods: %w", err)
	}
	p.methods = ms
	return p, nil
}

func (*Guardrails) ID() string { return ID }

// Phase is inspect: processors look at content and may rewrite it, so they
// run after access control and policy have decided on the call as the
// client made it.
func (*Guardrails) Phase() extension.Phase { return extension.PhaseInspect }

// Provision creates one gRPC client connection per distinct host. Creating
// it does not dial: the connection is made on the first call and kept.
func (g *Guardrails) Provision(_ context.Context, h extension.Host) error {
	if h.Logger != nil {
		g.log = h.Logger
	}
	if h.Emit != nil {
		g.emit = h.Emit
	}
	opts := g.dialOptions
	if opts == nil {
		opts = []grpc.DialOption{
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			// Reconnect soon after a processor restarts: without this a
			// fail-fast call waits out up to two minutes of backoff.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 3 * time.Second},
				MinConnectTimeout: time.Second,
			}),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)),
		}
	}
	g.conns = map[string]*grpc.ClientConn{}
	for _, p := range g.procs {
		cc, ok := g.conns[p.host]
		if !ok {
			var err error
			if cc, err = grpc.NewClient(p.host, opts...); err != nil {
				g.Close()
				return fmt.Errorf("%s: connect %s: %w", p.rule, p.host, err)
			}
			g.conns[p.host] = cc
		}
		p.client = pb.NewExtMcpClient(cc)
	}
	return nil
}

// Close closes the connections.
func (g *Guardrails) Close() error {
	var errs []error
	for host, cc := range g.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", host, err))
		}
	}
	g.conns = nil
	return errors.Join(errs...)
}

// Methods toolgate presents to processors.
const (
	methodCall = "tools/call"
	methodList = "tools/list"
)

// procsFor returns the processors called for method in phase, in order.
func (g *Guardrails) procsFor(method string, phase Phase) []*processor {
	var out []*processor
	for _, p := range g.procs {
		if ph, _ := p.methods.Phase(method); ph&phase != 0 {
			out = append(out, p)
		}
	}
	return out
}
