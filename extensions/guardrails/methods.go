package extmcp

import (
	"fmt"
	"sort"
	"strings"
)

// Phase says when a processor is called for a method. It is a bit set:
// Full is Request|Response.
type Phase uint8

const (
	PhaseOff      Phase = 0
	PhaseRequest  Phase = 1
	PhaseResponse Phase = 2
	PhaseFull           = PhaseRequest | PhaseResponse
)

func (p Phase) String() string {
	switch p {
	case PhaseOff:
		return "off"
	case PhaseRequest:
		return "request"
	case PhaseResponse:
		return "response"
	case PhaseFull:
		return "full"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// ParsePhase reads a phase name, ignoring case ("request", "Request").
func ParsePhase(s string) (Phase, error) {
	for _, p := range []Phase{PhaseOff, PhaseRequest, PhaseResponse, PhaseFull} {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown phase %q (want off, request, response or full)", s)
}

// Methods maps JSON-RPC method names to phases. Keys are exact
// ("tools/call"), a prefix wildcard ("tools/*": every method starting with
// "tools/"), a suffix wildcard ("*/list": every method ending in "/list"),
// or "*" (every method). The most specific key wins:
//
//  1. an exact key;
//  2. else the matching wildcard key with the longest literal part
//     ("tools/" in "tools/*", "/list" in "*/list"); between a prefix and a
//     suffix key of the same literal length, the prefix key;
//  3. else "*".
//
// A method no key matches is off: it bypasses the processor.
type Methods struct {
	exact    map[string]Phase
	wild     []wildKey // longest literal first, prefix before suffix
	any      Phase
	hasAny   bool
	explicit map[string]Phase // the keys as configured, for String
}

type wildKey struct {
	key    string
	lit    string
	prefix bool
	phase  Phase
}

// ParseMethods validates a methods map from the config.
func ParseMethods(m map[string]string) (Methods, error) {
	ms := Methods{exact: map[string]Phase{}, explicit: map[string]Phase{}}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ph, err := ParsePhase(m[k])
		if err != nil {
			return Methods{}, fmt.Errorf("%q: %v", k, err)
		}
		ms.explicit[k] = ph
		switch {
		case k == "*":
			ms.any, ms.hasAny = ph, true
		case strings.HasSuffix(k, "/*") && validLiteral(strings.TrimSuffix(k, "*")):
			ms.wild = append(ms.wild, wildKey{key: k, lit: strings.TrimSuffix(k, "*"), prefix: true, phase: ph})
		case strings.HasPrefix(k, "*/") && validLiteral(strings.TrimPrefix(k, "*")):
			ms.wild = append(ms.wild, wildKey{key: k, lit: strings.TrimPrefix(k, "*"), phase: ph})
		case validLiteral(k) && !strings.HasPrefix(k, "/") && !strings.HasSuffix(k, "/"):
			ms.exact[k] = ph
		default:
			return Methods{}, fmt.Errorf("%q is not a method key: use an exact method (tools/call), prefix/* (tools/*), */suffix (*/list) or *", k)
		}
	}
	sort.SliceStable(ms.wild, func(i, j int) bool {
		a, b := ms.wild[i], ms.wild[j]
		if len(a.lit) != len(b.lit) {
			return len(a.lit) > len(b.lit)
		}
		return a.prefix && !b.prefix
	})
	return ms, nil
}

// validLiteral: non-empty, no wildcard, no space, and more than a lone "/".
func validLiteral(s string) bool {
	return s != "" && s != "/" && !strings.ContainsAny(s, "*? \t\n")
}

// Phase returns the phase for method, and the key that decided it ("" when
// no key matched and the method bypasses the processor).
func (m Methods) Phase(method string) (Phase, string) {
	if ph, ok := m.exact[method]; ok {
		return ph, method
	}
	for _, w := range m.wild {
		if w.prefix && strings.HasPrefix(method, w.lit) || !w.prefix && strings.HasSuffix(method, w.lit) {
			return w.phase, w.key
		}
	}
	if m.hasAny {
		return m.any, "*"
	}
	return PhaseOff, ""
}

// Len is the number of configured keys.
func (m Methods) Len() int { return len(m.explicit) }
