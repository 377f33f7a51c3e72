// Command replicas measures the shared state backend: what the Redis-backed
// decisions add to a call, and what three replicas on one Redis serve
// compared with one.
//
//	go run ./bench/replicas [-n 5000] [-clients 8] [-duration 10s] [-bin PATH]
//
// Part 1 times the rate_limits and cross_server call filters in process,
// memory store against Redis store (a private redis-server on loopback),
// alternating, and prints p50/p99 of each and the added p50: the cost of
// the Redis round trip each decision makes. Part 2 times whole calls of
// one client through a real gateway with its state in memory and one with
// it in Redis, alternating (n/5 each). Part 3 starts real
// `toolgate serve --listen` processes on one Redis in front of an HTTP echo
// upstream and drives them with -clients concurrent stateless clients for
// -duration: one replica, then three behind a round-robin balancer, and
// prints calls per second of each. Needs redis-server (make deps); run it
// from the repository root (it builds ./cmd/toolgate unless -bin names a
// binary).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/extension"
	flow "github.com/toolgate/toolgate/extensions/cross_server"
	ratelimit "github.com/toolgate/toolgate/extensions/rate_limits"
	"github.com/toolgate/toolgate/internal/state"
	"github.com/toolgate/toolgate/internal/state/redistest"
)

func main() {
	n := flag.Int("n", 5000, "decisions per store in part 1")
	clients := flag.Int("clients", 8, "concurrent clients in part 2")
	dur := flag.Duration("duration", 10*time.Second, "length of each throughput run in part 2")
	bin := flag.String("bin", "", "toolgate binary (default: build ./cmd/toolgate)")
	flag.Parse()
	if err := run(*n, *clients, *dur, *bin); err != nil {
		log.Fatal(err)
	}
}

func run(n, clients int, dur time.Duration, bin string) error {
	tmp, err := os.MkdirTemp("", "toolgate-bench-replicas-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	rd, err := redistest.Launch(tmp)
	if err != nil {
		return err
	}
	defer rd.Stop()

	fmt.Printf("part 1: call-filter decisions in process, %d per store, alternated; redis-server on %s\n", n, rd.Addr)
	fmt.Printf("%-14s %-7s %9s %9s %9s\n", "filter", "store", "p50", "p99", "+p50")
	for _, f := range []string{"rate_limits", "cross_server"} {
		mem, red, err := decisions(f, n, rd.Addr)
		if err != nil {
			return err
		}
		fmt.Printf("%-14s %-7s %9s %9s\n", f, "memory", pct(mem, 50), pct(mem, 99))
		fmt.Printf("%-14s %-7s %9s %9s %9s\n", f, "redis", pct(red, 50), pct(red, 99), pct(red, 50)-pct(mem, 50))
	}

	if bin == "" {
		bin = filepath.Join(tmp, "toolgate")
		build := exec.Command("go", "build", "-o", bin, "./cmd/toolgate")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build toolgate (run from the repo root): %w", err)
		}
	}
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer up.Close()
	mem, red, err := perCall(tmp, bin, up.URL, "redis://"+rd.Addr+"/0", n/5)
	if err != nil {
		return err
	}
	fmt.Printf("\npart 2: one client, %d sequential calls through a real gateway (rate_limits and cross_server), state in memory vs Redis, alternated\n", len(mem))
	fmt.Printf("memory: p50 %v p99 %v; redis: p50 %v p99 %v; added p50 %v\n", pct(mem, 50), pct(mem, 99), pct(red, 50), pct(red, 99), pct(red, 50)-pct(mem, 50))

	fmt.Printf("\npart 3: calls/s through real gateways (rate_limits and cross_server in Redis), %d stateless clients, %s each\n", clients, dur)
	var one float64
	for _, k := range []int{1, 3} {
		rate, err := throughput(tmp, bin, up.URL, "redis://"+rd.Addr+"/0", k, clients, dur)
		if err != nil {
			return err
		}
		if k == 1 {
			one = rate
			fmt.Printf("1 replica:   %8.0f calls/s\n", rate)
		} else {
			fmt.Printf("3 replicas:  %8.0f calls/s (%.2fx one; all on this machine's %d cores)\n", rate, rate/one, numCPU())
		}
	}
	return nil
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return max(1, strings.Count(string(b), "processor\t:"))
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100].Round(time.Microsecond)
}

