// Command latency measures what toolgate adds to a tool call: the same
// echo call is made directly to an upstream MCP server and through toolgate,
// alternating A/B, for the stdio frontend (upstream over stdio) and the
// streamable HTTP frontend (upstream over HTTP), in meta and passthrough
// mode. It prints p50/p99 of each, the added p50, the p99 ratio, the
// throughput ratio with each number of concurrent clients, and toolgate's
// own CPU time and allocations per call (its process only, over the A/B
// run: /proc/PID/task/*/schedstat, and runtime/metrics read on SIGUSR1 via
// TOOLGATE_BENCHSTATS).
//
//	go run ./bench/latency [-n 2000] [-clients 1,4] [-duration 5s] [-mode meta,passthrough] [-bin PATH] [-audit=false]
//
// With -mode passthrough, toolgate runs in passthrough mode and the client
// calls up__echo directly with tools/call instead of through call_tool.
// -bin measures a toolgate binary built elsewhere (to compare two builds,
// run each in turn, interleaved); by default the checkout is built.
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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	upStdio := flag.Bool("upstream-stdio", false, "internal: serve the echo upstream over stdio")
	upHTTP := flag.String("upstream-http", "", "internal: serve the echo upstream over HTTP on this address")
	n := flag.Int("n", 2000, "calls per path for the latency comparison")
	clientsFlag := flag.String("clients", "1,4", "numbers of concurrent clients for the throughput comparison, comma-separated")
	dur := flag.Duration("duration", 5*time.Second, "length of each throughput run")
	modes := flag.String("mode", "meta,passthrough", `toolgate's modes, comma-separated: "meta" (call_tool), "passthrough" (tools/call of up__echo)`)
	bin := flag.String("bin", "", "toolgate binary to measure (default: build ./cmd/toolgate)")
	flag.BoolVar(&auditOn, "audit", true, "keep toolgate's audit log on (its default); -audit=false shows what the log costs")
	flag.Parse()
	var clients []int
	for _, c := range strings.Split(*clientsFlag, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || k < 1 {
			log.Fatalf("-clients %q: want positive numbers separated by commas", *clientsFlag)
		}
		clients = append(clients, k)
	}
	var ms []string
	for _, m := range strings.Split(*modes, ",") {
		if m = strings.TrimSpace(m); m != "meta" && m != "passthrough" {
			log.Fatalf("-mode %q: want meta, passthrough or both", m)
		}
		ms = append(ms, m)
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
	if err := run(ms, *bin, *n, clients, *dur); err != nil {
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

// auditOn is -audit: whether the measured toolgate writes its audit log.
var auditOn = true

func run(modes []string, bin string, n int, clients []int, dur time.Duration) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "toolgate-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "toolgate")
		build := exec.Command("go", "build", "-o", bin, "./cmd/toolgate")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build toolgate (run from the repo root): %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	statsFile = filepath.Join(tmp, "stats")

	// The HTTP upstream, shared by the direct and the gateway path.
	upAddr := freeAddr()
	up := exec.Command(self, "-upstream-http", upAddr)
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		return err
	}
	defer up.Process.Kill()
	waitListen(upAddr)

	fmt.Printf("toolgate overhead: echo upstream (Go SDK), %d calls per path, A/B alternated; %s\n", n, bin)
	var summary []string
	for _, m := range modes {
		mode = m
		lines, err := runMode(ctx, self, bin, tmp, upAddr, n, clients, dur)
		if err != nil {
			return err
		}
		summary = append(summary, lines...)
	}
	fmt.Printf("\n%-12s %-6s %9s %6s", "mode", "front", "+p50", "p99x")
	for _, c := range clients {
		fmt.Printf(" %7s", fmt.Sprintf("thr@%d", c))
	}
	fmt.Printf(" %9s %9s %8s\n", "cpu/call", "B/call", "allocs")
	for _, l := range summary {
		fmt.Println(l)
	}
	return nil
}

