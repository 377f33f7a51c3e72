// Command latency measures what toolgate adds to a tool call: the same
// echo call is made directly to an upstream MCP server and through toolgate,
// alternating A/B, for the stdio frontend (upstream over stdio) and the
// streamable HTTP frontend (upstream over HTTP). It prints p50/p99 of each,
// the difference, and calls per second with several concurrent clients.
//
//	go run ./bench/latency [-n 2000] [-clients 4] [-duration 5s] [-mode meta|passthrough]
//
// With -mode passthrough, toolgate runs in passthrough mode and the client
// calls up__echo directly with tools/call instead of through call_tool.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	upStdio := flag.Bool("upstream-stdio", false, "internal: serve the echo upstream over stdio")
	upHTTP := flag.String("upstream-http", "", "internal: serve the echo upstream over HTTP on this address")
	n := flag.Int("n", 2000, "calls per path for the latency comparison")
	clients := flag.Int("clients", 4, "concurrent clients for the throughput comparison")
	dur := flag.Duration("duration", 5*time.Second, "length of each throughput run")
	flag.StringVar(&mode, "mode", "meta", `toolgate's mode: "meta" (call_tool) or "passthrough" (tools/call of up__echo)`)
	flag.Parse()
	if mode != "meta" && mode != "passthrough" {
		log.Fatalf("-mode %q: want meta or passthrough", mode)
	}
	switch {
	case *upStdio:
		if err := echoServer().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	case *upHTTP != "":
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
		log.Fatal(http.ListenAndServe(*upHTTP, h))
	}
	if err := run(*n, *clients, *dur); err != nil {
		log.Fatal(err)
	}
}

type echoIn struct {
	Message string `json:"message"`
}

func echoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes back the message"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
	})
	return s
}

// mode is toolgate's mode under test.
var mode = "meta"

func run(n, clients int, dur time.Duration) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "toolgate-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "toolgate")
	build := exec.Command("go", "build", "-o", bin, "./cmd/toolgate")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build toolgate (run from the repo root): %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	// The HTTP upstream, shared by the direct and the gateway path.
	upAddr := freeAddr()
	up := exec.Command(self, "-upstream-http", upAddr)
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		return err
	}
	defer up.Process.Kill()
	waitListen(upAddr)

	stdioCfg := writeConfig(tmp, "stdio.json", fmt.Sprintf(`{"mode":%q,"mcpServers":{"up":{"command":%q,"args":["-upstream-stdio"]}}}`, mode, self))
	httpCfg := writeConfig(tmp, "http.json", fmt.Sprintf(`{"mode":%q,"mcpServers":{"up":{"url":"http://%s/mcp"}}}`, mode, upAddr))
	gwAddr := freeAddr()
	gw := exec.Command(bin, "serve", "--config", httpCfg, "--state-dir", filepath.Join(tmp, "state"), "--listen", gwAddr, "--log-level", "error")
	gw.Stderr = os.Stderr
	if err := gw.Start(); err != nil {
		return err
	}
	defer gw.Process.Kill()
	waitListen(gwAddr)

	newDirectStdio := func() (caller, error) {
		return connect(ctx, &mcp.CommandTransport{Command: exec.Command(self, "-upstream-stdio")}, false)
	}
	newGatewayStdio := func() (caller, error) {
		cmd := exec.Command(bin, "serve", "--config", stdioCfg, "--state-dir", filepath.Join(tmp, "state"), "--log-level", "error")
		cmd.Stderr = os.Stderr
		return connect(ctx, &mcp.CommandTransport{Command: cmd}, true)
	}
	newDirectHTTP := func() (caller, error) {
		return connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + upAddr + "/mcp"}, false)
	}
	newGatewayHTTP := func() (caller, error) {
		return connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + gwAddr + "/mcp"}, true)
	}

	fmt.Printf("toolgate overhead (%s mode): echo upstream (Go SDK), %d calls per path, A/B alternated\n\n", mode, n)
	fmt.Printf("%-6s %-9s %10s %10s %10s %10s\n", "front", "path", "p50", "p99", "mean", "calls/s")
	for _, fe := range []struct {
		name            string
		direct, gateway func() (caller, error)
	}{{"stdio", newDirectStdio, newGatewayStdio}, {"http", newDirectHTTP, newGatewayHTTP}} {
		a, err := fe.direct()
		if err != nil {
			return err
		}
		b, err := fe.gateway()
		if err != nil {
			return err
		}
		da, db, err := alternate(ctx, a, b, n)
		a.close()
		b.close()
		if err != nil {
			return err
		}
		ta, err := throughput(ctx, fe.direct, clients, dur)
		if err != nil {
			return err
		}
		tb, err := throughput(ctx, fe.gateway, clients, dur)
		if err != nil {
			return err
		}
		sa, sb := stats(da), stats(db)
		fmt.Printf("%-6s %-9s %10s %10s %10s %10.0f\n", fe.name, "direct", sa.p50, sa.p99, sa.mean, ta)
		fmt.Printf("%-6s %-9s %10s %10s %10s %10.0f\n", fe.name, "toolgate", sb.p50, sb.p99, sb.mean, tb)
		fmt.Printf("%-6s added p50 %s, p99 ratio %.2fx, throughput ratio %.2fx (%d clients)\n\n",
			fe.name, sb.p50-sa.p50, float64(sb.p99)/float64(sa.p99), tb/ta, clients)
	}
	return nil
}