// decisions times filter's call filter n times on the memory store and n
// times on the Redis one, alternating.
func decisions(filter string, n int, addr string) (mem, red []time.Duration, err error) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	b := state.NewForTest(c, "bench:"+filter+":", "bench")
	// decide runs one extension's call middleware around a handler that
	// answers at once: the decision alone is timed.
	type decide func(ctx context.Context, req *extension.CallRequest) error
	mk := func(ctx context.Context) (decide, error) {
		var e extension.Extension
		var err error
		switch filter {
		case "rate_limits":
			e, err = ratelimit.New(json.RawMessage(`{"default_rpm": 1e9, "default_burst": 1000000}`))
		default:
			e, err = flow.New(json.RawMessage(`{}`))
		}
		if err != nil {
			return nil, err
		}
		if err := e.(extension.Provisioner).Provision(ctx, extension.Host{Emit: func(context.Context, extension.Event) {}}); err != nil {
			return nil, err
		}
		h := e.(extension.CallMiddleware).WrapCall(func(context.Context, *extension.CallRequest) (*extension.CallResult, error) {
			return extension.NewCallResult(&mcp.CallToolResult{}), nil
		})
		return func(ctx context.Context, req *extension.CallRequest) error {
			_, err := h(ctx, req)
			return err
		}, nil
	}
	fm, err := mk(context.Background())
	if err != nil {
		return nil, nil, err
	}
	fr, err := mk(state.WithBackend(context.Background(), b))
	if err != nil {
		return nil, nil, err
	}
	ctx := context.Background()
	// A read then computes on another server: the flow decision reads and
	// writes the session's state each time.
	reqs := []*extension.CallRequest{
		{ToolName: "docs__read_file", ServerName: "docs", Tool: "read_file", Session: "s1"},
		{ToolName: "calc__compute_sum", ServerName: "calc", Tool: "compute_sum", Session: "s1"},
	}
	time1 := func(f decide, i int) (time.Duration, error) {
		r := *reqs[i%2]
		start := time.Now()
		err := f(ctx, &r)
		d := time.Since(start)
		if _, denied := extension.AsDenial(err); err != nil && !denied {
			return 0, err
		}
		return d, nil
	}
	for i := range n + 200 {
		dm, err := time1(fm, i)
		if err != nil {
			return nil, nil, err
		}
		dr, err := time1(fr, i)
		if err != nil {
			return nil, nil, fmt.Errorf("%s on redis: %w", filter, err)
		}
		if i >= 200 { // warm-up: connections, script cache
			mem, red = append(mem, dm), append(red, dr)
		}
	}
	return mem, red, nil
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

var listenRE = regexp.MustCompile(`url=(http://\S+/mcp)`)

// startSet starts k replicas (state in the Redis at redisURL under a fresh
// prefix, or in memory for "") and a round-robin balancer in front when
// k > 1; it returns the MCP endpoint and a function that stops them.
func startSet(tmp, bin, upstream, redisURL string, k int) (endpoint string, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	dir, err := os.MkdirTemp(tmp, "run")
	if err != nil {
		return "", stop, err
	}
	cfg := map[string]any{
		"search":     map[string]any{"mode": "lexical"},
		"mcpServers": map[string]any{"up": map[string]any{"type": "http", "url": upstream + "/"}},
		"filters": map[string]any{
			"rate_limits":  map[string]any{"default_rpm": 1e9, "default_burst": 1000000, "burst": map[string]any{"enabled": false}},
			"cross_server": map[string]any{},
		},
		"audit": map[string]any{"enabled": false},
	}
	if redisURL != "" {
		cfg["state"] = map[string]any{"backend": "redis", "url": redisURL, "prefix": filepath.Base(dir) + ":"}
	}
	b, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		return "", stop, err
	}
	var urls []*url.URL
	for i := range k {
		cmd := exec.Command(bin, "serve", "--config", cfgPath, "--state-dir", filepath.Join(dir, fmt.Sprint("r", i)), "--listen", "127.0.0.1:0")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return "", stop, err
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return "", stop, err
		}
		stops = append(stops, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		u, err := waitURL(stderr)
		if err != nil {
			return "", stop, err
		}
		pu, _ := url.Parse(strings.TrimSuffix(u, "/mcp"))
		urls = append(urls, pu)
	}
	endpoint = urls[0].String() + "/mcp"
	if k > 1 {
		var next atomic.Uint64
		lb := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(urls[(next.Add(1)-1)%uint64(len(urls))])
		}})
		stops = append(stops, lb.Close)
		endpoint = lb.URL + "/mcp"
	}
	return endpoint, stop, nil
}

