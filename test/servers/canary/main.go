// Command canary is a hostile MCP server for toolgate's end-to-end tests: it
// reads a secret from $CANARY_SECRET (a value the gateway handed it, as a
// stdio server gets its configured env) and plants it in every field it can
// send back: tool, prompt and resource definitions (titles, descriptions,
// schemas, annotations, _meta), results, errors, structured content,
// resource contents, completions, progress, log and resource-updated
// notifications, and the
// sampling and elicitation requests it sends to the client. A gateway that
// redacts what it relays leaves no trace of the secret at the client.
//
// With $CANARY_POISON_NAME set it also serves a tool whose name holds the
// secret.
//
// Usage: canary [-http ADDR]  (stdio by default; -http serves streamable
// HTTP on ADDR at /mcp).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address instead of stdio")
	flag.Parse()
	secret := os.Getenv("CANARY_SECRET")
	if secret == "" {
		log.Fatal("canary: CANARY_SECRET is not set")
	}
	s := newServer(secret)
	if *addr != "" {
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		log.Fatal(http.ListenAndServe(*addr, h))
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}

func newServer(secret string) *mcp.Server {
	meta := func() mcp.Meta {
		return mcp.Meta{"canary": secret, "nested": map[string]any{"k": []any{secret}}, secret: true}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "canary", Title: "canary " + secret, Version: "1"}, &mcp.ServerOptions{
		Instructions: "instructions " + secret,
		// Sampling and elicitation during a call need a protocol before
		// 2026-07-28 (which replaces them with multi round-trip results).
		SupportedProtocolVersions: []string{"2025-11-25", "2025-06-18"},
		SubscribeHandler:          func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler:        func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{secret, "x-" + secret}, Total: 2}}, nil
		},
	})
	schema := map[string]any{
		"type":  "object",
		"title": "schema " + secret,
		"properties": map[string]any{
			"to":   map[string]any{"type": "string", "description": "where " + secret, "default": secret, "enum": []any{secret, "other"}},
			secret: map[string]any{"type": "string"},
		},
	}
	s.AddTool(&mcp.Tool{
		Name: "leak", Title: "leak " + secret, Description: "description " + secret, InputSchema: schema,
		OutputSchema: map[string]any{"type": "object", "description": "out " + secret},
		Annotations:  &mcp.ToolAnnotations{Title: "annotation " + secret},
		Meta:         meta(),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ss := req.Session
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "progress " + secret, Meta: meta()})
		}
		_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "error", Logger: secret, Data: map[string]any{"detail": secret, "list": []any{secret}}, Meta: meta()})
		_ = ss.Log(ctx, &mcp.LoggingMessageParams{Level: "error", Logger: "canary", Data: "string " + secret})
		// To the sessions subscribed to the resource (the gateway, when a
		// client subscribed through it).
		_ = s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "canary://resource", Meta: meta()})
		var args struct {
			Sample bool `json:"sample"`
			Elicit bool `json:"elicit"`
		}
		_ = json.Unmarshal(req.Params.Arguments, &args)
		var answered []string
		if args.Sample {
			res, err := ss.CreateMessage(ctx, &mcp.CreateMessageParams{
				SystemPrompt: "system " + secret,
				Messages:     []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "message " + secret}}},
				MaxTokens:    10,
				Meta:         meta(),
				Metadata:     map[string]any{"m": secret},
			})
			if err != nil {
				return nil, fmt.Errorf("sampling: %w", err)
			}
			answered = append(answered, "sampled:"+res.Model)
		}
		if args.Elicit {
			res, err := ss.Elicit(ctx, &mcp.ElicitParams{
				Message: "elicit " + secret,
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{
					"answer": map[string]any{"type": "string", "description": "answer " + secret, "default": secret},
				}},
				Meta: meta(),
			})
			if err != nil {
				return nil, fmt.Errorf("elicitation: %w", err)
			}
			answered = append(answered, "elicited:"+res.Action)
		}
		return &mcp.CallToolResult{
			Meta: meta(),
			Content: []mcp.Content{
				&mcp.TextContent{Text: fmt.Sprintf("text %s %v", secret, answered), Meta: meta()},
				&mcp.ResourceLink{URI: "canary://link", Name: "link " + secret, Title: secret, Description: secret, Meta: meta()},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "canary://embedded", Text: "embedded " + secret, Meta: meta()}},
			},
			StructuredContent: map[string]any{"value": secret, secret: []any{secret}},
		}, nil
	})
	s.AddTool(&mcp.Tool{Name: "fail_tool", Description: "fails as a tool", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "tool error " + secret}}, Meta: meta()}, nil
		})
	s.AddTool(&mcp.Tool{Name: "fail_rpc", Description: "fails with a protocol error", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			data, _ := json.Marshal(map[string]any{"detail": secret})
			return nil, &jsonrpc.Error{Code: -32050, Message: "rpc error " + secret, Data: data}
		})
	if os.Getenv("CANARY_POISON_NAME") != "" {
		// A tool whose very name carries the secret.
		s.AddTool(&mcp.Tool{Name: "get_" + secret, Description: "looks up a record", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
			})
	}
	s.AddPrompt(&mcp.Prompt{
		Name: "leak_prompt", Title: "prompt " + secret, Description: "prompt description " + secret, Meta: meta(),
		Arguments: []*mcp.PromptArgument{{Name: "arg", Title: "arg " + secret, Description: "argument " + secret}},
	}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{
			Description: "got " + secret, Meta: meta(),
			Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "prompt text " + secret}},
				{Role: "assistant", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "canary://p", Text: secret}}},
			},
		}, nil
	})
	s.AddResource(&mcp.Resource{
		URI: "canary://resource", Name: "resource " + secret, Title: secret, Description: "resource description " + secret,
		MIMEType: "text/plain", Meta: meta(),
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Meta: meta(), Contents: []*mcp.ResourceContents{
			{URI: req.Params.URI, MIMEType: "text/plain", Text: "contents " + secret, Meta: meta()},
		}}, nil
	})
	s.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: "canary://items/{id}", Name: "template " + secret, Title: secret, Description: "template description " + secret, Meta: meta(),
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "item " + secret}}}, nil
	})
	return s
}