// runMode measures one toolgate mode on both frontends and returns its
// summary lines.
func runMode(ctx context.Context, self, bin, tmp, upAddr string, n int, clients []int, dur time.Duration) ([]string, error) {
	state := filepath.Join(tmp, "state-"+mode)
	audit := ""
	if !auditOn {
		audit = `"audit":{"enabled":false},`
	}
	stdioCfg := writeConfig(tmp, mode+"-stdio.json", fmt.Sprintf(`{%s"mode":%q,"mcpServers":{"up":{"command":%q,"args":["-upstream-stdio"]}}}`, audit, mode, self))
	httpCfg := writeConfig(tmp, mode+"-http.json", fmt.Sprintf(`{%s"mode":%q,"mcpServers":{"up":{"url":"http://%s/mcp"}}}`, audit, mode, upAddr))
	gwAddr := freeAddr()
	gw := exec.Command(bin, "serve", "--config", httpCfg, "--state-dir", state, "--listen", gwAddr, "--log-level", "error")
	gw.Env = append(os.Environ(), "TOOLGATE_BENCHSTATS="+statsFile)
	gw.Stderr = os.Stderr
	if err := gw.Start(); err != nil {
		return nil, err
	}
	// SIGTERM, not SIGKILL, so the gateway exits through its own shutdown
	// and TOOLGATE_CPUPROFILE gets a flushed profile; killed if it hangs.
	defer func() {
		gw.Process.Signal(syscall.SIGTERM)
		done := time.AfterFunc(5*time.Second, func() { gw.Process.Kill() })
		gw.Wait()
		done.Stop()
	}()
	waitListen(gwAddr)

	newDirectStdio := func() (caller, error) {
		return connect(ctx, &mcp.CommandTransport{Command: exec.Command(self, "-upstream-stdio")}, false, 0)
	}
	newGatewayStdio := func() (caller, error) {
		cmd := exec.Command(bin, "serve", "--config", stdioCfg, "--state-dir", state, "--log-level", "error")
		cmd.Env = append(os.Environ(), "TOOLGATE_BENCHSTATS="+statsFile)
		cmd.Stderr = os.Stderr
		return connect(ctx, &mcp.CommandTransport{Command: cmd}, true, 0, cmd)
	}
	newDirectHTTP := func() (caller, error) {
		return connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + upAddr + "/mcp"}, false, 0)
	}
	newGatewayHTTP := func() (caller, error) {
		return connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + gwAddr + "/mcp"}, true, gw.Process.Pid)
	}

	fmt.Printf("\n%s mode\n%-6s %-9s %10s %10s %10s", mode, "front", "path", "p50", "p99", "mean")
	for _, c := range clients {
		fmt.Printf(" %10s", fmt.Sprintf("calls/s@%d", c))
	}
	fmt.Println()
	var summary []string
	for _, fe := range []struct {
		name            string
		direct, gateway func() (caller, error)
	}{{"stdio", newDirectStdio, newGatewayStdio}, {"http", newDirectHTTP, newGatewayHTTP}} {
		a, err := fe.direct()
		if err != nil {
			return nil, err
		}
		b, err := fe.gateway()
		if err != nil {
			return nil, err
		}
		before, err := sample(b.pid)
		if err != nil {
			return nil, err
		}
		da, db, err := alternate(ctx, a, b, n)
		if err != nil {
			return nil, err
		}
		after, err := sample(b.pid)
		if err != nil {
			return nil, err
		}
		a.close()
		b.close()
		var ta, tb []float64
		for _, c := range clients {
			x, err := throughput(ctx, fe.direct, c, dur)
			if err != nil {
				return nil, err
			}
			y, err := throughput(ctx, fe.gateway, c, dur)
			if err != nil {
				return nil, err
			}
			ta, tb = append(ta, x), append(tb, y)
		}
		sa, sb := stats(da), stats(db)
		for _, r := range []struct {
			path string
			s    summaryStats
			t    []float64
		}{{"direct", sa, ta}, {"toolgate", sb, tb}} {
			fmt.Printf("%-6s %-9s %10s %10s %10s", fe.name, r.path, r.s.p50, r.s.p99, r.s.mean)
			for _, t := range r.t {
				fmt.Printf(" %10.0f", t)
			}
			fmt.Println()
		}
		cpu := time.Duration((after.cpu - before.cpu) / int64(n))
		line := fmt.Sprintf("%-12s %-6s %9s %5.2fx", mode, fe.name, sb.p50-sa.p50, float64(sb.p99)/float64(sa.p99))
		for i := range clients {
			line += fmt.Sprintf(" %6.2fx", tb[i]/ta[i])
		}
		line += fmt.Sprintf(" %9s %9d %8d", cpu.Round(time.Microsecond/10), (after.bytes-before.bytes)/uint64(n), (after.objects-before.objects)/uint64(n))
		summary = append(summary, line)
	}
	return summary, nil
}

