package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/config"
)

// apiKeys holds the SHA-256 of each configured key. Only hashes are kept,
// so the config file never holds a usable key.
type apiKeys struct {
	hashes     [][sha256.Size]byte
	principals []*extension.Principal
}

func newAPIKeys(keys []config.APIKey) (*apiKeys, error) {
	k := &apiKeys{}
	for i, key := range keys {
		b, err := hex.DecodeString(key.SHA256)
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("auth.api_keys[%d]: bad sha256", i)
		}
		k.hashes = append(k.hashes, [sha256.Size]byte(b))
		k.principals = append(k.principals, &extension.Principal{
			Subject: key.Principal, Issuer: extension.APIKeyIssuer,
			Groups: slices.Clone(key.Groups), Scopes: slices.Clone(key.Scopes),
		})
	}
	return k, nil
}

// lookup returns the principal of token, or nil. Every configured hash is
// compared, in constant time, whatever matches: neither the position of a
// match nor the length of a common prefix shows in the time taken.
func (k *apiKeys) lookup(token string) *extension.Principal {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range k.hashes {
		eq := subtle.ConstantTimeCompare(sum[:], k.hashes[i][:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil
	}
	return k.principals[found]
}
