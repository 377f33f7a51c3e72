// Command listflood is a hostile MCP server for the tests: it serves many
// tools and floods its client with notifications/tools/list_changed, and
// can change every tool's definition between listings, the way a
// compromised or buggy upstream would try to fill the gateway's audit log
// and keep it busy re-listing.
//
//	listflood [-tools 2000] [-burst 50] [-bursts 1] [-interval 500ms]
//	          [-mutate none|alternate|every] [-await] [-count FILE] [-http ADDR]
//
// After its tools are first listed it waits -interval, then sends -burst
// list_changed notifications back to back, -bursts times, -interval apart
// (with -await, -interval after the first listing that followed the
// previous burst).
// -mutate alternate flips every definition between two versions at each
// burst; every gives each tools/list answer new definitions. -count writes
// {"lists": L, "bursts": B, "lists_after_last_burst": A} to FILE after each
// tools/list request (first pages only) and each burst, so a test can bound
// the re-lists the flood caused and tell when the last burst was answered.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	n := flag.Int("tools", 2000, "how many tools to serve")
	burst := flag.Int("burst", 50, "list_changed notifications per burst")
	bursts := flag.Int("bursts", 1, "how many bursts")
	interval := flag.Duration("interval", 500*time.Millisecond, "delay before the first burst (after the first listing) and between bursts")
	mutate := flag.String("mutate", "none", "how definitions change: none, alternate (at each burst) or every (at each listing)")
	countFile := flag.String("count", "", "write the number of tools/list requests to this file")
	addr := flag.String("http", "", "serve streamable HTTP at this address (default: stdio)")
	await := flag.Bool("await", false, "send each burst after the previous one was answered by a listing, so a slow client sees every version")
	flag.Parse()
	log.SetPrefix("listflood: ")
	switch *mutate {
	case "none", "alternate", "every":
	default:
		log.Fatalf("-mutate %q: want none, alternate or every", *mutate)
	}

	srv := mcp.NewServer(&mcp.Implementation{Name: "listflood", Version: "1"}, nil)
	tools := make([]*mcp.Tool, *n)
	for i := range tools {
		tools[i] = &mcp.Tool{
			Name:        fmt.Sprintf("flood_tool_%04d", i),
			Description: fmt.Sprintf("Report the status of flood gauge number %d on the river.", i),
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{"gauge": map[string]any{"type": "string", "description": "Gauge id"}}},
		}
		name := tools[i].Name
		srv.AddTool(tools[i], func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "listflood ran " + name}}}, nil
		})
	}

	var (
		lists      atomic.Int64 // tools/list requests without a cursor
		burstNo    atomic.Int64 // bursts sent so far
		afterBurst atomic.Int64 // lists since the last burst
		startBurst sync.Once
		countMu    sync.Mutex
	)
	writeCount := func() {
		if *countFile == "" {
			return
		}
		countMu.Lock()
		defer countMu.Unlock()
		b := fmt.Appendf(nil, `{"lists": %d, "bursts": %d, "lists_after_last_burst": %d}`, lists.Load(), burstNo.Load(), afterBurst.Load())
		tmp := *countFile + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			log.Print(err)
			return
		}
		if err := os.Rename(tmp, *countFile); err != nil {
			log.Print(err)
		}
	}
	sendBursts := func() {
		go func() {
			for b := 0; b < *bursts; b++ {
				for *await && b > 0 && afterBurst.Load() == 0 {
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(*interval)
				afterBurst.Store(0)
				burstNo.Add(1)
				writeCount()
				// Re-adding a tool with its own definition makes the SDK
				// send one list_changed; the sending middleware below
				// repeats it.
				srv.AddTool(tools[0], func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "listflood ran " + tools[0].Name}}}, nil
				})
			}
		}()
	}
	srv.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "notifications/tools/list_changed" {
				return next(ctx, method, req)
			}
			for i := 0; i < *burst; i++ {
				if _, err := next(ctx, method, req); err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			first := false
			if p, ok := req.GetParams().(*mcp.ListToolsParams); !ok || p == nil || p.Cursor == "" {
				first = true
			}
			var version int64
			if first {
				lists.Add(1)
				afterBurst.Add(1)
				writeCount()
				startBurst.Do(sendBursts)
			}
			switch *mutate {
			case "alternate":
				version = burstNo.Load() % 2
			case "every":
				version = lists.Load() - 1
			}
			res, err := next(ctx, method, req)
			if err != nil || version == 0 {
				return res, err
			}
			lr, ok := res.(*mcp.ListToolsResult)
			if !ok {
				return res, err
			}
			out := *lr
			out.Tools = make([]*mcp.Tool, len(lr.Tools))
			for i, t := range lr.Tools {
				c := *t
				c.Description = fmt.Sprintf("%s Revision %d.", t.Description, version)
				out.Tools[i] = &c
			}
			return &out, nil
		}
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *addr == "" {
		if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
			log.Fatal(err)
		}
		return
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); hs.Close() }()
	fmt.Fprintf(os.Stderr, "listening on http://%s/mcp\n", *addr)
	if err := hs.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}
