// Package redistest starts a private redis-server for a test: on a free
// loopback port, with its own temporary folder and no persistence, stopped
// when the test ends. Tests never share an instance, and never use one the
// machine already runs.
package redistest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/state"
)

// InstallHint is what to run when redis-server is missing.
const InstallHint = "apt-get install redis-server (or `make redis-server` as root)"

// Server is a running redis-server.
type Server struct {
	// Addr is host:port on loopback.
	Addr string
	dir  string
	tb   testing.TB // nil when launched outside a test
	args []string
	tls  bool // the server speaks TLS only (StartTLS)

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Binary returns the path of redis-server, or an error naming the command
// that installs it.
func Binary() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server is not installed; install it with: %s", InstallHint)
	}
	return p, nil
}

// Start starts a redis-server for tb and stops it when tb ends. The test
// fails (not skips) when redis-server is missing, naming how to install it.
// extra are further redis-server arguments.
func Start(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	if _, err := Binary(); err != nil {
		tb.Fatal(err)
	}
	s, err := Launch(tb.TempDir(), extra...)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s.tb = tb
	tb.Cleanup(s.Stop)
	return s
}

// Launch starts a redis-server keeping its files in dir, outside a test
// (benchmarks); the caller stops it.
func Launch(dir string, extra ...string) (*Server, error) {
	if _, err := Binary(); err != nil {
		return nil, err
	}
	s := &Server{dir: dir, args: extra}
	var err error
	for range 5 { // a free port can be taken between choosing and binding
		s.Addr, err = freeAddr()
		if err != nil {
			continue
		}
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// URL is the redis:// URL of the server, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (s *Server) start() error {
	host, port, _ := net.SplitHostPort(s.Addr)
	bin, err := Binary()
	if err != nil {
		return err
	}
	portArgs := []string{"--port", port}
	if s.tls {
		portArgs = []string{"--port", "0", "--tls-port", port}
	}
	args := append(append(portArgs, "--bind", host, "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"),
		"--protected-mode", "yes",
	), s.args...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server on %s exited: %v\n%s", s.Addr, err, tail(string(log)))
		default:
		}
		if s.ping() == nil {
			s.mu.Lock()
			s.cmd = cmd
			s.mu.Unlock()
			go func() { <-exited }() // reaped by Stop's Wait equivalent
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("redis-server on %s did not answer PING within 10 s", s.Addr)
}

// ping sends PING and waits for +PONG.
func ping(addr string) error { return (&Server{Addr: addr}).ping() }

// ping sends PING and waits for an answer: +PONG, or an error such as
// NOAUTH from a server that wants a password (it answers all the same).
func (s *Server) ping() error {
	var c net.Conn
	var err error
	if s.tls {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", s.Addr, &tls.Config{InsecureSkipVerify: true})
	} else {
		c, err = net.DialTimeout("tcp", s.Addr, time.Second)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// StartTLS starts a server that speaks only TLS, with a certificate for
// 127.0.0.1 issued by a CA of its own (written to the returned PEM file)
// and password as its password ("" for none). Its URL is rediss://.
func StartTLS(tb testing.TB, password string) (s *Server, caFile string) {
	tb.Helper()
	dir := tb.TempDir()
	ca, cert, key, err := makeCerts(dir)
	if err != nil {
		tb.Fatal(err)
	}
	args := []string{"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no"}
	if password != "" {
		args = append(args, "--requirepass", password)
	}
	if _, err := Binary(); err != nil {
		tb.Fatal(err)
	}
	s = &Server{dir: dir, args: args, tls: true, tb: tb}
	for range 5 {
		if s.Addr, err = freeAddr(); err != nil {
			continue
		}
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s, ca
}

// makeCerts writes a CA and a server certificate for 127.0.0.1 it signed.
func makeCerts(dir string) (ca, cert, key string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redistest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caTmpl, &srvKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return "", "", "", err
	}
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{ca, "CERTIFICATE", caDER}, {cert, "CERTIFICATE", srvDER}, {key, "EC PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o600); err != nil {
			return "", "", "", err
		}
	}
	return ca, cert, key, nil
}

// Stop kills the server (it keeps nothing). Safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	// Wait until the port is free, so a Restart can bind it again.
	for range 250 {
		if _, err := net.DialTimeout("tcp", s.Addr, 100*time.Millisecond); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart starts the server again on the same address after Stop (its data
// is gone: it keeps none).
func (s *Server) Restart() {
	s.tb.Helper()
	var err error
	for range 50 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: restart: %v", err)
}

// Port is the server's port.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

var prefixes atomic.Uint64

// Backend returns a state backend on s as replica, under a prefix no other
// call uses, so tests sharing a server do not see each other's keys. The
// client is closed when tb ends.
func (s *Server) Backend(tb testing.TB, replica string) *state.Backend {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
	tb.Cleanup(func() { c.Close() })
	return state.NewForTest(c, fmt.Sprintf("t%d:", prefixes.Add(1)), replica)
}

// Shared returns two backends on one fresh server, as two replicas of one
// gateway see it: same prefix, different replica names.
func Shared(tb testing.TB) (a, b *state.Backend) {
	tb.Helper()
	s := Start(tb)
	a = s.Backend(tb, "a")
	cb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	tb.Cleanup(func() { cb.Close() })
	return a, state.NewForTest(cb, a.Key(), "b")
}
