package config

import (
	"reflect"
	"strings"
)

// Suggest returns the known key closest to key, for a "did you mean"
// hint, or "" when none is close: a key that differs only in case, or by
// at most one edit (two for keys of six letters or more), where swapping
// two neighbouring letters counts as one edit.
func Suggest(key string, known []string) string {
	best, bestDist := "", -1
	for _, k := range known {
		if strings.EqualFold(k, key) {
			return k
		}
		d := editDistance(strings.ToLower(key), strings.ToLower(k))
		if bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	limit := 1
	if len(key) >= 6 {
		limit = 2
	}
	if bestDist < 0 || bestDist > limit {
		return ""
	}
	return best
}

// didYouMean is Suggest as a message suffix: ` (did you mean "command"?)`.
func didYouMean(key string, known []string) string {
	if s := Suggest(key, known); s != "" {
		return ` (did you mean "` + s + `"?)`
	}
	return ""
}

// editDistance is the optimal string alignment distance between a and b
// (Levenshtein plus transpositions of neighbours), over bytes: keys are
// ASCII. Plain Levenshtein (github.com/agnivade/levenshtein, already in the
// build through OPA) counts a swap of neighbours, the commonest typo
// ("tpye"), as two edits. Keys longer than 256 bytes are not compared.
func editDistance(a, b string) int {
	if len(a) > 256 || len(b) > 256 {
		return max(len(a), len(b))
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// jsonKeys lists the JSON keys a struct (or pointer to one) decodes,
// including those of embedded structs.
func jsonKeys(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if name == "-" || !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			keys = append(keys, name)
		}
	}
	walk(t)
	return keys
}
