package extension

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/internal/config"
)

// Factory builds an extension from its raw config. It must not have side
// effects: opening files and compiling belong in Provision.
type Factory func(raw json.RawMessage) (Extension, error)

var (
	regMu      sync.RWMutex
	registry   = map[string]Factory{}
	deprecated = map[string]string{} // old config key → current name
)

// Register makes a built-in extension available under its name, the config
// key under "filters" and the last part of its ID. Its config is decoded
// strictly into a C (DecodeConfig: unknown fields are errors naming the
// known ones) and handed to build. Register is meant for init functions
// and panics on a duplicate name, a programming error.
func Register[C any, E Extension](name string, build func(cfg C) (E, error)) {
	RegisterFactory(name, ConfigFactory(build))
}

// RegisterFactory is Register for an extension that decodes its own config.
func RegisterFactory(name string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("extension: %q registered twice", name))
	}
	if _, dup := deprecated[name]; dup {
		panic(fmt.Sprintf("extension: %q registered twice", name))
	}
	registry[name] = f
}

// RegisterDeprecated keeps an old config key working for the extension now
// named name; Lookup reports the key as deprecated so the gateway warns.
func RegisterDeprecated(old, name string) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[old]; dup {
		panic(fmt.Sprintf("extension: %q registered twice", old))
	}
	deprecated[old] = name
}

// Lookup returns the factory registered for key. For a deprecated key it
// returns the current name's factory and that name in renamed.
func Lookup(key string) (f Factory, ok bool) {
	f, _, ok = LookupName(key)
	return f, ok
}

// LookupName is Lookup that also returns the current name when key is a
// deprecated one ("" otherwise).
func LookupName(key string) (f Factory, renamed string, ok bool) {
	regMu.RLock()
	defer regMu.RUnlock()
	if n, old := deprecated[key]; old {
		f, ok = registry[n]
		return f, n, ok
	}
	f, ok = registry[key]
	return f, "", ok
}

// Keys lists the registered names in sorted order (deprecated keys are not
// listed).
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

// DecodeConfig decodes an extension's raw JSON config into v, a pointer to
// a struct with json tags, strictly: an unknown field is an error that
// names it, suggests a near miss and lists the known ones; a wrong type
// names the field; trailing data is rejected. Empty or null raw leaves v
// unchanged.
func DecodeConfig(raw json.RawMessage, v any) error {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return fmt.Errorf("%s: want %s, got %s", te.Field, kind(te.Type), te.Value)
		case errors.As(err, &te):
			return fmt.Errorf("want an object with fields %s, got %s", known(v), te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			quoted := strings.TrimPrefix(err.Error(), "json: unknown field ")
			hint := ""
			if name, uerr := strconv.Unquote(quoted); uerr == nil {
				if s := config.Suggest(name, strings.Split(known(v), ", ")); s != "" {
					hint = fmt.Sprintf(" (did you mean %q?)", s)
				}
			}
			return fmt.Errorf("unknown field %s%s (known: %s)", quoted, hint, known(v))
		}
		return fmt.Errorf("malformed JSON: %v", err)
	}
	if dec.More() {
		return errors.New("malformed JSON: data after the value")
	}
	return nil
}

func kind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "an array of " + strings.TrimPrefix(kind(t.Elem()), "a ") + "s"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

// known lists the json field names of the struct v points to.
func known(v any) string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return "?"
	}
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
}

// ConfigFactory is the Factory that decodes a raw config strictly into a C
// (DecodeConfig) and hands it to build; Register uses it.
func ConfigFactory[C any, E Extension](build func(cfg C) (E, error)) Factory {
	return func(raw json.RawMessage) (Extension, error) {
		var c C
		if err := DecodeConfig(raw, &c); err != nil {
			return nil, err
		}
		e, err := build(c)
		if err != nil {
			return nil, err
		}
		return e, nil
	}
}
