package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/egress"
	"github.com/toolgate/toolgate/internal/relay"
	"github.com/toolgate/toolgate/internal/secrets"
)

// process is a stdio server's child process. It runs in its own process
// group, so stopping it ends whatever it spawned (npx → node, shells). The
// gateway holds its stdin and stdout as the MCP connection and reads its
// stderr into the log a line at a time.
//
// Every process is reaped (no zombies): a goroutine waits for the leader
// from the moment it starts and, once it has exited, kills what is left of
// its group.
type process struct {
	cmd *exec.Cmd
	log *slog.Logger

	stdin  *os.File // our end of the child's stdin
	stdout *os.File // our end of the child's stdout
	stderr *os.File // our end of the child's stderr

	exited     chan struct{} // closed once the leader has been reaped
	exitErr    error         // why it exited; read after exited is closed
	stderrDone chan struct{} // closed when the stderr reader has finished

	lastMu sync.Mutex
	// lastLines are the child's last stderr lines (at most keepLines, each
	// cut to keepLineBytes), for start errors.
	lastLines []string

	// proxyL is the listener of the server's egress proxy for this run
	// (nil: egress off); closed when the process stops.
	proxyL net.Listener

	stopOnce sync.Once
}

// startProcess runs the server's command with its filtered environment in a
// new process group; with an egress policy, behind its proxy (monitor) or
// in a network namespace of its own (enforce).
func (s *Server) startProcess(ctx context.Context) (*process, error) {
	cfg := s.cfg
	cmd := exec.Command(cfg.Command, cfg.Args...)
	if f := s.m.opts.ResolveCommand; f != nil {
		path, err := f(context.Background(), cfg)
		if err != nil {
			return nil, err
		}
		if path != "" {
			// Launch exactly the file that was checked, whatever PATH says.
			cmd.Path, cmd.Err = path, nil
		}
	}
	filter := secrets.EnvFilter{Allow: cfg.EnvAllow, Deny: cfg.EnvDeny}
	env, stripped := filter.Apply(os.Environ(), cfg.Env)
	cmd.Env = env
	if len(stripped) > 0 {
		// Names only: values never reach the log.
		level := slog.LevelDebug
		if len(cfg.EnvAllow)+len(cfg.EnvDeny) > 0 {
			level = slog.LevelInfo
		}
		s.log.Log(context.Background(), level, "environment variables withheld from the server", "names", strings.Join(stripped, ","))
	}
	cmd.Dir = cfg.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	iso, proxyL, err := s.egressSetup(cmd)
	if err != nil {
		return nil, err
	}
	if iso != nil {
		defer iso.Close()
	}
	closeProxy := func() {
		if proxyL != nil {
			proxyL.Close()
		}
	}

	// Plain pipes rather than exec's copying goroutines: Wait then returns
	// as soon as the leader exits, even when a grandchild still holds an
	// inherited descriptor.
	var files []*os.File
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	inR, inW, err := pipe()
	if err != nil {
		closeProxy()
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeProxy()
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeProxy()
		closeAll()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeProxy()
		closeAll()
		if iso != nil {
			return nil, iso.StartError(err)
		}
		return nil, err
	}
	// The child has its copies; ours would keep the pipes open forever.
	inR.Close()
	outW.Close()
	errW.Close()

	p := &process{
		cmd: cmd, log: s.log,
		stdin: inW, stdout: outR, stderr: errR,
		exited: make(chan struct{}), stderrDone: make(chan struct{}),
		proxyL: proxyL,
	}
	go p.readStderr()
	go func() {
		p.exitErr = cmd.Wait()
		// Whatever the leader left behind in its group goes with it.
		p.killGroup(syscall.SIGKILL)
		close(p.exited)
	}()
	if iso != nil {
		// The helper hands over the proxy's socket in the namespace
		// before it execs the server.
		l, err := iso.Listener(ctx)
		if err != nil {
			p.stop()
			return nil, p.startError(err)
		}
		p.proxyL = l
	}
	if p.proxyL != nil {
		go s.egress.Serve(p.proxyL)
	}
	if iso == nil && p.proxyL != nil {
		// Monitor mode: what the server connects to without the proxy
		// is sampled and reported, though not stopped.
		if ap, err := netip.ParseAddrPort(p.proxyL.Addr().String()); err == nil {
			go s.egress.WatchDirect(p.pid(), ap, egress.DirectInterval, p.exited)
		}
	}
	return p, nil
}

// egressSetup prepares cmd for the server's egress mode: monitor gets a
// proxy on a loopback port and the variables pointing at it; enforce is
// rewritten to start in a network namespace (the proxy's socket comes
// after the start). Enforce mode where the kernel refuses namespaces fails
// the start, or falls back to monitor when the config says so.
func (s *Server) egressSetup(cmd *exec.Cmd) (*egress.Isolation, net.Listener, error) {
	if s.egress == nil {
		return nil, nil, nil
	}
	e := s.cfg.Egress
	mode := e.Mode
	if mode == egress.ModeEnforce {
		if err := s.m.opts.ProbeNamespaces(); err != nil {
			if e.Fallback != egress.ModeMonitor {
				return nil, nil, err
			}
			mode = egress.ModeMonitor
		}
	}
	s.mu.Lock()
	s.egressMode = mode
	s.mu.Unlock()
	s.egress.SetMode(mode)
	if mode == egress.ModeEnforce {
		iso, err := egress.Isolate(cmd)
		return iso, nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("egress proxy: %w", err)
	}
	// Appended last: the policy's proxy wins over any the server's env
	// names (exec keeps the last value of a name).
	cmd.Env = append(cmd.Env, egress.ProxyEnv(l.Addr().String())...)
	return nil, l, nil
}

