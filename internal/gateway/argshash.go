package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/relay"
)

// rawArgumentsHash is the audit's arguments_hash (argsFieldOf: the SHA-256
// of the arguments' encoding by Marshal, map keys sorted) taken from the
// bytes a call's arguments came in, without decoding them: when those
// bytes already are that encoding (relay.Canonical), as the SDK's clients
// and call_tool's own relay write them, or say no arguments. Other bytes
// (spaces, keys out of order, escapes Marshal writes otherwise), arguments
// a middleware rewrote, and an operator who records the arguments
// themselves take the decoding path.
func (g *Gateway) rawArgumentsHash(req *extension.CallRequest) (string, bool) {
	if g.cfg.Audit.RecordArguments {
		return "", false
	}
	raw, ok := req.RawArguments()
	if !ok {
		return "", false
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		raw = []byte("{}") // no arguments: hashed as the empty object
	} else if raw[0] != '{' || !relay.Canonical(raw) {
		return "", false
	}
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:]), true
}
