// Package e2e drives the real toolgate binary with the official Go SDK
// client over stdio and streamable HTTP, in front of the real npm MCP
// servers installed by `make deps`.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	repoRoot string
	binPath  string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	// `make unit` / `go test -short ./...` on a fresh clone: these tests
	// need the npm servers and build the binary, so they are not unit tests.
	if testing.Short() {
		fmt.Println("e2e: skipped under -short (run `make e2e` or `make test`)")
		return 0
	}
	wd, _ := os.Getwd()
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	if _, err := os.Stat(filepath.Join(repoRoot, "node_modules", ".bin", "mcp-server-everything")); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL e2e: the npm MCP servers are not installed in node_modules; run `make deps` first "+
			"(make test and make e2e do it), or `go test -short ./...` for the unit tests alone")
		return 1
	}
	dir, err := os.MkdirTemp("", "toolgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "toolgate")
	build := exec.Command("go", "build", "-race", "-o", binPath, "./cmd/toolgate")
	build.Dir = repoRoot
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build toolgate:", err)
		return 1
	}
	return m.Run()
}

// helperBinaries holds the test servers built so far, by name.
var helperBinaries sync.Map // name → *helperBuild

type helperBuild struct {
	once sync.Once
	path string
	err  error
}

// helperBinary builds the Go package pkg (relative to the repository root)
// once per run, next to the toolgate binary, and returns its path.
func helperBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	v, _ := helperBinaries.LoadOrStore(name, &helperBuild{})
	b := v.(*helperBuild)
	b.once.Do(func() {
		b.path = filepath.Join(filepath.Dir(binPath), name)
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// npmServer returns the path of an installed npm MCP server's executable,
// e.g. npmServer("everything").
func npmServer(name string) string {
	return filepath.Join(repoRoot, "node_modules", ".bin", "mcp-server-"+name)
}

// stdioServer is a config entry for an installed npm server.
func stdioServer(name string, args ...string) map[string]any {
	e := map[string]any{"command": npmServer(name)}
	if len(args) > 0 {
		e["args"] = args
	}
	return e
}

// writeConfig writes a config with the given servers and filters to a new
// folder and returns its path.
func writeConfig(t *testing.T, servers map[string]any, filters map[string]any) string {
	t.Helper()
	cfg := map[string]any{"mcpServers": servers}
	filters = withEgressDefault(filters)
	if filters != nil {
		cfg["filters"] = filters
	}
	dir := t.TempDir()
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "config.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// withEgressDefault adds filters.egress.default with the mode in
// $TOOLGATE_E2E_EGRESS (e.g. enforce) and an empty allow list, so the whole
// suite can be run with every stdio server's network locked down
// (TOOLGATE_E2E_EGRESS=enforce go test ./test/e2e/). Tests that set their
// own egress default keep it.
func withEgressDefault(filters map[string]any) map[string]any {
	mode := os.Getenv("TOOLGATE_E2E_EGRESS")
	if mode == "" {
		return filters
	}
	if _, set := filters["egress"]; set {
		return filters
	}
	out := map[string]any{}
	for k, v := range filters {
		out[k] = v
	}
	out["egress"] = map[string]any{"default": map[string]any{"mode": mode, "allow": []string{}}}
	return out
}

// defaultServers is the example set: everything, filesystem on a sandbox
// folder, memory.
func defaultServers(t *testing.T) map[string]any {
	sandbox := t.TempDir()
	if err := os.WriteFile(filepath.Join(sandbox, "hello.txt"), []byte("hello from the sandbox\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mem := stdioServer("memory")
	mem["env"] = map[string]any{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}
	return map[string]any{
		"everything": stdioServer("everything"),
		"filesystem": stdioServer("filesystem", sandbox),
		"memory":     mem,
	}
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitReady waits until toolgate has tried every configured server (its
// "gateway ready" line): serve answers clients while upstreams start, so a
// test that expects every tool from its first search waits for this.
func waitReady(t *testing.T, logs *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(logs.String(), "gateway ready") {
		if time.Now().After(deadline) {
			t.Fatalf("toolgate never logged \"gateway ready\"\nlogs:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startStdio starts toolgate on cfg as a stdio MCP server, connects the SDK
// client to it and waits until every configured server has been tried. The
// returned buffer collects toolgate's stderr.
func startStdio(t *testing.T, cfg string, extra ...string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	cs, logs := startStdioEarly(t, cfg, extra...)
	waitReady(t, logs)
	return cs, logs
}

// startStdioEarly is startStdio without waiting for the upstreams.
func startStdioEarly(t *testing.T, cfg string, extra ...string) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	args := append([]string{"serve", "--config", cfg, "--state-dir", t.TempDir()}, extra...)
	cmd := exec.Command(binPath, args...)
	cmd.Stderr = logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctxT(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to toolgate over stdio: %v\nlogs:\n%s", err, logs)
	}
	t.Cleanup(func() {
		cs.Close()
		if t.Failed() {
			t.Logf("toolgate logs:\n%s", logs)
		}
	})
	return cs, logs
}

// gatewayProc is a toolgate serving HTTP.
type gatewayProc struct {
	URL  string
	Logs *syncBuffer
	cmd  *exec.Cmd
}

var listenRE = regexp.MustCompile(`url=(http://\S+/mcp)`)

// startHTTP starts toolgate on cfg listening on a free loopback port and
// waits until every configured server has been tried.
func startHTTP(t *testing.T, cfg string, extra ...string) *gatewayProc {
	t.Helper()
	g := startHTTPEarly(t, cfg, extra...)
	waitReady(t, g.Logs)
	return g
}

// startHTTPEarly is startHTTP without waiting for the upstreams.
func startHTTPEarly(t *testing.T, cfg string, extra ...string) *gatewayProc {
	t.Helper()
	logs := &syncBuffer{}
	args := append([]string{"serve", "--config", cfg, "--state-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binPath, args...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			logs.Write([]byte(line + "\n"))
			if m := listenRE.FindStringSubmatch(line); m != nil && !sent {
				urlc <- m[1]
				sent = true
			}
		}
	}()
	g := &gatewayProc{Logs: logs, cmd: cmd}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		pw.Close()
		if t.Failed() {
			t.Logf("toolgate logs:\n%s", logs)
		}
	})
	select {
	case g.URL = <-urlc:
	case <-time.After(60 * time.Second):
		t.Fatalf("toolgate did not start listening\nlogs:\n%s", logs)
	}
	return g
}

// connectHTTP connects an SDK client to url. version "" uses the SDK's
// default negotiation; "2025-11-25" forces a stateful session.
func connectHTTP(t *testing.T, url, version string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctxT(t), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, opts)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctxT(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

// text joins the text content of a result.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// found returns the tool names a search_tools result lists.
func found(t *testing.T, res *mcp.CallToolResult) []string {
	t.Helper()
	if res.IsError {
		t.Fatalf("search_tools failed: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	names := make([]string, len(out.Tools))
	for i, tl := range out.Tools {
		names[i] = tl.Name
	}
	return names
}

func search(t *testing.T, cs *mcp.ClientSession, query string, topK int) []string {
	t.Helper()
	return found(t, call(t, cs, "search_tools", map[string]any{"query": query, "top_k": topK}))
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startEverythingHTTP runs server-everything in streamable HTTP mode on a
// free loopback port and returns its /mcp URL once it answers.
func startEverythingHTTP(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(npmServer("everything"), "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	url := "http://" + addr + "/mcp"
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return url
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("server-everything (streamable HTTP) did not listen on %s\n%s", addr, logs)
	return ""
}

var _ = http.MethodPost