// transport is the MCP connection over the child's stdin and stdout, and
// the raw leg beside it (see raw.go). onMessage (nil: none) is shown every
// message the SDK is handed.
func (p *process) transport(maxLine int, onMessage func([]byte)) (mcp.Transport, *rawLeg) {
	leg := newRawLeg(p.stdin)
	tap := &relay.Lines{R: p.stdout, OnMessage: onMessage, Claim: leg.claim, OnEOF: leg.fail, Max: maxLine}
	r := struct {
		io.Reader
		io.Closer
	}{tap, p.stdout}
	w := struct {
		io.Writer
		io.Closer
	}{leg.w, p.stdin}
	return &mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: maxLine}, leg
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop ends the process: close its stdin, wait; SIGTERM the group, wait;
// SIGKILL the group; then wait for it to be reaped. Calling it again (or
// concurrently) waits for the first call to finish.
func (p *process) stop() {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		if !p.waitExit(stopGrace) {
			p.log.Debug("upstream did not exit after its stdin closed; sending SIGTERM")
			p.killGroup(syscall.SIGTERM)
			if !p.waitExit(stopGrace) {
				p.log.Warn("upstream did not exit after SIGTERM; killing its process group")
				p.killGroup(syscall.SIGKILL)
				<-p.exited
			}
		}
		p.stdout.Close()
		if p.proxyL != nil {
			p.proxyL.Close()
		}
		// The group is gone, so nothing holds stderr open unless a
		// process left the group (setsid); do not wait for it forever.
		select {
		case <-p.stderrDone:
		case <-time.After(stopGrace):
			p.stderr.Close()
			<-p.stderrDone
		}
	})
}

func (p *process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// killGroup signals the process group. The group id is the leader's pid
// (Setpgid); a group whose members are all gone answers ESRCH, which is
// the desired end state.
func (p *process) killGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// exitDescription says how the process ended, once it has.
func (p *process) exitDescription() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	var ee *exec.ExitError
	if errors.As(p.exitErr, &ee) {
		return ee.ProcessState.String() // "exit status 3", "signal: killed"
	}
	if p.exitErr != nil {
		return p.exitErr.Error()
	}
	return "exit status 0"
}

// Bounds of the stderr kept for start errors.
const (
	keepLines     = 40
	keepLineBytes = 1024
)

func (p *process) keep(line string) {
	if len(line) > keepLineBytes {
		line = line[:keepLineBytes] + "…"
	}
	p.lastMu.Lock()
	defer p.lastMu.Unlock()
	if len(p.lastLines) == keepLines {
		copy(p.lastLines, p.lastLines[1:])
		p.lastLines = p.lastLines[:keepLines-1]
	}
	p.lastLines = append(p.lastLines, line)
}

// telling returns the most informative of the last stderr lines: the last
// that states an error ("Error: ...", "TypeError [ERR_X]: ...",
// "ValueError: ...", "panic: ..."), else the last that mentions one, else
// the last line. Runtimes print more after the error (Node a stack and
// "Node.js v22", Python a traceback before it), so the last line alone
// rarely says why.
func (p *process) telling() string {
	p.lastMu.Lock()
	lines := slices.Clone(p.lastLines)
	p.lastMu.Unlock()
	for i := len(lines) - 1; i >= 0; i-- {
		if errorStatement.MatchString(lines[i]) {
			return lines[i]
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if errorMention.MatchString(l) && !strings.HasPrefix(l, "at ") {
			return lines[i]
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

var (
	errorStatement = regexp.MustCompile(`^\s*(?:[\w.$]*(?:Error|Exception)|panic|fatal error|FATAL|ERROR)(?:\s*\[[^\]]*\])?:\s`)
	errorMention   = regexp.MustCompile(`(?i)\b(?:error|exception|panic|fatal|failed)\b`)
)

// readStderr logs the child's stderr a line at a time with the server's
// name, until every writer of the pipe is gone.
func (p *process) readStderr() {
	defer close(p.stderrDone)
	defer p.stderr.Close()
	r := bufio.NewReaderSize(p.stderr, 4096)
	for {
		line, err := readLine(r, 64*1024)
		if line = strings.TrimRight(line, "\r\n"); line != "" {
			// Debug: servers chatter on stderr (banners, progress); when one fails,
			// its failure reports the telling line.
			p.log.Debug("upstream stderr", "line", line)
			p.keep(line)
		}
		if err != nil {
			return
		}
	}
}

// readLine reads up to a newline, or max bytes of a child writing without
// newlines.
func readLine(r *bufio.Reader, max int) (string, error) {
	var b strings.Builder
	for {
		frag, err := r.ReadSlice('\n')
		b.Write(frag)
		if err == bufio.ErrBufferFull && b.Len() < max {
			continue
		}
		if err == bufio.ErrBufferFull {
			err = nil
		}
		return b.String(), err
	}
}

// startError describes a start that failed after the process ran: how it
// exited and the line of its stderr that best says why.
func (p *process) startError(err error) error {
	var extra []string
	if d := p.exitDescription(); d != "" {
		extra = append(extra, "the process ended with "+d)
	}
	if l := p.telling(); l != "" {
		extra = append(extra, fmt.Sprintf("its stderr says: %q", l))
	}
	if len(extra) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(extra, "; "))
}