// statsFile is where toolgate processes write their allocation figures
// (TOOLGATE_BENCHSTATS), suffixed with their pid.
var statsFile string

// usage is a toolgate process's CPU time and allocations so far.
type usage struct {
	cpu            int64 // ns
	bytes, objects uint64
}

// sample reads process pid's CPU time from the kernel and asks it
// (SIGUSR1) for its allocation counters.
func sample(pid int) (usage, error) {
	var u usage
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			u.cpu += ns
		}
	}
	path := fmt.Sprintf("%s.%d", statsFile, pid)
	seq := func() (int, []string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, nil
		}
		f := strings.Fields(string(b))
		if len(f) != 3 {
			return 0, nil
		}
		k, _ := strconv.Atoi(f[0])
		return k, f
	}
	prev, _ := seq()
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return u, fmt.Errorf("signal toolgate (pid %d): %w", pid, err)
	}
	for range 400 {
		if k, f := seq(); k > prev {
			u.bytes, _ = strconv.ParseUint(f[1], 10, 64)
			u.objects, _ = strconv.ParseUint(f[2], 10, 64)
			return u, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return u, fmt.Errorf("toolgate (pid %d) did not write %s: built without TOOLGATE_BENCHSTATS?", pid, path)
}

type caller struct {
	cs      *mcp.ClientSession
	gateway bool
	pid     int // the toolgate process serving it
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
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return fmt.Errorf("tool error: %s", b.String())
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != msg {
		return fmt.Errorf("unexpected result %v", res.Content)
	}
	return nil
}

// connect opens a session; a gateway session searches once so the gate
// lets the echo tool through.
func connect(ctx context.Context, t mcp.Transport, gateway bool, pid int, cmd ...*exec.Cmd) (caller, error) {
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return caller{}, err
	}
	if gateway && mode == "meta" {
		// The upstream starts in the background: search until its tool is
		// indexed.
		for try := 0; ; try++ {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo the message"}})
			if err != nil || res.IsError {
				return caller{}, fmt.Errorf("search_tools: %v %v", err, res)
			}
			tc, _ := res.Content[0].(*mcp.TextContent)
			if tc != nil && strings.Contains(tc.Text, "up__echo") {
				break
			}
			if try == 200 {
				return caller{}, fmt.Errorf("search_tools did not return up__echo: %v", tc)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(cmd) > 0 && cmd[0].Process != nil {
		pid = cmd[0].Process.Pid
	}
	c := caller{cs: cs, gateway: gateway, pid: pid}
	for try := 0; gateway && mode == "passthrough"; try++ {
		// The upstream starts in the background: call until it is listed.
		err := c.call(ctx, "first")
		if err == nil {
			break
		}
		if try == 200 {
			return caller{}, err
		}
		time.Sleep(50 * time.Millisecond)
	}
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

type summaryStats struct{ p50, p99, mean time.Duration }

func stats(d []time.Duration) summaryStats {
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return summaryStats{p50: q(0.50).Round(time.Microsecond / 10), p99: q(0.99).Round(time.Microsecond / 10), mean: (sum / time.Duration(len(s))).Round(time.Microsecond / 10)}
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
