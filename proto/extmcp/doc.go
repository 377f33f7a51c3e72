// Package extmcp is the Go code generated from ext_mcp.proto, the ExtMCP
// gRPC contract between toolgate and a remote guardrail processor. It is
// wire-compatible with agentgateway's ExtMCP protocol (package
// agentgateway.dev.ext_mcp). Regenerate with scripts/generate.sh; do not edit
// the *.pb.go files.
package extmcp
