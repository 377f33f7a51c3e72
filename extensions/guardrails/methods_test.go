package extmcp

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/extensions/internal/exttest"
	pb "github.com/toolgate/toolgate/proto/extmcp"
)

func TestMethodsPrecedence(t *testing.T) {
	tests := []struct {
		name    string
		methods map[string]string
		method  string
		want    Phase
		key     string
	}{
		{"exact beats prefix", map[string]string{"tools/call": "request", "tools/*": "off", "*": "full"}, "tools/call", PhaseRequest, "tools/call"},
		{"prefix beats star", map[string]string{"tools/*": "response", "*": "full"}, "tools/list", PhaseResponse, "tools/*"},
		{"suffix beats star", map[string]string{"*/list": "response", "*": "request"}, "prompts/list", PhaseResponse, "*/list"},
		{"star", map[string]string{"tools/*": "off", "*": "request"}, "prompts/get", PhaseRequest, "*"},
		{"unmatched bypasses", map[string]string{"tools/call": "full"}, "tools/list", PhaseOff, ""},
		{"longer literal wins: prefix", map[string]string{"tools/*": "request", "*/call": "response"}, "tools/call", PhaseRequest, "tools/*"},
		{"longer literal wins: suffix", map[string]string{"a/*": "request", "*/list_changed": "response"}, "a/list_changed", PhaseResponse, "*/list_changed"},
		{"same length: prefix wins", map[string]string{"ab/*": "request", "*/cd": "response"}, "ab/cd", PhaseRequest, "ab/*"},
		{"longer prefix wins", map[string]string{"notifications/*": "off", "notifications/tools/*": "full"}, "notifications/tools/list_changed", PhaseFull, "notifications/tools/*"},
		{"prefix needs the slash", map[string]string{"tools/*": "full"}, "toolsx", PhaseOff, ""},
		{"phase names ignore case", map[string]string{"tools/call": "Full"}, "tools/call", PhaseFull, "tools/call"},
		{"explicit off wins", map[string]string{"tools/call": "off", "*": "full"}, "tools/call", PhaseOff, "tools/call"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParseMethods(tt.methods)
			if err != nil {
				t.Fatal(err)
			}
			got, key := m.Phase(tt.method)
			if got != tt.want || key != tt.key {
				t.Errorf("Phase(%q) = %v via %q, want %v via %q", tt.method, got, key, tt.want, tt.key)
			}
		})
	}
}

