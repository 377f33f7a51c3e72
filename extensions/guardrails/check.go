package extmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/toolgate/toolgate/extension"
	pb "github.com/toolgate/toolgate/proto/extmcp"
)

// call is what one operation presents to the processors, and what its
// events name.
type call struct {
	method   string
	services []string
	meta     *structpb.Struct
	session  string
	tool     string // "" for tools/list
}

func newCall(method, server, principal, session, tool string) call {
	c := call{method: method, services: []string{server}, session: session, tool: tool}
	if principal != "" {
		c.meta = &structpb.Struct{Fields: map[string]*structpb.Value{"principal": structpb.NewStringValue(principal)}}
	}
	return c
}

// request runs p's CheckRequest with p's deadline. It returns the mutated
// params (nil to pass) or a denial. A processor failure is a denial when p
// fails closed and a logged pass when it fails open.
func (g *Guardrails) request(ctx context.Context, p *processor, c call, params []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	res, err := p.client.CheckRequest(ctx, &pb.McpRequest{ServiceNames: c.services, Method: c.method, MetadataContext: c.meta, McpRequest: params})
	if err != nil {
		return nil, g.failed(ctx, p, c, "request", err)
	}
	switch r := res.GetResult().(type) {
	case *pb.McpRequestResult_Pass:
		return nil, nil
	case *pb.McpRequestResult_Mutated:
		return nonNil(r.Mutated), nil
	case *pb.McpRequestResult_Error:
		return nil, g.denied(ctx, p, c, "request", r.Error)
	}
	return nil, g.failed(ctx, p, c, "request", errNoResult)
}

// response is request for CheckResponse.
func (g *Guardrails) response(ctx context.Context, p *processor, c call, result []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	res, err := p.client.CheckResponse(ctx, &pb.McpResponse{ServiceNames: c.services, Method: c.method, MetadataContext: c.meta, McpResponse: result})
	if err != nil {
		return nil, g.failed(ctx, p, c, "response", err)
	}
	switch r := res.GetResult().(type) {
	case *pb.McpResponseResult_Pass:
		return nil, nil
	case *pb.McpResponseResult_Mutated:
		return nonNil(r.Mutated), nil
	case *pb.McpResponseResult_Error:
		return nil, g.denied(ctx, p, c, "response", r.Error)
	}
	return nil, g.failed(ctx, p, c, "response", errNoResult)
}

var errNoResult = errors.New("the answer sets none of pass, mutated and error")

// nonNil keeps an empty mutation distinct from a pass; it is then refused
// as malformed.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// failed handles a processor that could not decide: unreachable, too slow,
// an RPC error, or an answer toolgate cannot use. Fail open logs and
// allows (nil); fail closed denies with an internal-error code.
func (g *Guardrails) failed(ctx context.Context, p *processor, c call, phase string, err error) error {
	attrs := []any{"processor", p.index, "host", p.host, "method", c.method, "phase", phase, "error", err}
	if p.failOpen {
		g.log.WarnContext(ctx, "guardrail processor failed; allowing (failOpen)", attrs...)
		g.emit(ctx, extension.Event{Type: "guardrails_fail_open", Session: c.session, Server: c.services[0], Tool: c.tool,
			Action: "allow", Reason: p.rule, Fields: map[string]any{"host": p.host, "method": c.method, "phase": phase, "error": err.Error()}})
		return nil
	}
	g.log.WarnContext(ctx, "guardrail processor failed; refusing (failClosed)", attrs...)
	reason := "the guardrail processor could not be reached, so the operation was refused"
	if st, ok := status.FromError(err); !ok {
		reason = "the guardrail processor gave an answer toolgate cannot use, so the operation was refused"
	} else if st.Code() == codes.DeadlineExceeded {
		reason = "the guardrail processor did not answer in time, so the operation was refused"
	}
	return &extension.Denial{
		Rule:   p.rule,
		Reason: reason,
		Detail: fmt.Sprintf("processor %s, %s %s: %v", p.host, c.method, phase, err),
		Code:   extension.CodeUnknown,
	}
}

// denied logs a processor's denial and maps it to an extension.Denial.
func (g *Guardrails) denied(ctx context.Context, p *processor, c call, phase string, e *pb.AuthorizationError) error {
	d := DenialFrom(p.rule, e)
	d.Detail = fmt.Sprintf("processor %s denied %s in the %s phase with %s: %s", p.host, c.method, phase, e.GetCode(), e.GetReason())
	if e.McpError != nil && d.RPC == nil {
		d.Detail += "; its mcp_error is not a JSON-RPC error object and was ignored"
		g.log.WarnContext(ctx, "guardrail processor sent a malformed mcp_error; ignored", "processor", p.index, "host", p.host)
	}
	g.log.InfoContext(ctx, "guardrail processor denied", "processor", p.index, "method", c.method, "phase", phase, "code", e.GetCode().String())
	return d
}

// DenialFrom maps an ExtMCP AuthorizationError to a Denial under rule:
// PERMISSION_DENIED → -32001, RESOURCE_EXHAUSTED → -32003, INVALID → -32600
// (invalid request), UNKNOWN and unknown values → -32603 (internal error).
// A valid mcp_error (a JSON-RPC error object, or a response holding one)
// overrides the JSON-RPC error, and its message, if any, the reason.
func DenialFrom(rule string, e *pb.AuthorizationError) *extension.Denial {
	d := &extension.Denial{Rule: rule, Reason: strings.TrimSpace(e.GetReason()), Code: CodeOf(e.GetCode())}
	if e.McpError != nil {
		if rpc, err := parseRPCError(e.McpError); err == nil {
			// The client of a proxy would see only this error, so its
			// message is the reason too.
			d.RPC = rpc
			if rpc.Message != "" {
				d.Reason = rpc.Message
			}
		}
	}
	if d.Reason == "" {
		d.Reason = "refused by a guardrail policy"
	}
	if d.RPC != nil && d.RPC.Message == "" {
		d.RPC.Message = d.Reason
	}
	return d
}

// CodeOf maps an ExtMCP code to a denial class.
func CodeOf(c pb.AuthorizationError_Code) extension.Code {
	switch c {
	case pb.AuthorizationError_PERMISSION_DENIED:
		return extension.CodePermissionDenied
	case pb.AuthorizationError_RESOURCE_EXHAUSTED:
		return extension.CodeResourceExhausted
	case pb.AuthorizationError_INVALID:
		return extension.CodeInvalid
	}
	return extension.CodeUnknown
}

// parseRPCError reads {"code": -32001, "message": "...", "data": ...}, or a
// JSON-RPC response whose "error" member is that.
func parseRPCError(b []byte) (*jsonrpc.Error, error) {
	var w struct {
		Code    *int64          `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, err
	}
	if w.Code == nil && len(w.Error) > 0 {
		return parseRPCError(w.Error)
	}
	if w.Code == nil {
		return nil, errors.New("no code")
	}
	e := &jsonrpc.Error{Code: *w.Code, Message: w.Message}
	if d := bytes.TrimSpace(w.Data); len(d) > 0 && string(d) != "null" {
		e.Data = d
	}
	return e, nil
}
