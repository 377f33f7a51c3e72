package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/relay"
)

// rawArgumentsHash is the audit's arguments_hash (argsFieldOf: the SHA-256
// of the arguments' encoding by Marshal, map keys sorted) taken from the
// bytes a call's arguments came in, without decoding them into maps: the
// bytes themselves when they already are that encoding (relay.Canonical),
// as Go clients write them, else that encoding written from the bytes
// (relay.AppendCanonical). Bytes that are not a JSON object, arguments a
// middleware rewrote, and an operator who records the arguments
// themselves take the decoding path.
func (g *Gateway) rawArgumentsHash(req *extension.CallRequest) (string, bool) {
	if g.cfg.Audit.RecordArguments {
		return "", false
	}
	raw, ok := req.RawArguments()
	if !ok {
		return "", false
	}
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) == 0 || string(t) == "null":
		t = []byte("{}") // no arguments: hashed as the empty object
	case t[0] != '{':
		return "", false
	case !relay.Canonical(t):
		bp := canonPool.Get().(*[]byte)
		defer canonPool.Put(bp)
		if *bp, ok = relay.AppendCanonical((*bp)[:0], t); !ok {
			return "", false
		}
		t = *bp
	}
	sum := sha256.Sum256(t)
	return "sha256:" + hex.EncodeToString(sum[:]), true
}

// canonPool holds the buffers arguments are made canonical in.
var canonPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
