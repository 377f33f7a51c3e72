package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/console"
	"github.com/toolgate/toolgate/internal/gateway"
)

func newServeCmd(exts []extension.Extension) *cobra.Command {
	c := common{background: true}
	var listen string
	var insecure bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve MCP over stdio (default) or streamable HTTP at /mcp",
		Long: `Serve MCP to one client over stdio, or with --listen to many over streamable
HTTP at http://ADDR/mcp (with /status and /metrics beside it).

--listen takes host:port or a port alone (8790 means 127.0.0.1:8790). An
address other than loopback needs the config's "auth" (OIDC access tokens
or API keys), or --insecure-no-auth to serve every tool to whoever can
reach the address.`,
		Example: `  toolgate serve --config config.json
  toolgate serve --config config.json --listen 8787`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd.Context(), &c, listen, insecure, cmd.ErrOrStderr(), exts)
		},
	}
	c.register(cmd, "info")
	cmd.Flags().StringVar(&listen, "listen", "", "serve streamable HTTP on this address (127.0.0.1:8787, or a port alone) instead of stdio")
	cmd.Flags().BoolVar(&insecure, "insecure-no-auth", false, "allow --listen on a non-loopback address: anyone who can reach it may call every tool")
	return cmd
}

func runServe(ctx context.Context, c *common, listen string, insecure bool, stderr io.Writer, exts []extension.Extension) error {
	// Bind before anything starts, so a taken port or a refused address is
	// the first and only thing the user sees.
	var ln net.Listener
	if listen != "" {
		authOn, err := configHasAuth(c)
		if err != nil {
			return err
		}
		if ln, err = bindListener(listen, insecure || authOn); err != nil {
			return err
		}
		defer ln.Close()
	}
	g, log, err := c.open(ctx, stderr, exts)
	if err != nil {
		return err
	}
	defer g.Close()
	// The LLM proxy beside MCP shares the gateway, so its calls and the
	// MCP calls meet in the same filter state (cross_server, rate_limits).
	if p := g.LLMProxyConfig(); p != nil && p.Listen != "" {
		lln, err := bindListener(p.Listen, insecure)
		if err != nil {
			return err
		}
		defer lln.Close()
		h, err := llmProxyHandler(g, log, p.Listen)
		if err != nil {
			return err
		}
		go func() {
			if err := serveLLMProxy(ctx, lln, h, log); err != nil && ctx.Err() == nil {
				log.Error("LLM proxy stopped", "error", err)
			}
		}()
	}
	if ln == nil {
		log.Info("serving MCP over stdio")
		err := g.ServeStdio(ctx)
		if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	return serveHTTP(ctx, ln, g, listen, log)
}

// listenAddress reads --listen: host:port, or a port alone meaning
// loopback (a bare port in Go means every interface, which is not what a
// user typing "8790" asks for).
func listenAddress(s string) (string, error) {
	if s != "" && strings.Trim(s, "0123456789") == "" {
		return net.JoinHostPort("127.0.0.1", s), nil
	}
	if _, _, err := net.SplitHostPort(s); err != nil {
		return "", usageError{fmt.Errorf("--listen %q: want host:port (127.0.0.1:8787) or a port (8787)", s)}
	}
	return s, nil
}

// configHasAuth reports whether the config authenticates HTTP callers.
func configHasAuth(c *common) (bool, error) {
	path, err := config.Find(c.config)
	if err != nil {
		return false, err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return false, err
	}
	return cfg.Auth.Enabled(), nil
}

// bindListener binds --listen and refuses a non-loopback address unless
// allowed (auth is configured, or --insecure-no-auth). It checks the
// bound address, so a host name that resolves to a public interface is
// caught as well.
func bindListener(listen string, allowed bool) (net.Listener, error) {
	addr, err := listenAddress(listen)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen: %v", err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && !allowed {
		ln.Close()
		return nil, usageError{fmt.Errorf("--listen %s is not a loopback address and its callers would not be authenticated, so anyone "+
			"who can reach that address could search and call every tool. Configure \"auth\" (OIDC or API keys), listen on loopback "+
			"(--listen 127.0.0.1:PORT or a port alone), or add --insecure-no-auth to serve unauthenticated on the network anyway", listen)}
	}
	return ln, nil
}