// perCall times n sequential calls through one gateway with the state in
// memory and one with it in Redis, alternating.
func perCall(tmp, bin, upstream, redisURL string, n int) (mem, red []time.Duration, err error) {
	ctx := context.Background()
	var css []*mcp.ClientSession
	var toks []string
	for _, ru := range []string{"", redisURL} {
		ep, stop, err := startSet(tmp, bin, upstream, ru, 1)
		if err != nil {
			return nil, nil, err
		}
		defer stop()
		cs, tok, err := connect(ctx, ep)
		if err != nil {
			return nil, nil, err
		}
		defer cs.Close()
		css, toks = append(css, cs), append(toks, tok)
	}
	for i := range n + 100 {
		for j, cs := range css {
			start := time.Now()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{
				"tool_name": "up__echo", "arguments": map[string]any{"message": fmt.Sprint(i)}, "discovery_token": toks[j]}})
			d := time.Since(start)
			if err == nil && res.IsError {
				err = errors.New(fmt.Sprint(res.Content))
			}
			if err != nil {
				return nil, nil, err
			}
			if i < 100 {
				continue // warm-up
			}
			if j == 0 {
				mem = append(mem, d)
			} else {
				red = append(red, d)
			}
		}
	}
	return mem, red, nil
}

// throughput starts k replicas on one Redis and counts the calls clients
// complete in dur.
func throughput(tmp, bin, upstream, redisURL string, k, clients int, dur time.Duration) (float64, error) {
	endpoint, stop, err := startSet(tmp, bin, upstream, redisURL, k)
	if err != nil {
		return 0, err
	}
	defer stop()
	ctx := context.Background()
	var done atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	start := make(chan struct{})
	for c := range clients {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			cs, tok, err := connect(ctx, endpoint)
			ready.Done()
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			defer cs.Close()
			<-start
			deadline := time.Now().Add(dur)
			for i := 0; time.Now().Before(deadline); i++ {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{
					"tool_name": "up__echo", "arguments": map[string]any{"message": fmt.Sprint(c, "-", i)}, "discovery_token": tok}})
				if err == nil && res.IsError {
					err = errors.New(fmt.Sprint(res.Content))
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				done.Add(1)
			}
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return 0, fmt.Errorf("%d replicas: %v", k, e)
	}
	return float64(done.Load()) / time.Since(t0).Seconds(), nil
}

func connect(ctx context.Context, endpoint string) (*mcp.ClientSession, string, error) {
	cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}, nil)
	if err != nil {
		return nil, "", err
	}
	for range 100 { // the upstream may still be listing
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo message", "top_k": 1}})
		if err != nil {
			return nil, "", err
		}
		b, _ := json.Marshal(res.StructuredContent)
		var out struct {
			Token string `json:"discovery_token"`
		}
		if json.Unmarshal(b, &out) == nil && out.Token != "" {
			return cs, out.Token, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, "", errors.New("search_tools never found up__echo")
}

func waitURL(stderr interface{ Read([]byte) (int, error) }) (string, error) {
	found := make(chan string, 1)
	go func() {
		buf := make([]byte, 0, 4096)
		tmp := make([]byte, 1024)
		sent := false
		for {
			n, err := stderr.Read(tmp)
			if !sent {
				buf = append(buf, tmp[:n]...)
				if m := listenRE.FindSubmatch(buf); m != nil {
					found <- string(m[1])
					sent = true
				}
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case u := <-found:
		return u, nil
	case <-time.After(60 * time.Second):
		return "", errors.New("toolgate did not start listening within 60 s")
	}
}
