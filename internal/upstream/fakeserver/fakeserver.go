// Package fakeserver is a tiny MCP server for lifecycle tests: it echoes,
// sleeps until cancelled, crashes on request, and records what reached it
// (starts, calls, notifications/cancelled) in a log the test reads. It runs
// in process over any transport, or as a child process (Main) configured
// through the environment.
package fakeserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Environment of Main.
const (
	EnvLog   = "FAKESERVER_LOG"   // file to append events to
	EnvTopic = "FAKESERVER_TOPIC" // a word put in every tool description
	// EnvFail makes a start fail (exit at once with an error on stderr):
	// "start" always, "fail-after-first" when EnvLog already records a
	// start.
	EnvFail = "FAKESERVER_FAIL"
)

// Options configure New.
type Options struct {
	// Topic is a word added to every description, so searches can tell
	// fake servers apart.
	Topic string
	// Record receives every event: "call NAME", "cancelled NAME" (the
	// handler's context ended), "notify notifications/cancelled".
	Record func(event string)
	// Crash ends the server (default: exit the process with status 3).
	Crash func(ss *mcp.ServerSession)
}

// New returns the fake server.
func New(o Options) *mcp.Server {
	if o.Record == nil {
		o.Record = func(string) {}
	}
	if o.Crash == nil {
		o.Crash = func(*mcp.ServerSession) { os.Exit(3) }
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "fakeserver", Version: "1"}, nil)
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/cancelled" {
				o.Record("notify " + method)
			}
			return next(ctx, method, req)
		}
	})
	desc := func(d string) string {
		if o.Topic != "" {
			return d + " (topic " + o.Topic + ")"
		}
		return d
	}
	type echoArgs struct {
		Message string `json:"message"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: desc("Echo a message back")},
		func(ctx context.Context, req *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			o.Record("call echo")
			return text("echo: " + a.Message), nil, nil
		})
	type sleepArgs struct {
		MS int `json:"ms"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: desc("Sleep for ms milliseconds, or until cancelled")},
		func(ctx context.Context, req *mcp.CallToolRequest, a sleepArgs) (*mcp.CallToolResult, any, error) {
			o.Record("call sleep")
			t := time.NewTimer(time.Duration(a.MS) * time.Millisecond)
			defer t.Stop()
			select {
			case <-t.C:
				return text("slept"), nil, nil
			case <-ctx.Done():
				o.Record("cancelled sleep")
				return nil, nil, ctx.Err()
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: desc("Crash the server while the call is in flight")},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			o.Record("call crash")
			o.Crash(req.Session)
			<-ctx.Done()
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: desc("Report the server's process id")},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spawn", Description: desc("Start a background grandchild process and report its pid")},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			cmd := exec.Command("sleep", "600")
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			go cmd.Wait()
			return text(strconv.Itoa(cmd.Process.Pid)), nil, nil
		})
	return s
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// Main runs the fake server over stdio, configured by the environment,
// and exits.
func Main() {
	var mu sync.Mutex
	record := func(ev string) {
		p := os.Getenv(EnvLog)
		if p == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		fmt.Fprintf(f, "%d %s\n", os.Getpid(), ev)
		f.Close()
	}
	restart := false
	if b, err := os.ReadFile(os.Getenv(EnvLog)); err == nil && strings.Contains(string(b), " start\n") {
		restart = true
	}
	record("start")
	if f := os.Getenv(EnvFail); f == "start" || f == "fail-after-first" && restart {
		fmt.Fprintln(os.Stderr, "fakeserver: refusing to start")
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "fakeserver: ready")
	s := New(Options{Topic: os.Getenv(EnvTopic), Record: record})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
	}
	record("exit")
	os.Exit(0)
}
