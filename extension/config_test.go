package extension

import (
	"strings"
	"testing"
)

type conf struct {
	Deny  []string `json:"deny"`
	Name  string   `json:"name"`
	Other bool     `json:"-"`
}

func TestDecodeConfig(t *testing.T) {
	tests := []struct {
		raw     string
		wantErr string
	}{
		{``, ""},
		{`null`, ""},
		{`{}`, ""},
		{`{"deny": ["a"], "name": "x"}`, ""},
		{`{"dny": ["a"]}`, `unknown field "dny" (did you mean "deny"?) (known: deny, name)`},
		{`{"zzzz": ["a"]}`, `unknown field "zzzz" (known: deny, name)`},
		{`{"deny": "a"}`, `deny: want an array of strings, got string`},
		{`{"name": 3}`, `name: want a string, got number`},
		{`["a"]`, `want an object with fields deny, name, got array`},
		{`{"name": "x"} {}`, `data after the value`},
		{`{"name": `, `malformed JSON`},
	}
	for _, tt := range tests {
		var c conf
		err := DecodeConfig([]byte(tt.raw), &c)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("DecodeConfig(%s): %v", tt.raw, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("DecodeConfig(%s) = %v, want error containing %q", tt.raw, err, tt.wantErr)
		}
	}
}
