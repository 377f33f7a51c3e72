package gate

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Signer issues and checks discovery tokens for stateless clients. A token
// is base64url(JSON claims) "." base64url(HMAC-SHA256(key, claims)); the
// claims list the qualified tool names a search surfaced, the principal the
// search ran for, and an expiry. Only the gateway holds the key, so a client
// cannot add a tool to a token, and a token cannot outlive its TTL.
type Signer struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// DefaultTokenTTL bounds how long a stateless discovery stays valid.
const DefaultTokenTTL = 30 * time.Minute

type claims struct {
	Tools     []string `json:"t"`
	Principal string   `json:"p,omitempty"`
	Expires   int64    `json:"e"`
}

// NewSigner returns a Signer with key (at least 32 bytes).
func NewSigner(key []byte, ttl time.Duration) (*Signer, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("gate: signing key is %d bytes, want at least 32", len(key))
	}
	if ttl <= 0 {
		ttl = DefaultTokenTTL
	}
	return &Signer{key: slices.Clone(key), ttl: ttl, now: time.Now}, nil
}

// LoadOrCreateKey reads the signing key from path, creating a random one
// (mode 0600) when absent. Replicas that share the state directory share the
// key, so a token issued by one is honoured by another.
func LoadOrCreateKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		key, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
		if derr != nil || len(key) < 32 {
			return nil, fmt.Errorf("gate: key file %s is corrupt (want base64 of 32+ bytes); delete it to make a new one", path)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("gate: read key: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("gate: create key folder: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		// Another replica won the race; use its key.
		return LoadOrCreateKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("gate: create key: %w", err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("gate: write key: %w", err)
	}
	return key, f.Close()
}

// Issue returns a token vouching that tools were surfaced to principal.
func (s *Signer) Issue(principal string, tools []string) string {
	c := claims{Tools: tools, Principal: principal, Expires: s.now().Add(s.ttl).Unix()}
	body, _ := json.Marshal(c) // claims always marshal
	enc := base64.RawURLEncoding.EncodeToString(body)
	return enc + "." + base64.RawURLEncoding.EncodeToString(s.mac(enc))
}

func (s *Signer) mac(body string) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(body))
	return h.Sum(nil)
}

// Token errors; the messages are safe to show a client.
var (
	ErrTokenMissing  = errors.New("no discovery token")
	ErrTokenInvalid  = errors.New("discovery token is malformed or was not issued by this gateway")
	ErrTokenExpired  = errors.New("discovery token has expired")
	ErrTokenNotTool  = errors.New("discovery token does not cover this tool")
	ErrTokenNotOwner = errors.New("discovery token was issued to another principal")
)

var strictB64 = base64.RawURLEncoding.Strict()

// Verify checks that token is authentic, unexpired, issued to principal and
// lists tool.
func (s *Signer) Verify(token, principal, tool string) error {
	if token == "" {
		return ErrTokenMissing
	}
	body, sig, ok := strings.Cut(token, ".")
	if !ok {
		return ErrTokenInvalid
	}
	// Strict decoding: the unused low bits of the last character must be
	// zero, so exactly one string encodes a token and a token cannot be
	// replayed under a different spelling.
	got, err := strictB64.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(body)) {
		return ErrTokenInvalid
	}
	raw, err := strictB64.DecodeString(body)
	if err != nil {
		return ErrTokenInvalid
	}
	var c claims
	if err := json.Unmarshal(raw, &c); err != nil {
		return ErrTokenInvalid
	}
	if s.now().Unix() > c.Expires {
		return ErrTokenExpired
	}
	if c.Principal != principal {
		return ErrTokenNotOwner
	}
	if !slices.Contains(c.Tools, tool) {
		return ErrTokenNotTool
	}
	return nil
}
