package e2e

import (
	"slices"
	"strings"
	"testing"
)

// lookalikes are names that a lax gate (trimming, case folding, Unicode
// normalisation, a loose split at "__") might confuse with everything__echo
// or resolve to some other tool.
var lookalikes = []string{
	"everything__echo ",
	" everything__echo",
	"everything__echo\n",
	"everything__echo\x00",
	"EVERYTHING__echo",
	"everything__ECHO",
	"Everything__Echo",
	"everything___echo",
	"everything____echo",
	"everything__echo__",
	"everything_echo",
	"everythingecho",
	"everything__",
	"__echo",
	"__",
	"_",
	"echo",
	"everything",
	"everything__\u0435cho",      // Cyrillic е
	"\u0435verything__echo",      // Cyrillic е in the server name
	"everything__ech\u043e",      // Cyrillic о
	"everything\uff3f\uff3fecho", // fullwidth low lines
	"everything__\uff45cho",      // fullwidth e
	"everything__echo\u200b",     // zero-width space
	"everything\u200b__echo",     // zero-width space in the server name
	"everything__e\u0301cho",     // combining accent
	"everything\u2010\u2010echo", // hyphens
	"everything::echo",
	"everything/echo",
	"everything.echo",
	"everything__get-env",
	"everything__get_env",
	"everything__GET-ENV",
	"everything__get-env ",
	"everything__*",
	"everything__.*",
	"*",
}

func TestGateBypassAttempts(t *testing.T) {
	t.Parallel()
	cs, logs := startStdio(t, coreConfig(t, everythingOnly()))
	args := map[string]any{"message": "bypass"}

	wantRefused(t, "everything__echo before search", callTool(t, cs, "everything__echo", args), "search_tools")
	for _, name := range lookalikes {
		res := callTool(t, cs, name, args)
		if !res.IsError {
			t.Errorf("before search: %q was called: %s", name, text(res))
		}
	}

	// Search for echo only.
	if got := search(t, cs, "echo a message back", 1); !slices.Equal(got, []string{"everything__echo"}) {
		t.Fatalf("search for echo (top_k 1) = %v, want [everything__echo]", got)
	}
	wantOK(t, "everything__echo after search", callTool(t, cs, "everything__echo", args), "bypass")

	for _, name := range lookalikes {
		res := callTool(t, cs, name, args)
		if !res.IsError {
			t.Errorf("after searching for echo: %q was called: %s", name, text(res))
		} else if strings.Contains(text(res), "Echo: ") {
			t.Errorf("after searching for echo: %q reached the upstream: %s", name, text(res))
		}
	}
	// A tool of the same server that search did not return stays closed.
	wantRefused(t, "get-env after searching for echo", callTool(t, cs, "everything__get-env", map[string]any{}), "search_tools")
	wantRefused(t, "get-sum after searching for echo", callTool(t, cs, "everything__get-sum", map[string]any{"a": 1, "b": 2}), "search_tools")

	// A search that returns nothing opens nothing.
	if got := search(t, cs, "zzqx qwv xyzzy", 5); len(got) != 0 {
		t.Fatalf("nonsense search returned %v", got)
	}
	wantRefused(t, "get-env after an empty search", callTool(t, cs, "everything__get-env", map[string]any{}), "search_tools")

	// The gate is keyed by exact name, so searching for the env tool opens
	// that one tool and nothing spelled like it.
	if got := search(t, cs, "print environment variables", 1); !slices.Equal(got, []string{"everything__get-env"}) {
		t.Fatalf("search for env (top_k 1) = %v, want [everything__get-env]", got)
	}
	wantOK(t, "get-env after its search", callTool(t, cs, "everything__get-env", map[string]any{}), "PATH")
	for _, name := range []string{"everything__GET-ENV", "everything__get-env ", "everything__get_env"} {
		if res := callTool(t, cs, name, map[string]any{}); !res.IsError {
			t.Errorf("%q was called: %s", name, text(res))
		}
	}
	// The meta-tools are not upstream tools.
	for _, name := range []string{"search_tools", "call_tool", "load_mcp_server", "toolgate__search_tools"} {
		wantRefused(t, "call_tool on "+name, callTool(t, cs, name, map[string]any{"query": "x"}))
	}
	noPanic(t, logs.String())
}
