// Command hugeresult measures the gateway's peak memory when an HTTP
// upstream answers a tool call with a huge result (issue 14: a 200 MB
// answer took the RSS to 2.27 GB). It builds toolgate (or uses -bin) and
// test/servers/hostilehttp, serves the hostile server through toolgate
// over stdio, calls its "huge" tool once and prints the outcome and the
// gateway's peak resident set size (VmHWM from /proc, Linux only).
//
//	go run ./bench/hugeresult [-bin path/to/toolgate] [-bytes 209715200] [-sse]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	bin := flag.String("bin", "", "toolgate binary (default: build ./cmd/toolgate)")
	n := flag.Int("bytes", 200<<20, "size of the result in bytes")
	sse := flag.Bool("sse", false, "the upstream answers with an SSE event rather than a JSON body")
	flag.Parse()
	dir, err := os.MkdirTemp("", "hugeresult-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	build := func(out, pkg string) string {
		p := filepath.Join(dir, out)
		cmd := exec.Command("go", "build", "-o", p, pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			log.Fatalf("build %s: %v", pkg, err)
		}
		return p
	}
	if *bin == "" {
		*bin = build("toolgate", "./cmd/toolgate")
	}
	hostile := build("hostilehttp", "./test/servers/hostilehttp")
	args := []string{}
	if *sse {
		args = append(args, "-sse")
	}
	up := exec.Command(hostile, args...)
	out, _ := up.StdoutPipe()
	if err := up.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { up.Process.Kill(); up.Wait() }()
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		log.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, fmt.Appendf(nil, `{"mcpServers":{"hostile":{"url":%q}},"search":{"mode":"lexical"}}`, strings.TrimSpace(url)), 0o600)

	gw := exec.Command(*bin, "serve", "--config", cfg, "--state-dir", filepath.Join(dir, "state"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hugeresult", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: gw}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "returns a text result of the given size"}}); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"tool_name": "hostile__huge", "arguments": map[string]any{"bytes": *n}}})
	elapsed := time.Since(start)
	switch {
	case err != nil:
		// An old gateway relays the whole result, which this client's own
		// 16 MiB line limit refuses.
		fmt.Printf("call: client error after %s: %v\n", elapsed.Round(time.Millisecond), err)
	default:
		text := ""
		if len(res.Content) > 0 {
			if t, ok := res.Content[0].(*mcp.TextContent); ok {
				text = t.Text
			}
		}
		fmt.Printf("call: isError=%v, %d bytes of text in %s: %.160q\n", res.IsError, len(text), elapsed.Round(time.Millisecond), text)
	}
	time.Sleep(500 * time.Millisecond)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", gw.Process.Pid))
	if err != nil {
		log.Fatalf("read the gateway's memory figures: %v", err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			fmt.Printf("gateway peak RSS (VmHWM): %s\n", strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:")))
		}
	}
}
