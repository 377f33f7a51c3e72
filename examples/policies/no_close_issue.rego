# no_close_issue: an argument-shape policy. Updating an issue is allowed,
# closing one is not, although both go through the same tool
# (github__update_issue with "state": "closed", or github__issue_write with
# "method": "update" and "state": "closed" in newer GitHub MCP servers).
# Every other tool is allowed.
#
# Configure with  "filters": {"rego_policy": "policies/no_close_issue.rego"}
package toolgate.no_close_issue

default allow := false

allow if not closes_issue

# Tools that can close an issue through their arguments, on any server.
issue_tools := {"update_issue", "issue_write"}

updates_issue if {
	some t in issue_tools
	endswith(input.tool_name, concat("", ["__", t]))
}

closes_issue if {
	updates_issue
	lower(input.arguments.state) == "closed"
}

closes_issue if endswith(input.tool_name, "__close_issue")

deny_reason := "closing issues is not allowed by the gateway's policy; other updates to the issue are" if closes_issue
