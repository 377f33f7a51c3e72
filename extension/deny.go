package extension

import (
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Code classifies a denial; remote guardrails map it to protocol errors.
type Code int

const (
	// CodeUnknown is the zero Code: a denial without a more specific class.
	CodeUnknown Code = iota
	CodePermissionDenied
	CodeResourceExhausted
	CodeInvalid
)

// JSON-RPC error codes of denials that are not standard JSON-RPC codes.
const (
	RPCCodePermissionDenied  int64 = -32001
	RPCCodeResourceExhausted int64 = -32003
)

// RPCCode is the JSON-RPC error code that reports a denial of class c:
// -32001 permission denied, -32003 resource exhausted, -32600 invalid
// request, and -32603 internal error for CodeUnknown or anything else.
func (c Code) RPCCode() int64 {
	switch c {
	case CodePermissionDenied:
		return RPCCodePermissionDenied
	case CodeResourceExhausted:
		return RPCCodeResourceExhausted
	case CodeInvalid:
		return jsonrpc.CodeInvalidRequest
	}
	return jsonrpc.CodeInternalError
}

// Denial is a decision to refuse an operation. Reason is shown to the LLM and
// must be safe to show; Detail is for logs and audit only.
type Denial struct {
	// Rule names what fired, e.g. "access_control.deny_patterns".
	Rule   string
	Reason string
	Detail string
	Code   Code
	// RPC, if set, is the exact JSON-RPC error that reports the denial,
	// overriding the one derived from Code and Reason. Remote guardrail
	// processors may supply one.
	RPC *jsonrpc.Error
}

// RPCError is the JSON-RPC error that reports d: d.RPC if set, else
// d.Code's code with d.Reason as the message.
func (d *Denial) RPCError() *jsonrpc.Error {
	if d.RPC != nil {
		return d.RPC
	}
	return &jsonrpc.Error{Code: d.Code.RPCCode(), Message: d.Reason}
}

func (d *Denial) Error() string {
	if d.Rule == "" {
		return d.Reason
	}
	return fmt.Sprintf("%s: %s", d.Rule, d.Reason)
}

// Deny returns a permission-denied Denial.
func Deny(rule, reason string) error {
	return &Denial{Rule: rule, Reason: reason, Code: CodePermissionDenied}
}

// Denyf is Deny with a formatted reason.
func Denyf(rule, format string, args ...any) error {
	return Deny(rule, fmt.Sprintf(format, args...))
}

// AsDenial reports whether err is (or wraps) a Denial.
func AsDenial(err error) (*Denial, bool) {
	var d *Denial
	ok := errors.As(err, &d)
	return d, ok
}
