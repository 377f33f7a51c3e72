# deny_dangerous: refuse every tool whose name says "delete" or "drop";
# allow everything else.
#
# Configure with  "filters": {"rego_policy": "policies/deny_dangerous.rego"}
#
# toolgate queries data.<this package>.allow for every call_tool, with input
#   {"tool_name": "github__delete_repo", "server_name": "github", "tool": "delete_repo",
#    "arguments": {...}, "session": "...", "principal": "..."}
# and shows deny_reason (if defined) to the LLM when allow is not true.
package toolgate.deny_dangerous

default allow := false

allow if not dangerous

dangerous_words := {"delete", "drop"}

# The words of a name: runs of letters and digits, split at '_', '-', '.'
# and at camelCase humps, lower-cased: "github__deleteRepo" is
# {"github", "delete", "repo"}. So "drop_table" is dangerous and
# "dropdown_select" is not.
words contains lower(w) if {
	some w in regex.find_n(`[A-Z]?[a-z0-9]+|[A-Z]+`, input.tool_name, -1)
}

dangerous if {
	some w in words
	w in dangerous_words
}

deny_reason := "tools that delete or drop data are disabled by the gateway's policy" if dangerous
