package config

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Backends of the "state" object.
const (
	StateMemory = "memory"
	StateRedis  = "redis"
)

// DefaultStatePrefix starts every key toolgate writes to Redis.
const DefaultStatePrefix = "toolgate:"

// State is the "state" object: where decisions that span calls live (rate
// limits, cross-server flow windows, discovery records, the stateless
// token key). "memory" (the default) keeps them in the process; "redis"
// shares them between replicas of one gateway through a Redis 7 or Valkey
// server.
type State struct {
	// Backend is "memory" or "redis".
	Backend string `json:"backend,omitempty"`
	// URL is redis://[user:password@]host:port[/db] or rediss:// for TLS.
	// $VAR references are resolved like the servers' (.env beside the
	// config, then the environment), so the password need not be in the
	// file.
	URL string `json:"url,omitempty"`
	// Prefix starts every key (default "toolgate:"); replicas of one
	// gateway share it, gateways that must not share state use different
	// ones.
	Prefix string `json:"prefix,omitempty"`
	// CAFile is a PEM file of the CA that signed the server's certificate
	// (rediss:// only), relative to the config; without it the system's
	// roots are used.
	CAFile string `json:"ca_file,omitempty"`
	// Replica names this process in shared records (default: host name
	// and process id).
	Replica string `json:"replica,omitempty"`
}

// Shared reports whether the state is in Redis.
func (s State) Shared() bool { return s.Backend == StateRedis }

var statePrefix = regexp.MustCompile(`^[A-Za-z0-9_.:{}-]{1,64}$`)

// parse validates s, fills in defaults and resolves $VAR in the URL.
func (s *State) parse(dir string, lookup func(string) (string, bool)) error {
	switch s.Backend {
	case "", StateMemory:
		if s.URL != "" || s.Prefix != "" || s.CAFile != "" {
			return fmt.Errorf(`state: "url", "prefix" and "ca_file" need "backend": "redis"`)
		}
		s.Backend = StateMemory
	case StateRedis:
		if s.URL == "" {
			return fmt.Errorf(`state: "backend": "redis" needs "url" (redis://host:6379/0, or rediss:// for TLS)`)
		}
		u, err := Expand(s.URL, lookup)
		if err != nil {
			return fmt.Errorf("state.url: %v", err)
		}
		if err := CheckRedisURL(u); err != nil {
			return fmt.Errorf("state.url: %v", err)
		}
		s.URL = u
		if s.Prefix == "" {
			s.Prefix = DefaultStatePrefix
		}
		if !statePrefix.MatchString(s.Prefix) {
			return fmt.Errorf("state.prefix %q: want 1 to 64 letters, digits or _.:{}-", s.Prefix)
		}
		if s.CAFile != "" {
			if !strings.HasPrefix(u, "rediss://") {
				return fmt.Errorf("state.ca_file: only for a rediss:// (TLS) url")
			}
			if !filepath.IsAbs(s.CAFile) {
				s.CAFile = filepath.Join(dir, s.CAFile)
			}
			if _, err := os.Stat(s.CAFile); err != nil {
				return fmt.Errorf("state.ca_file: %v", err)
			}
		}
	default:
		return fmt.Errorf(`state.backend %q: want "memory" or "redis"`, s.Backend)
	}
	if s.Replica == "" {
		host, _ := os.Hostname()
		s.Replica = host + "-" + strconv.Itoa(os.Getpid())
	}
	if len(s.Replica) > 128 || strings.ContainsAny(s.Replica, " \t\r\n") {
		return fmt.Errorf("state.replica %q: want at most 128 characters without spaces", s.Replica)
	}
	return nil
}

// CheckRedisURL validates a redis:// or rediss:// URL; its error never
// repeats the password.
func CheckRedisURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL (want redis://host:6379/0)")
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf("scheme %q: want redis:// or rediss:// (TLS)", u.Scheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%s: no host (want %s://host:6379/0)", u.Redacted(), u.Scheme)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%s: bad port %q", u.Redacted(), p)
		}
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		if n, err := strconv.Atoi(db); err != nil || n < 0 {
			return fmt.Errorf("%s: database %q is not a number", u.Redacted(), db)
		}
	}
	for k := range u.Query() {
		switch k {
		case "dial_timeout", "read_timeout", "write_timeout", "pool_size", "client_name", "protocol", "skip_verify":
		default:
			return fmt.Errorf("%s: unknown query parameter %q", u.Redacted(), k)
		}
	}
	return nil
}
