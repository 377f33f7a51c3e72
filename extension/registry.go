package extension

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

// Factory builds an extension from its raw config. It must not have side
// effects: opening files and compiling belong in Provision.
type Factory func(raw json.RawMessage) (Extension, error)

var (
	regMu    sync.RWMutex
	registry = map[string]Factory{}
)

// Register makes a built-in extension available under a filters config key
// (e.g. "access_control"). It is meant for init functions and panics on a
// duplicate key, as a duplicate is a programming error.
func Register(key string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[key]; dup {
		panic(fmt.Sprintf("extension: config key %q registered twice", key))
	}
	registry[key] = f
}

// Lookup returns the factory registered for key.
func Lookup(key string) (Factory, bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	f, ok := registry[key]
	return f, ok
}

// Keys lists the registered config keys in sorted order.
func Keys() []string {
	regMu.RLock()
	defer regMu.RUnlock()
	keys := make([]string, 0, len(registry))
	for k := range registry {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
