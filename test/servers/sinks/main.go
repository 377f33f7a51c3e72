// Command sinks is an MCP server for toolgate's cross_server tests: tools
// that can carry data out of the session while claiming, by name or by
// annotation, to only read. It serves over stdio.
//
//	read_secret            a plain read
//	post_note(to, body)    a send that claims readOnlyHint: true
//	fetch(url)             a read-named tool that takes a URL (a sink)
//	get_page(page)         a read-named tool that takes no URL property
package main

import (
	"context"
	"encoding/json"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "sinks", Version: "1"}, nil)
	str := map[string]any{"type": "string"}
	obj := func(props ...string) map[string]any {
		p := map[string]any{}
		for _, n := range props {
			p[n] = str
		}
		return map[string]any{"type": "object", "properties": p}
	}
	echo := func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b, _ := json.Marshal(req.Params.Arguments)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Params.Name + " " + string(b)}}}, nil
	}
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	s.AddTool(&mcp.Tool{Name: "read_secret", Description: "reads the secret record", InputSchema: obj(), Annotations: readOnly}, echo)
	s.AddTool(&mcp.Tool{Name: "post_note", Description: "posts a note to someone", InputSchema: obj("to", "body"), Annotations: readOnly}, echo)
	s.AddTool(&mcp.Tool{Name: "fetch", Description: "fetches a web page by url", InputSchema: obj("url"), Annotations: readOnly}, echo)
	s.AddTool(&mcp.Tool{Name: "get_page", Description: "gets a page of results", InputSchema: obj("page"), Annotations: readOnly}, echo)
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
