package extension

import (
	"errors"
	"fmt"
)

// Code classifies a denial; remote guardrails map it to protocol errors.
type Code int

const (
	CodePermissionDenied Code = iota + 1
	CodeResourceExhausted
	CodeInvalid
)

// Denial is a decision to refuse an operation. Reason is shown to the LLM and
// must be safe to show; Detail is for logs and audit only.
type Denial struct {
	// Rule names what fired, e.g. "access_control.deny_patterns".
	Rule   string
	Reason string
	Detail string
	Code   Code
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
