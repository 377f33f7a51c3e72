// Command startup measures how long a client waits for toolgate's answer to
// initialize when one configured upstream never answers (a process that
// reads its stdin and never replies) beside a healthy one. It builds the
// binary, then for each run starts `toolgate serve` over stdio and times
// from process start to the initialize answer, and to the moment the
// healthy upstream's tool is searchable.
//
//	go run ./bench/startup [-n 5]
//
// Run it from the repository root.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	hung := flag.Bool("upstream-hung", false, "internal: read stdin forever and never answer")
	healthy := flag.Bool("upstream-healthy", false, "internal: serve one echo tool over stdio")
	n := flag.Int("n", 5, "runs")
	flag.Parse()
	switch {
	case *hung:
		_, _ = io.Copy(io.Discard, os.Stdin)
		select {} // stdin closed: still never answer
	case *healthy:
		s := mcp.NewServer(&mcp.Implementation{Name: "healthy", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes back the message"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Message string `json:"message"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
		})
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := run(*n); err != nil {
		log.Fatal(err)
	}
}

func run(n int) error {
	tmp, err := os.MkdirTemp("", "toolgate-bench-startup-")
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
	cfg := filepath.Join(tmp, "config.json")
	body := fmt.Sprintf(`{"search":{"mode":"lexical"},"mcpServers":{"hung":{"command":%q,"args":["-upstream-hung"]},"healthy":{"command":%q,"args":["-upstream-healthy"]}}}`, self, self)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		return err
	}
	fmt.Printf("toolgate startup, one upstream that never answers + one healthy, stdio, %d runs\n\n", n)
	fmt.Printf("%-4s %14s %18s\n", "run", "initialize", "healthy searchable")
	var inits, ready []time.Duration
	for i := range n {
		a, b, err := once(bin, cfg, filepath.Join(tmp, fmt.Sprintf("state%d", i)))
		if err != nil {
			return err
		}
		inits, ready = append(inits, a), append(ready, b)
		fmt.Printf("%-4d %14s %18s\n", i+1, a.Round(time.Millisecond), b.Round(time.Millisecond))
	}
	slices.Sort(inits)
	slices.Sort(ready)
	fmt.Printf("\nmedian: initialize answered after %s; healthy server's tool searchable after %s\n",
		inits[len(inits)/2].Round(time.Millisecond), ready[len(ready)/2].Round(time.Millisecond))
	return nil
}

// once starts toolgate and returns the time from process start to the
// initialize answer and to the first search that finds the healthy tool.
func once(bin, cfg, state string) (time.Duration, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "serve", "--config", cfg, "--state-dir", state, "--log-level", "error")
	cmd.Stderr = os.Stderr
	start := time.Now() // CommandTransport starts the process inside Connect
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()
	initialized := time.Since(start)
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "echo back the message"}})
		if err != nil {
			return 0, 0, fmt.Errorf("search_tools: %w", err)
		}
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok && strings.Contains(t.Text, "healthy__echo") {
				return initialized, time.Since(start), nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}
