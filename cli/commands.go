package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/gateway"
)

func runServe(ctx context.Context, args []string, stderr io.Writer, exts []extension.Extension) error {
	fs := newFlagSet("serve", stderr)
	c := common{background: true}
	c.register(fs)
	listen := fs.String("listen", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8080) instead of stdio")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	g, log, err := c.open(ctx, stderr, exts)
	if err != nil {
		return err
	}
	defer g.Close()
	if *listen == "" {
		log.Info("serving MCP over stdio")
		err := g.ServeStdio(ctx)
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("--listen: %v", err)
	}
	srv := g.HTTPServer(*listen)
	log.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

func runTools(ctx context.Context, args []string, stdout, stderr io.Writer, exts []extension.Extension) error {
	fs := newFlagSet("tools", stderr)
	var c common
	c.register(fs)
	asJSON := fs.Bool("json", false, "print JSON lines")
	if err := parse(fs, args); err != nil {
		return err
	}
	g, _, err := c.open(ctx, stderr, exts)
	if err != nil {
		return err
	}
	defer g.Close()
	tools := g.Catalog().All()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, t := range tools {
			if err := enc.Encode(map[string]any{"name": t.Qualified, "server": t.Server, "description": t.Def.Description, "inputSchema": t.Def.InputSchema}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, t := range tools {
		fmt.Fprintf(tw, "%s\t%s\n", t.Qualified, firstLine(t.Def.Description, 90))
	}
	return tw.Flush()
}

func runSearch(ctx context.Context, args []string, stdout, stderr io.Writer, exts []extension.Extension) error {
	fs := newFlagSet("search", stderr)
	var c common
	c.register(fs)
	topK := fs.Int("top-k", gateway.DefaultTopK, "results to show")
	if err := parse(fs, args); err != nil {
		return err
	}
	query := strings.TrimSpace(strings.Join(fs.Args(), " "))
	if query == "" {
		return usageError{errors.New(`missing query, e.g. toolgate search --config config.json "read a file"`)}
	}
	if *topK < 1 || *topK > gateway.MaxTopK {
		return usageError{fmt.Errorf("--top-k must be between 1 and %d", gateway.MaxTopK)}
	}
	g, _, err := c.open(ctx, stderr, exts)
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.WaitIndexed(ctx); err != nil {
		return err
	}
	res, note, err := g.Search(ctx, &extension.SearchRequest{Query: query, TopK: *topK})
	if err != nil {
		return err
	}
	if len(res) == 0 {
		fmt.Fprintln(stdout, "no tools matched")
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, r := range res {
		fmt.Fprintf(tw, "%.3f\t%s\t%s\n", r.Score, r.Name, firstLine(r.Description, 80))
	}
	if note != "" {
		fmt.Fprintln(tw, "note:", note)
	}
	return tw.Flush()
}

func firstLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}
