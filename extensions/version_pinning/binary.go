package pin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/audit"
)

// ResolveCommand is the pin_binary hook, meant to be called by the upstream
// manager just before it starts a stdio server: it returns the absolute
// path to execute in place of command (the arguments and argv[0] are
// unchanged), or "" to launch command as configured (pin_binary off).
//
// The first time a server starts, command is resolved the way exec does (a
// name through the gateway's PATH, a relative path against dir), symlinks
// are followed, and the file's SHA-256 is pinned with its real path. Later
// starts launch the pinned path directly, so a changed PATH cannot swap the
// executable, and re-hash it: a different hash, a missing file or a changed
// command is a mismatch, handled per on_change (block returns an error and
// the server does not start; alert records a server_binary_mismatch event
// and starts it). An unpinned server with auto_trust_first off is handled
// the same way.
//
// Residual risk: the file is hashed, then executed by path; a writer who
// can replace it in between wins the race. Interpreted servers (a script
// run by node or python) pin the script or launcher named by command, not
// the interpreter's other inputs.
func (p *Pinner) ResolveCommand(ctx context.Context, server, command, dir string) (string, error) {
	if !p.pinBinary {
		return "", nil
	}
	f, err := p.store.Latest() // a launch is rare: see the file as it is now
	if err != nil {
		return "", err
	}
	pin := f.Binaries[server]
	if pin != nil && pin.Hash != "" && pin.Command == command && pin.Path != "" {
		if now, err := Resolve(command, dir); err == nil && now != pin.Path {
			p.log.Warn("the server's command now resolves elsewhere; launching the pinned executable", "server", server, "pinned_path", pin.Path, "resolved_path", now)
		}
		if p.onChange == Allow {
			return pin.Path, nil
		}
		h, err := HashFile(pin.Path)
		if err != nil {
			h = "missing"
		}
		if h == pin.Hash {
			if pin.Observed != nil {
				p.updateBinary(server, func(b *BinaryPin) { b.Observed = nil })
			}
			return pin.Path, nil
		}
		return p.binaryMismatch(ctx, server, command, pin, pin.Path, h, StatusMismatch)
	}
	path, err := Resolve(command, dir)
	if err != nil {
		return "", fmt.Errorf("pin_binary: %v", err)
	}
	h, err := HashFile(path)
	if err != nil {
		return "", fmt.Errorf("pin_binary: %v", err)
	}
	if pin == nil || pin.Hash == "" {
		if p.autoTrust {
			now := p.now().UTC()
			err := p.store.Update(func(f *File) (bool, error) {
				f.Binaries[server] = &BinaryPin{Command: command, Path: path, Hash: h, PinnedAt: &now}
				return true, nil
			})
			return path, err
		}
		if p.onChange == Allow {
			return path, nil
		}
		return p.binaryMismatch(ctx, server, command, pin, path, h, StatusNotPinned)
	}
	// Pinned for another command: the configured command changed.
	if p.onChange == Allow {
		return path, nil
	}
	return p.binaryMismatch(ctx, server, command, pin, path, h, StatusMismatch)
}

func (p *Pinner) updateBinary(server string, fn func(b *BinaryPin)) {
	err := p.store.Update(func(f *File) (bool, error) {
		b := f.Binaries[server]
		if b == nil {
			b = &BinaryPin{}
			f.Binaries[server] = b
		}
		fn(b)
		return true, nil
	})
	if err != nil {
		p.log.Error("pins not updated", "server", server, "error", err)
	}
}

func (p *Pinner) binaryMismatch(ctx context.Context, server, command string, pin *BinaryPin, path, h, status string) (string, error) {
	expected := ""
	if pin != nil {
		expected = pin.Hash
	}
	if pin == nil || pin.Observed == nil || pin.Observed.Hash != h || pin.Observed.Path != path {
		now := p.now().UTC()
		p.updateBinary(server, func(b *BinaryPin) {
			b.Observed = &BinaryObservation{Command: command, Path: path, Hash: h, SeenAt: now}
		})
	}
	p.log.Warn("server executable differs from its pin", "server", server, "binary_path", path, "expected_hash", expected, "actual_hash", h, "status", status, "on_change", p.onChange)
	p.emit(ctx, extension.Event{
		Type: audit.ServerBinaryMismatch, Server: server, Action: p.onChange, Reason: Key + ".pin_binary",
		Fields: map[string]any{"binary_path": path, "expected_hash": expected, "actual_hash": h, "status": status, "command": command},
	})
	if p.onChange == Alert {
		return path, nil
	}
	if status == StatusNotPinned {
		return "", fmt.Errorf("pin_binary: the executable of server %q (%s, sha256:%s) is not pinned; review it and run `toolgate pins trust --server %s --binary`", server, path, h, server)
	}
	return "", fmt.Errorf("pin_binary: the executable of server %q changed since it was pinned (%s: pinned sha256:%s, now sha256:%s); the server is not started. Review it and run `toolgate pins trust --server %s --binary`",
		server, path, expected, h, server)
}

// Resolve finds the executable command names the way exec.Command would,
// without using a relative PATH entry: a command with a slash is taken
// relative to dir, a bare name is looked up in $PATH. Symlinks are
// followed; the result is an absolute path to a regular, executable file.
func Resolve(command, dir string) (string, error) {
	if command == "" {
		return "", errors.New("empty command")
	}
	var path string
	if strings.ContainsRune(command, '/') {
		path = command
		if !filepath.IsAbs(path) {
			base := dir
			if base == "" {
				wd, err := os.Getwd()
				if err != nil {
					return "", err
				}
				base = wd
			}
			path = filepath.Join(base, path)
		}
		if err := executable(path); err != nil {
			return "", fmt.Errorf("command %q: %v", command, err)
		}
	} else {
		for _, d := range filepath.SplitList(os.Getenv("PATH")) {
			if d == "" || !filepath.IsAbs(d) {
				continue // "." and relative entries are never searched
			}
			if executable(filepath.Join(d, command)) == nil {
				path = filepath.Join(d, command)
				break
			}
		}
		if path == "" {
			return "", fmt.Errorf("command %q not found in $PATH", command)
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("command %q: %v", command, err)
	}
	return filepath.Abs(real)
}

func executable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", path)
	}
	return nil
}

// HashFile is the hex SHA-256 of a file's content.
func HashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