// serveHTTP serves h on the bound listener until ctx ends.
func serveHTTP(ctx context.Context, ln net.Listener, g *gateway.Gateway, listen string, log *slog.Logger) error {
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() && !g.AuthEnabled() {
		log.Warn("serving without authentication on a non-loopback address (--insecure-no-auth)", "addr", ln.Addr().String())
	}
	cons := console.New(g, console.Options{Logger: log})
	g.MountConsole(cons.Handler())
	srv := g.HTTPServer(listen)
	srv.RegisterOnShutdown(cons.Close)
	log.Info("serving MCP over streamable HTTP", "url", "http://"+ln.Addr().String()+"/mcp", "console", "http://"+ln.Addr().String()+gateway.ConsolePath)
	return serveUntilDone(ctx, srv, ln)
}

// serveUntilDone serves srv on ln until ctx ends, then shuts it down,
// giving requests in flight up to 5 s.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener) error {
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

func newToolsCmd(exts []extension.Extension) *cobra.Command {
	var c common
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List the indexed tools",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g, _, err := c.open(cmd.Context(), cmd.ErrOrStderr(), exts)
			if err != nil {
				return err
			}
			defer g.Close()
			stdout := cmd.OutOrStdout()
			tools := g.Catalog().All()
			if asJSON {
				enc := json.NewEncoder(stdout)
				for _, t := range tools {
					if err := enc.Encode(map[string]any{"name": t.Qualified, "server": t.Server, "description": t.Def().Description, "inputSchema": t.Def().InputSchema}); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			for _, t := range tools {
				fmt.Fprintf(tw, "%s\t%s\n", t.Qualified, firstLine(t.Summary, 90))
			}
			return tw.Flush()
		},
	}
	c.register(cmd, "warn")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON lines")
	return cmd
}

// searchHit is one line of `search --json`.
type searchHit struct {
	Name        string  `json:"name"`
	Server      string  `json:"server"`
	Tool        string  `json:"tool"`
	Score       float64 `json:"score"`
	Description string  `json:"description"`
	InputSchema any     `json:"inputSchema,omitempty"`
	// Alternatives are other servers' tools folded into this one.
	Alternatives []string `json:"alternatives,omitempty"`
}

func newSearchCmd(exts []extension.Extension) *cobra.Command {
	var c common
	var topK int
	var asJSON bool
	cmd := &cobra.Command{
		Use:     `search "QUERY"`,
		Short:   "Run one search from the shell, as search_tools would",
		Example: `  toolgate search --config config.json "read a file" --top-k 3`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || strings.TrimSpace(args[0]) == "" {
				if len(args) > 1 {
					return usageError{fmt.Errorf(`want one query, got %d arguments; quote it: toolgate search --config config.json "read a file"`, len(args))}
				}
				return usageError{errors.New(`missing query, e.g. toolgate search --config config.json "read a file"`)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if topK < 1 || topK > gateway.MaxTopK {
				return usageError{fmt.Errorf("--top-k must be between 1 and %d", gateway.MaxTopK)}
			}
			ctx := cmd.Context()
			g, _, err := c.open(ctx, cmd.ErrOrStderr(), exts)
			if err != nil {
				return err
			}
			defer g.Close()
			if err := g.WaitIndexed(ctx); err != nil {
				return err
			}
			res, note, err := g.Search(ctx, &extension.SearchRequest{Query: strings.TrimSpace(args[0]), TopK: topK})
			if err != nil {
				return err
			}
			stdout := cmd.OutOrStdout()
			if asJSON {
				hits := make([]searchHit, len(res))
				for i, r := range res {
					hits[i] = searchHit{Name: r.Name, Server: r.Server, Tool: r.Tool, Score: r.Score, Description: r.Description, InputSchema: r.InputSchema,
						Alternatives: r.Alternatives}
				}
				return writeJSON(stdout, map[string]any{"query": args[0], "results": hits, "note": note})
			}
			if len(res) == 0 {
				fmt.Fprintln(stdout, "no tools matched")
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			for _, r := range res {
				fmt.Fprintf(tw, "%.3f\t%s\t%s\n", r.Score, r.Name, firstLine(r.Description, 80))
				if len(r.Alternatives) > 0 {
					fmt.Fprintf(tw, "\t  also offered by\t%s\n", strings.Join(r.Alternatives, ", "))
				}
			}
			if note != "" {
				fmt.Fprintln(tw, "note:", note)
			}
			return tw.Flush()
		},
	}
	c.register(cmd, "warn")
	cmd.Flags().IntVar(&topK, "top-k", gateway.DefaultTopK, fmt.Sprintf("results to show (1 to %d)", gateway.MaxTopK))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
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
