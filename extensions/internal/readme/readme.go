// Package readme extracts the JSON examples from an extension's README.md,
// so each extension's tests can check that its documented examples parse.
package readme

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Examples returns, for every ```json block of the README at path that
// holds a "filters" object with key in it, the raw value of filters.<key>.
// Blocks without that key are skipped; a block that is not valid JSON is an
// error.
func Examples(path, key string) ([]json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```json" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		block := strings.Join(lines[start:i], "\n")
		var doc struct {
			Filters map[string]json.RawMessage `json:"filters"`
		}
		if err := json.Unmarshal([]byte(block), &doc); err != nil {
			return nil, fmt.Errorf("%s:%d: example is not valid JSON: %v", path, start, err)
		}
		if v, ok := doc.Filters[key]; ok {
			out = append(out, v)
		}
	}
	return out, nil
}
