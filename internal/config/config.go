// Package config loads toolgate's configuration: the Claude Desktop style
// mcpServers map plus the filters object, decoded strictly (an unknown key is
// an error naming the key and the file), with $VAR references resolved from a
// .env file beside the config and then the process environment.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"
)

// DefaultSimilarityThreshold is the score below which search results are
// dropped when the config does not say otherwise.
const DefaultSimilarityThreshold = 0.3

// Config is a loaded, validated and resolved configuration.
type Config struct {
	// Path is the absolute path of the file the config was read from, or ""
	// for a config built in code.
	Path string
	// Dir is the folder relative paths in the config are resolved against.
	Dir string
	// Servers are the upstream MCP servers by name.
	Servers map[string]*Server
	// Filters holds similarity_threshold and the raw configuration of every
	// other filter key, which the extension that owns the key decodes.
	Filters Filters
	// DotEnv holds the variables of the .env file beside the config.
	DotEnv map[string]string
	// Search configures the tool index.
	Search Search
	// Audit configures the audit log.
	Audit Audit
	// Limits bounds what upstream tool lists may hold (limits.go).
	Limits Limits
	// Exposure says what the client sees: the meta-tools (mode "meta"),
	// the upstream tools themselves ("passthrough"), or both ("hybrid");
	// see mode.go.
	Exposure
}

// Audit is the "audit" object.
type Audit struct {
	// Enabled turns the audit log on (default true).
	Enabled *bool `json:"enabled,omitempty"`
	// Path of the log (default: audit.jsonl in the state directory),
	// relative to the config.
	Path string `json:"path,omitempty"`
	// RecordArguments stores argument values; by default only their hash.
	RecordArguments bool `json:"record_arguments,omitempty"`
	// Fsync syncs every record to disk before the call returns. Without it
	// a record still reaches the kernel before the call returns, which
	// survives kill -9 but not a power cut.
	Fsync bool `json:"fsync,omitempty"`
}

// On reports whether the audit log is enabled.
func (a Audit) On() bool { return a.Enabled == nil || *a.Enabled }

// Search modes.
const (
	SearchHybrid  = "hybrid"
	SearchLexical = "lexical"
	SearchDense   = "dense"
)

// Search is the "search" object.
type Search struct {
	// Mode is "hybrid" (default), "lexical" or "dense".
	Mode string `json:"mode,omitempty"`
	// ModelDir holds the embedding model (default: $TOOLGATE_MODEL_DIR or
	// the checkout's .cache/models/all-MiniLM-L6-v2), relative to the config.
	ModelDir string `json:"model_dir,omitempty"`
	// DenseWeight is the share of the semantic score in hybrid mode.
	DenseWeight *float64 `json:"dense_weight,omitempty"`
}

// Filters is the "filters" object.
type Filters struct {
	SimilarityThreshold float64
	// Extensions maps a filter key (e.g. "access_control") to its raw JSON.
	Extensions map[string]json.RawMessage
	// Order lists the keys of Extensions as they appear in the file: inside
	// a pipeline phase, built-in filters run in this order.
	Order []string
}

// Transport names accepted in a server's "transport" field.
const (
	TransportStdio          = "stdio"
	TransportStreamableHTTP = "streamable-http"
	TransportSSE            = "sse"
)

