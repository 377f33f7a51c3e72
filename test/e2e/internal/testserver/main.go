// Command testserver is a small MCP server for the end-to-end tests: it
// serves the tools listed in a JSON file, over stdio or streamable HTTP, and
// each tool answers with a line naming the server and the tool. With
// -watch it re-reads the file when it changes and updates its tools, which
// sends notifications/tools/list_changed to connected clients.
//
//	testserver -name notes -tools tools.json [-http 127.0.0.1:PORT] [-watch]
//
// The file holds [{"name", "description", "inputSchema", "annotations"}...].
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	name := flag.String("name", "testserver", "server name reported in results")
	file := flag.String("tools", "", "JSON file with the tool definitions")
	addr := flag.String("http", "", "serve streamable HTTP at this address (default: stdio)")
	watch := flag.Bool("watch", false, "re-read the tools file when it changes")
	flag.Parse()
	log.SetPrefix("testserver " + *name + ": ")

	srv := mcp.NewServer(&mcp.Implementation{Name: *name, Version: "1"}, nil)
	data, tools, err := load(*file)
	if err != nil {
		log.Fatal(err)
	}
	set(srv, *name, nil, tools)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *watch {
		go func() {
			for ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
				d, next, err := load(*file)
				if err != nil || bytes.Equal(d, data) {
					continue
				}
				set(srv, *name, tools, next)
				data, tools = d, next
				log.Printf("tools reloaded (%d)", len(next))
			}
		}()
	}
	if *addr == "" {
		if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
			log.Fatal(err)
		}
		return
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := &http.Server{Addr: *addr, Handler: h}
	go func() { <-ctx.Done(); hs.Close() }()
	fmt.Fprintf(os.Stderr, "listening on http://%s/mcp\n", *addr)
	if err := hs.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

func load(file string) ([]byte, []*mcp.Tool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	var tools []*mcp.Tool
	if err := json.Unmarshal(data, &tools); err != nil {
		return data, nil, fmt.Errorf("%s: %v", file, err)
	}
	for _, t := range tools {
		if t.InputSchema == nil {
			t.InputSchema = map[string]any{"type": "object"}
		}
	}
	return data, tools, nil
}

// set replaces the server's tools old with tools.
func set(srv *mcp.Server, name string, old, tools []*mcp.Tool) {
	var gone []string
	keep := map[string]bool{}
	for _, t := range tools {
		keep[t.Name] = true
	}
	for _, t := range old {
		if !keep[t.Name] {
			gone = append(gone, t.Name)
		}
	}
	if len(gone) > 0 {
		srv.RemoveTools(gone...)
	}
	for _, t := range tools {
		tool := t.Name
		srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s ran %s", name, tool)}}}, nil
		})
	}
}