func TestMethodsInvalid(t *testing.T) {
	for _, k := range []string{"", "tools/**", "*/*", "to*ls/call", "/*", "*/", "tools/", "/call", "tools/c?ll", "tools /call"} {
		if _, err := ParseMethods(map[string]string{k: "request"}); err == nil {
			t.Errorf("key %q: no error", k)
		}
	}
	if _, err := ParseMethods(map[string]string{"tools/call": "always"}); err == nil || !strings.Contains(err.Error(), "off, request, response or full") {
		t.Errorf("bad phase: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	ok := `"host":"127.0.0.1:9001","methods":{"tools/call":"request"}`
	tests := []struct{ cfg, want string }{
		{`{}`, "processors: empty"},
		{`{"processors":[]}`, "processors: empty"},
		{`{"procesors":[]}`, `unknown field "procesors"`},
		{`{"processors":[{` + ok + `,"failure_mode":"failOpen"}]}`, `unknown field "failure_mode"`},
		{`{"processors":[{` + ok + `,"failureMode":"open"}]}`, `processors[0]: failureMode: "open" is not failClosed or failOpen`},
		{`{"processors":[{` + ok + `,"timeout":"fast"}]}`, `processors[0]: timeout: "fast" is not a positive duration`},
		{`{"processors":[{` + ok + `,"timeout":"0s"}]}`, `timeout: "0s" is not a positive duration`},
		{`{"processors":[{` + ok + `,"kind":"local"}]}`, `kind: "local" is not supported`},
		{`{"processors":[{"methods":{"tools/call":"request"}}]}`, `processors[0]: host: missing`},
		{`{"processors":[{"host":"localhost","methods":{"tools/call":"request"}}]}`, `host: "localhost" is not host:port`},
		{`{"processors":[{"host":"127.0.0.1:9001"}]}`, `methods: empty`},
		{`{"processors":[{` + ok + `},{"host":"127.0.0.1:9002","methods":{"tools/*x":"request"}}]}`, `processors[1]: methods: "tools/*x" is not a method key`},
		{`{"processors":[{` + ok + `,"timeout":5}]}`, `timeout: want a string`},
	}
	for _, tt := range tests {
		_, err := New(json.RawMessage(tt.cfg))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%s) = %v, want an error containing %q", tt.cfg, err, tt.want)
		}
	}
	g, err := New(json.RawMessage(`{"processors":[{` + ok + `,"failureMode":"failOpen","timeout":"250ms"},{"kind":"remote",` + ok + `}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ps := g.(*Guardrails).procs
	if !ps[0].failOpen || ps[0].timeout.Milliseconds() != 250 || ps[1].failOpen || ps[1].timeout != DefaultTimeout {
		t.Errorf("decoded %+v %+v", ps[0], ps[1])
	}
}

func TestDenialMapping(t *testing.T) {
	tests := []struct {
		name     string
		e        *pb.AuthorizationError
		code     extension.Code
		rpc      int64
		message  string
		withData bool
	}{
		{"permission denied", &pb.AuthorizationError{Code: pb.AuthorizationError_PERMISSION_DENIED, Reason: "no"}, extension.CodePermissionDenied, -32001, "no", false},
		{"resource exhausted", &pb.AuthorizationError{Code: pb.AuthorizationError_RESOURCE_EXHAUSTED, Reason: "slow down"}, extension.CodeResourceExhausted, -32003, "slow down", false},
		{"invalid", &pb.AuthorizationError{Code: pb.AuthorizationError_INVALID, Reason: "bad"}, extension.CodeInvalid, -32600, "bad", false},
		{"unknown", &pb.AuthorizationError{Code: pb.AuthorizationError_UNKNOWN, Reason: "?"}, extension.CodeUnknown, -32603, "?", false},
		{"undefined enum value", &pb.AuthorizationError{Code: 42, Reason: "?"}, extension.CodeUnknown, -32603, "?", false},
		{"empty reason", &pb.AuthorizationError{Code: pb.AuthorizationError_PERMISSION_DENIED}, extension.CodePermissionDenied, -32001, "refused by a guardrail policy", false},
		{"mcp_error overrides", &pb.AuthorizationError{Code: pb.AuthorizationError_PERMISSION_DENIED, Reason: "no", McpError: []byte(`{"code":-32042,"message":"quota","data":{"retry":5}}`)}, extension.CodePermissionDenied, -32042, "quota", true},
		{"mcp_error without reason", &pb.AuthorizationError{McpError: []byte(`{"code":-32042,"message":"quota"}`)}, extension.CodeUnknown, -32042, "quota", false},
		{"mcp_error without message takes the reason", &pb.AuthorizationError{Reason: "r", McpError: []byte(`{"code":-32042}`)}, extension.CodeUnknown, -32042, "r", false},
		{"mcp_error as a response", &pb.AuthorizationError{Reason: "r", McpError: []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32050,"message":"m"}}`)}, extension.CodeUnknown, -32050, "m", false},
		{"malformed mcp_error is ignored", &pb.AuthorizationError{Code: pb.AuthorizationError_INVALID, Reason: "r", McpError: []byte(`{"message":"no code"}`)}, extension.CodeInvalid, -32600, "r", false},
		{"non-JSON mcp_error is ignored", &pb.AuthorizationError{Code: pb.AuthorizationError_RESOURCE_EXHAUSTED, Reason: "r", McpError: []byte(`nope`)}, extension.CodeResourceExhausted, -32003, "r", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DenialFrom("guardrails.processors[0]", tt.e)
			rpc := d.RPCError()
			if d.Code != tt.code || rpc.Code != tt.rpc || rpc.Message != tt.message || (len(rpc.Data) > 0) != tt.withData {
				t.Errorf("got code %v, rpc %+v (data %s); want %v, %d %q", d.Code, rpc, rpc.Data, tt.code, tt.rpc, tt.message)
			}
			if d.Rule != "guardrails.processors[0]" || d.Reason == "" {
				t.Errorf("rule %q reason %q", d.Rule, d.Reason)
			}
		})
	}
}

func TestReadmeExamples(t *testing.T) { exttest.ReadmeExamples(t, Key, New) }
