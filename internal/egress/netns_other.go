//go:build !linux

package egress

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"runtime"
)

// NamespaceError is the system lacking the namespaces enforce mode needs.
type NamespaceError struct{ Err error }

func (e *NamespaceError) Error() string { return "egress enforce mode: " + e.Err.Error() }
func (e *NamespaceError) Unwrap() error { return e.Err }

var errUnsupported = &NamespaceError{Err: errors.New("network namespaces exist on Linux only, not on " + runtime.GOOS)}

// Supported reports whether enforce mode exists on this system.
const Supported = false

// Probe reports that enforce mode is unavailable.
func Probe() error { return errUnsupported }

// Isolation is unavailable off Linux.
type Isolation struct{}

// Isolate fails off Linux.
func Isolate(*exec.Cmd) (*Isolation, error) { return nil, errUnsupported }

func (*Isolation) StartError(err error) error                     { return err }
func (*Isolation) Listener(context.Context) (net.Listener, error) { return nil, errUnsupported }
func (*Isolation) Close()                                         {}
