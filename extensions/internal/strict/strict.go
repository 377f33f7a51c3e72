// Package strict decodes an extension's raw JSON configuration strictly: an
// unknown field is an error that names it and lists the known ones, and
// trailing data is rejected.
package strict

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/config"
)

// Decode decodes raw into v, a pointer to a struct with json tags. Empty or
// null raw leaves v unchanged.
func Decode(raw json.RawMessage, v any) error {
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
