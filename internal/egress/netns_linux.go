package egress

// Enforce mode: the mechanism.
//
// The gateway starts its own executable (/proc/self/exe, as runc does) as a
// small helper, cloned with CLONE_NEWNET (plus CLONE_NEWUSER, mapping the
// gateway's own uid and gid, when the gateway is not root), so the helper
// starts in a network namespace that holds nothing but a loopback
// interface, down. The helper, running before anything else in the binary
// (this package's init):
//
//  1. brings lo up (ioctl SIOCSIFFLAGS);
//  2. listens on 127.0.0.1:0 inside the namespace;
//  3. hands that listening socket to the gateway over a socketpair
//     (SCM_RIGHTS): a socket keeps the namespace it was made in, so the
//     gateway accepts the server's proxy connections on it and dials out
//     from its own namespace;
//  4. drops the capability it needed (user namespace case), points
//     HTTP_PROXY and friends at 127.0.0.1:PORT and execs the server's
//     command in its place.
//
// So the server is the process the gateway started (same pid, same process
// group, same pipes), in a namespace with no route anywhere: raw sockets,
// its own DNS, UDP and ICMP reach nothing; the one listening socket on its
// loopback is the proxy. No external tool (pasta, slirp4netns) and no
// extra process is involved: those would give the namespace a route to the
// outside, which is what enforce mode is there to deny.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The helper is entered when the process is started with this argv[0] and
// helperEnv set; argv[1] is the path to exec and argv[2:] the server's argv.
const (
	helperArg0 = "toolgate-egress-netns"
	probeArg0  = "toolgate-egress-probe"
	helperEnv  = "TOOLGATE_EGRESS_NETNS"
	// handoffFD is the helper's end of the socketpair (ExtraFiles[0]).
	handoffFD = 3
)