type caller struct {
	cs      *mcp.ClientSession
	gateway bool
}

func (c caller) close() { c.cs.Close() }

func (c caller) call(ctx context.Context, msg string) error {
	p := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}}
	if c.gateway && mode == "passthrough" {
		p.Name = "up__echo"
	} else if c.gateway {
		p = &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "up__echo", "arguments": map[string]any{"message": msg}}}
	}
	res, err := c.cs.CallTool(ctx, p)
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("tool error: %v", res.Content)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != msg {
		return fmt.Errorf("unexpected result %v", res.Content)
	}
	return nil
}

// connect opens a session; a gateway session searches once so the gate
// lets the echo tool through.
func connect(ctx context.Context, t mcp.Transport, gateway bool) (caller, error) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return caller{}, err
	}
	if gateway && mode == "meta" {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo the message"}})
		if err != nil || res.IsError {
			return caller{}, fmt.Errorf("search_tools: %v %v", err, res)
		}
	}
	c := caller{cs: cs, gateway: gateway}
	for i := range 50 { // warm up
		if err := c.call(ctx, fmt.Sprint("warm", i)); err != nil {
			return caller{}, err
		}
	}
	return c, nil
}

func alternate(ctx context.Context, a, b caller, n int) (da, db []time.Duration, err error) {
	da, db = make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for i := range n {
		first, second, d1, d2 := a, b, &da, &db
		if i%2 == 1 {
			first, second, d1, d2 = b, a, &db, &da
		}
		msg := fmt.Sprint("m", i)
		t0 := time.Now()
		if err := first.call(ctx, msg); err != nil {
			return nil, nil, err
		}
		t1 := time.Now()
		if err := second.call(ctx, msg); err != nil {
			return nil, nil, err
		}
		*d1 = append(*d1, t1.Sub(t0))
		*d2 = append(*d2, time.Since(t1))
	}
	return da, db, nil
}

func throughput(ctx context.Context, mk func() (caller, error), clients int, dur time.Duration) (float64, error) {
	cs := make([]caller, clients)
	for i := range cs {
		c, err := mk()
		if err != nil {
			return 0, err
		}
		defer c.close()
		cs[i] = c
	}
	var total atomic.Int64
	var firstErr error
	var once sync.Once
	deadline := time.Now().Add(dur)
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				if err := c.call(ctx, fmt.Sprint("t", i)); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(total.Load()) / dur.Seconds(), firstErr
}

type summary struct{ p50, p99, mean time.Duration }

func stats(d []time.Duration) summary {
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return summary{p50: q(0.50).Round(time.Microsecond / 10), p99: q(0.99).Round(time.Microsecond / 10), mean: (sum / time.Duration(len(s))).Round(time.Microsecond / 10)}
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitListen(addr string) {
	for range 200 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	log.Fatalf("nothing listens on %s", addr)
}

func writeConfig(dir, name, body string) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		log.Fatal(err)
	}
	return p
}

var _ = strings.TrimSpace