// Server is one entry of mcpServers.
type Server struct {
	Name    string            `json:"-"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Transport is "stdio" for command servers; for url servers it is
	// "streamable-http" (the default, falling back to SSE) or "sse".
	Transport string `json:"transport,omitempty"`
	// Disabled servers are kept in the config but never started.
	Disabled bool `json:"disabled,omitempty"`
	// EnvAllow and EnvDeny (globs) choose what of the gateway's own
	// environment a stdio server inherits; see secrets.EnvFilter.
	EnvAllow []string `json:"env_allow,omitempty"`
	EnvDeny  []string `json:"env_deny,omitempty"`
	// Dir is the working directory of a stdio server, relative to the
	// config's folder (default: the config's folder).
	Dir string `json:"cwd,omitempty"`
	// Lazy servers are not started until one of their tools is called;
	// their tools are searchable from the catalogue cache meanwhile.
	Lazy bool `json:"lazy,omitempty"`
	// IdleTimeout is how many seconds a server may go without a call
	// before it is stopped (nil: DefaultIdleTimeout; 0: never).
	IdleTimeout *float64 `json:"idle_timeout,omitempty"`
	// CallTimeout bounds one tool call, in seconds (nil: DefaultCallTimeout).
	CallTimeout *float64 `json:"call_timeout,omitempty"`
}

// Lifecycle defaults of a server.
const (
	DefaultIdleTimeout = 300 * time.Second
	DefaultCallTimeout = 60 * time.Second
)

// Idle returns the server's idle timeout; 0 means it is never stopped for
// being idle.
func (s *Server) Idle() time.Duration {
	if s.IdleTimeout == nil {
		return DefaultIdleTimeout
	}
	return seconds(*s.IdleTimeout)
}

// CallLimit returns the server's call timeout, or 0 when the config does
// not set one (the caller's default applies).
func (s *Server) CallLimit() time.Duration {
	if s.CallTimeout == nil {
		return 0
	}
	return seconds(*s.CallTimeout)
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// maxSeconds bounds idle_timeout and call_timeout (a year), so a typo does
// not overflow a time.Duration.
const maxSeconds = 365 * 24 * 3600

// IsRemote reports whether the server is reached over HTTP.
func (s *Server) IsRemote() bool { return s.URL != "" }

type fileFormat struct {
	MCPServers map[string]json.RawMessage `json:"mcpServers"`
	Filters    json.RawMessage            `json:"filters,omitempty"`
	Search     *Search                    `json:"search,omitempty"`
	Audit      *Audit                     `json:"audit,omitempty"`
	Limits     *Limits                    `json:"limits,omitempty"`
	Exposure
	// Schema lets editors attach a JSON schema; it is otherwise ignored.
	Schema string `json:"$schema,omitempty"`
	// Review is informational (e.g. the blocked tools a generated policy
	// lists for a person to look at); toolgate ignores it.
	Review json.RawMessage `json:"review,omitempty"`
}

// Error is a configuration problem with the file it came from.
type Error struct {
	File string
	Msg  string
}

func (e *Error) Error() string {
	if e.File == "" {
		return "config: " + e.Msg
	}
	return fmt.Sprintf("config %s: %s", e.File, e.Msg)
}

// Find returns the config path to use: flag, then $TOOLGATE_CONFIG, then
// ~/.config/toolgate/config.json, then ./config.json. It errors when none
// exists, listing where it looked.
func Find(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("TOOLGATE_CONFIG"); env != "" {
		return env, nil
	}
	var tried []string
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".config", "toolgate", "config.json")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		tried = append(tried, p)
	}
	if _, err := os.Stat("config.json"); err == nil {
		return "config.json", nil
	}
	tried = append(tried, "./config.json")
	return "", fmt.Errorf("config: no config file given (--config or TOOLGATE_CONFIG) and none found at %s", strings.Join(tried, ", "))
}

// Load reads, decodes and validates the config at path, resolving $VAR
// references from the .env beside it and then the environment.
func Load(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return nil, &Error{File: path, Msg: fmt.Sprintf("read: %v", errors.Unwrap(err))}
	}
	dir := filepath.Dir(abs)
	dotenv, err := ReadDotEnv(filepath.Join(dir, ".env"))
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(data, abs, dotenv)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// Parse decodes config bytes. file names the source in errors; relative
// paths resolve against its folder. dotenv may be nil.
func Parse(data []byte, file string, dotenv map[string]string) (*Config, error) {
	var ff fileFormat
	if err := strictDecode(data, &ff); err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	if ff.MCPServers == nil {
		return nil, &Error{File: file, Msg: `missing "mcpServers" object`}
	}
	cfg := &Config{
		Path:    file,
		Servers: make(map[string]*Server, len(ff.MCPServers)),
		DotEnv:  dotenv,
	}
	if file != "" {
		cfg.Dir = filepath.Dir(file)
	}
	lookup := cfg.Lookup
	names := make([]string, 0, len(ff.MCPServers))
	for name := range ff.MCPServers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var s Server
		if err := strictDecode(ff.MCPServers[name], &s); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("mcpServers.%s: %v", name, err)}
		}
		s.Name = name
		if err := s.validate(); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("mcpServers.%s: %v", name, err)}
		}
		if err := s.resolve(lookup); err != nil {
			return nil, &Error{File: file, Msg: fmt.Sprintf("mcpServers.%s: %v", name, err)}
		}
		// A stdio server runs in the config's folder unless told otherwise,
		// so relative paths in command and args mean the same as elsewhere
		// in the config.
		if s.Command != "" && !filepath.IsAbs(s.Dir) {
			s.Dir = filepath.Join(cfg.Dir, s.Dir)
		}
		cfg.Servers[name] = &s
	}
	if ff.Search != nil {
		cfg.Search = *ff.Search
	}
	if ff.Audit != nil {
		cfg.Audit = *ff.Audit
		if cfg.Audit.Path != "" && !filepath.IsAbs(cfg.Audit.Path) {
			cfg.Audit.Path = filepath.Join(cfg.Dir, cfg.Audit.Path)
		}
	}
	if ff.Limits != nil {
		if err := ff.Limits.validate(); err != nil {
			return nil, &Error{File: file, Msg: err.Error()}
		}
		cfg.Limits = *ff.Limits
	}
	if err := cfg.Search.validate(cfg.Dir); err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	f, err := parseFilters(ff.Filters)
	if err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	cfg.Filters = f
	cfg.Exposure = ff.Exposure
	if err := cfg.validateExposure(); err != nil {
		return nil, &Error{File: file, Msg: err.Error()}
	}
	return cfg, nil
}

func parseFilters(raw json.RawMessage) (Filters, error) {
	f := Filters{SimilarityThreshold: DefaultSimilarityThreshold, Extensions: map[string]json.RawMessage{}}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return f, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return f, fmt.Errorf("filters: %v", err)
	}
	order, err := objectKeys(raw)
	if err != nil {
		return f, fmt.Errorf("filters: %v", err)
	}
	for _, k := range order {
		v := m[k]
		if k == "similarity_threshold" {
			var t float64
			if err := json.Unmarshal(v, &t); err != nil {
				return f, fmt.Errorf("filters.similarity_threshold: want a number: %v", err)
			}
			if t < 0 || t > 1 {
				return f, fmt.Errorf("filters.similarity_threshold: %v is outside [0, 1]", t)
			}
			f.SimilarityThreshold = t
			continue
		}
		if _, dup := f.Extensions[k]; dup {
			return f, fmt.Errorf("filters: key %q appears twice", k)
		}
		f.Extensions[k] = v
		f.Order = append(f.Order, k)
	}
	return f, nil
}

// objectKeys returns the keys of a JSON object in file order.
func objectKeys(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// ValidateServerName reports whether name can be used for an upstream:
// non-empty, without "__" (the namespace separator), of letters, digits,
// '-', '_' and '.'.
func ValidateServerName(name string) error {
	if name == "" {
		return errors.New("server name is empty")
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("server name %q contains %q, which separates server and tool names", name, "__")
	}
	if strings.HasPrefix(name, "_") || strings.HasSuffix(name, "_") {
		// "bank_" + "__" + "x" would read back as server "bank", tool "_x".
		return fmt.Errorf("server name %q starts or ends with '_', which would make qualified names ambiguous", name)
	}
	if len(name) > 64 {
		return fmt.Errorf("server name %q is longer than 64 characters", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("server name %q: character %q is not allowed (use letters, digits, '-', '_', '.')", name, r)
		}
	}
	return nil
}

func (s *Server) validate() error {
	if err := ValidateServerName(s.Name); err != nil {
		return err
	}
	if v := s.IdleTimeout; v != nil && (*v < 0 || *v > maxSeconds) {
		return fmt.Errorf("idle_timeout %v: want seconds between 0 (never stop) and %d", *v, maxSeconds)
	}
	if v := s.CallTimeout; v != nil && (*v <= 0 || *v > maxSeconds) {
		return fmt.Errorf("call_timeout %v: want seconds above 0 and at most %d", *v, maxSeconds)
	}
	switch {
	case s.Command != "" && s.URL != "":
		return errors.New(`set either "command" (stdio) or "url" (remote), not both`)
	case s.Command == "" && s.URL == "":
		return errors.New(`missing "command" (stdio server) or "url" (remote server)`)
	case s.Command != "":
		if s.Transport != "" && s.Transport != TransportStdio {
			return fmt.Errorf(`transport %q does not go with "command"; only "stdio"`, s.Transport)
		}
		if len(s.Headers) > 0 {
			return errors.New(`"headers" only apply to url servers`)
		}
		for _, g := range append(append([]string{}, s.EnvAllow...), s.EnvDeny...) {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				return fmt.Errorf("env_allow/env_deny: bad glob pattern %q", g)
			}
		}
		s.Transport = TransportStdio
	default:
		if err := ValidateURL(s.URL); err != nil {
			return err
		}
		switch s.Transport {
		case "":
			s.Transport = TransportStreamableHTTP
		case TransportStreamableHTTP, TransportSSE:
		default:
			return fmt.Errorf(`unknown transport %q (want "streamable-http" or "sse")`, s.Transport)
		}
		if len(s.Args) > 0 || len(s.Env) > 0 || len(s.EnvAllow) > 0 || len(s.EnvDeny) > 0 {
			return errors.New(`"args", "env", "env_allow" and "env_deny" only apply to command servers`)
		}
	}
	return nil
}

// ValidateURL checks that raw is an absolute http(s) URL.
func ValidateURL(raw string) error {
	u, err := parseHTTPURL(raw)
	if err != nil {
		return err
	}
	_ = u
	return nil
}

func (s *Server) resolve(lookup func(string) (string, bool)) error {
	for k, v := range s.Env {
		r, err := Expand(v, lookup)
		if err != nil {
			return fmt.Errorf("env.%s: %v", k, err)
		}
		s.Env[k] = r
	}
	for k, v := range s.Headers {
		r, err := Expand(v, lookup)
		if err != nil {
			return fmt.Errorf("headers.%s: %v", k, err)
		}
		s.Headers[k] = r
	}
	return nil
}

// Lookup resolves a variable from the config's .env first, then the process
// environment.
func (c *Config) Lookup(name string) (string, bool) {
	if v, ok := c.DotEnv[name]; ok {
		return v, true
	}
	return os.LookupEnv(name)
}

var varRef = regexp.MustCompile(`\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)`)

// Expand replaces $VAR and ${VAR} in s using lookup. "$$" is a literal
// dollar. An unresolved variable is an error naming it: passing the literal
// text on would hand a server "$GITHUB_TOKEN" as its token.
func Expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var missing []string
	parts := strings.Split(s, "$$")
	for i, p := range parts {
		parts[i] = varRef.ReplaceAllStringFunc(p, func(m string) string {
			name := strings.Trim(m[1:], "{}")
			v, ok := lookup(name)
			if !ok {
				missing = append(missing, name)
				return m
			}
			return v
		})
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("variable $%s is not set in .env beside the config nor in the environment", missing[0])
	}
	return strings.Join(parts, "$"), nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the top-level JSON value")
	}
	return nil
}

func describeJSONError(data []byte, err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		line, col := position(data, syn.Offset)
		return fmt.Errorf("line %d column %d: %v", line, col, syn)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" && typ.Type.Kind() == reflect.Struct {
			// The whole value: the file, or one server entry.
			return fmt.Errorf("want a JSON object, got JSON %s", typ.Value)
		}
		field := typ.Field
		if field == "" {
			field = "value"
		}
		return fmt.Errorf("%s: want %s, got JSON %s", field, typ.Type, typ.Value)
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return fmt.Errorf("unknown key %s", strings.TrimPrefix(msg, "json: unknown field "))
	}
	if errors.Is(err, io.EOF) {
		return errors.New("empty file")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of JSON")
	}
	return err
}

func position(data []byte, off int64) (line, col int) {
	line = 1
	col = 1
	for i := int64(0); i < off && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

func (s *Search) validate(dir string) error {
	switch s.Mode {
	case "":
		s.Mode = SearchHybrid
	case SearchHybrid, SearchLexical, SearchDense:
	default:
		return fmt.Errorf("search.mode %q: want %q, %q or %q", s.Mode, SearchHybrid, SearchLexical, SearchDense)
	}
	if w := s.DenseWeight; w != nil && (*w < 0 || *w > 1) {
		return fmt.Errorf("search.dense_weight %v is outside [0, 1]", *w)
	}
	if s.ModelDir != "" && !filepath.IsAbs(s.ModelDir) && dir != "" {
		s.ModelDir = filepath.Join(dir, s.ModelDir)
	}
	return nil
}