func init() {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	switch os.Args[0] {
	case helperArg0:
		runHelper()
	case probeArg0:
		if err := loopbackUp(); err != nil {
			fmt.Fprintf(os.Stderr, "toolgate egress: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// runHelper is the helper's whole life; it never returns.
func runHelper() {
	// Capabilities are per thread, and execve computes the new program's
	// from the calling thread's: clear and exec from one thread.
	runtime.LockOSThread()
	fail := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "toolgate egress: enforce mode: %s: %v\n", what, err)
		os.Exit(126)
	}
	if len(os.Args) < 3 {
		fail("helper", errors.New("no command"))
	}
	if err := loopbackUp(); err != nil {
		fail("network namespace", err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fail("listen in the network namespace", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		fail("listener", err)
	}
	if err := unix.Sendmsg(handoffFD, []byte(strconv.Itoa(port)), unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		fail("hand the proxy socket to the gateway", err)
	}
	// The gateway holds the socket now; the server must not inherit it.
	f.Close()
	l.Close()
	unix.Close(handoffFD)
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		fail("drop capabilities", err)
	}
	env := make([]string, 0, len(os.Environ())+len(ProxyEnv("")))
	for _, kv := range os.Environ() {
		if len(kv) > len(helperEnv) && kv[:len(helperEnv)+1] == helperEnv+"=" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, ProxyEnv("127.0.0.1:"+strconv.Itoa(port))...)
	path := os.Args[1]
	err = syscall.Exec(path, os.Args[2:], env)
	fail("exec "+path, err)
}

// loopbackUp sets the IFF_UP flag of lo, the one interface of a new
// network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("read lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// NamespaceError is the kernel refusing the namespaces enforce mode needs.
type NamespaceError struct{ Err error }

func (e *NamespaceError) Error() string {
	what := "a network namespace"
	if os.Geteuid() != 0 {
		what = "an unprivileged user and network namespace (see kernel.unprivileged_userns_clone, user.max_user_namespaces, AppArmor's restrict_unprivileged_userns)"
	}
	return fmt.Sprintf("egress enforce mode: the kernel refuses %s: %v", what, e.Err)
}

func (e *NamespaceError) Unwrap() error { return e.Err }

// nsAttr adds the namespace flags to a's copy.
func nsAttr(a *syscall.SysProcAttr) *syscall.SysProcAttr {
	var out syscall.SysProcAttr
	if a != nil {
		out = *a
	}
	out.Cloneflags |= syscall.CLONE_NEWNET
	if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
		out.Cloneflags |= syscall.CLONE_NEWUSER
		out.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		out.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		out.GidMappingsEnableSetgroups = false
		// A non-zero uid loses its capabilities at execve; the helper
		// keeps CAP_NET_ADMIN (in its own user namespace only) to bring
		// lo up, and clears it before the server runs.
		out.AmbientCaps = []uintptr{unix.CAP_NET_ADMIN}
	}
	return &out
}

var (
	probeOnce sync.Once
	probeErr  error
)

// Probe reports whether the kernel lets this process start a child in a
// network namespace (with a user namespace when not root) and bring its
// loopback up. It runs once; later calls return the first answer.
func Probe() error {
	probeOnce.Do(func() {
		cmd := exec.Command("/proc/self/exe")
		cmd.Args = []string{probeArg0}
		cmd.Env = []string{helperEnv + "=1"}
		cmd.SysProcAttr = nsAttr(nil)
		out, err := cmd.CombinedOutput()
		switch {
		case err != nil && len(out) > 0:
			probeErr = &NamespaceError{Err: fmt.Errorf("%v: %s", err, trimNL(out))}
		case err != nil:
			probeErr = &NamespaceError{Err: err}
		}
	})
	return probeErr
}

func trimNL(b []byte) string {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return string(b)
}

// Isolation is a command being started in a network namespace.
type Isolation struct {
	cmd    *exec.Cmd
	parent *os.File // the gateway's end of the socketpair
	child  *os.File // the helper's end, closed once it has started
}

// Isolate rewrites cmd, not yet started, so that it starts in a network
// namespace of its own through the helper. cmd.Path must be the resolved
// command (exec.Command does that). After cmd.Start, call Listener; call
// Close in any case.
func Isolate(cmd *exec.Cmd) (*Isolation, error) {
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	if len(cmd.ExtraFiles) != 0 {
		return nil, errors.New("egress: the command already has extra files")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("egress: socketpair: %w", err)
	}
	iso := &Isolation{cmd: cmd, parent: os.NewFile(uintptr(fds[0]), "egress-handoff"), child: os.NewFile(uintptr(fds[1]), "egress-handoff-child")}
	// The helper gets the path to exec, then the server's own argv (whose
	// [0] some programs read: busybox, multi-call binaries).
	args := append([]string{helperArg0, cmd.Path}, cmd.Args...)
	cmd.Path, cmd.Args = "/proc/self/exe", args
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], helperEnv+"=1")
	cmd.ExtraFiles = []*os.File{iso.child}
	cmd.SysProcAttr = nsAttr(cmd.SysProcAttr)
	return iso, nil
}

// StartError turns an error of cmd.Start into a *NamespaceError when the
// kernel refused the namespaces.
func (iso *Isolation) StartError(err error) error {
	for _, e := range []error{unix.EPERM, unix.EINVAL, unix.ENOSPC, unix.EUSERS, unix.EACCES} {
		if errors.Is(err, e) {
			return &NamespaceError{Err: err}
		}
	}
	return err
}

// Listener waits for the helper to hand over the proxy's listening socket
// in the server's namespace. It fails when the helper exits first (its
// stderr says why) or the context ends.
func (iso *Isolation) Listener(ctx context.Context) (net.Listener, error) {
	iso.child.Close()
	c, err := net.FileConn(iso.parent)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	stop := context.AfterFunc(ctx, func() { _ = uc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, fmt.Errorf("egress: waiting for the namespace's proxy socket: %w", err)
	}
	if n == 0 && oobn == 0 {
		return nil, errors.New("egress: the namespace helper exited before it set up the network")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("egress: unexpected message from the namespace helper (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("egress: unexpected message from the namespace helper (%v)", err)
	}
	f := os.NewFile(uintptr(fds[0]), "egress-proxy")
	defer f.Close()
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("egress: the namespace's proxy socket: %w", err)
	}
	return l, nil
}

// Close releases the handoff socket.
func (iso *Isolation) Close() {
	iso.child.Close()
	iso.parent.Close()
}

// Supported reports whether enforce mode exists on this system.
const Supported = true
