package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/llmproxy"
)

func newLLMProxyCmd(exts []extension.Extension) *cobra.Command {
	var c common
	var listen string
	var insecure bool
	cmd := &cobra.Command{
		Use:   "llm-proxy",
		Short: "Proxy an agent's LLM API and block the tool calls the filters refuse",
		Long: `Serve a reverse proxy for the Anthropic Messages API (/v1/messages) and the
OpenAI Chat Completions and Responses APIs (/v1/chat/completions,
/v1/responses). Every tool call the model asks for in a response, buffered
or streamed, is judged by the same filters as call_tool; a blocked call
reaches the agent as one line of text saying which tool was blocked and why.

Point the agent's SDK at it: Anthropic baseURL http://ADDR, OpenAI baseURL
http://ADDR/v1. The agent's own API key passes through untouched.
Upstream addresses and the tool-to-server map are in the config's
llm_proxy object; --listen defaults to llm_proxy.listen.`,
		Example: `  toolgate llm-proxy --config config.json --listen 127.0.0.1:8788`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLLMProxy(cmd.Context(), &c, listen, insecure, cmd.ErrOrStderr(), exts)
		},
	}
	c.register(cmd, "info")
	cmd.Flags().StringVar(&listen, "listen", "", "serve the proxy on this address (127.0.0.1:8788, or a port alone)")
	cmd.Flags().BoolVar(&insecure, "insecure-no-auth", false, "allow --listen on a non-loopback address")
	return cmd
}

func runLLMProxy(ctx context.Context, c *common, listen string, insecure bool, stderr io.Writer, exts []extension.Extension) error {
	var ln net.Listener
	if listen != "" {
		var err error
		if ln, err = bindListener(listen, insecure); err != nil {
			return err
		}
		defer ln.Close()
	}
	g, log, err := c.open(ctx, stderr, exts)
	if err != nil {
		return err
	}
	defer g.Close()
	if ln == nil {
		p := g.LLMProxyConfig()
		if p == nil || p.Listen == "" {
			return usageError{errors.New("llm-proxy: no address: give --listen 127.0.0.1:PORT or set llm_proxy.listen in the config")}
		}
		if ln, err = bindListener(p.Listen, insecure); err != nil {
			return err
		}
		defer ln.Close()
		listen = p.Listen
	}
	addr, _ := listenAddress(listen)
	h, err := llmProxyHandler(g, log, addr)
	if err != nil {
		return err
	}
	return serveLLMProxy(ctx, ln, h, log)
}

// llmProxyHandler is the proxy on g; listen is the address it serves
// (a host name in it is accepted in Host, as for /mcp).
func llmProxyHandler(g *gateway.Gateway, log *slog.Logger, listen string) (http.Handler, error) {
	insp, err := g.LLMInspector()
	if err != nil {
		return nil, err
	}
	p, err := llmproxy.New(llmproxy.Options{Config: g.LLMProxyConfig(), Evaluator: g, Inspector: insp, Logger: log})
	if err != nil {
		return nil, err
	}
	// DNS rebinding: a web page must not reach the proxy under its own
	// host name.
	return g.HostGuard(listen, p), nil
}

// serveLLMProxy serves the proxy on ln until ctx ends.
func serveLLMProxy(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving the LLM proxy", "anthropic_base_url", "http://"+ln.Addr().String(), "openai_base_url", "http://"+ln.Addr().String()+"/v1")
	return serveUntilDone(ctx, srv, ln)
}
