package toolgate.no_close_issue_test

import data.toolgate.no_close_issue

test_update_title_allowed if {
	no_close_issue.allow with input as {"tool_name": "github__update_issue", "arguments": {"issue_number": 7, "title": "new title"}}
}

test_reopen_allowed if {
	no_close_issue.allow with input as {"tool_name": "github__update_issue", "arguments": {"issue_number": 7, "state": "open"}}
}

test_close_denied if {
	not no_close_issue.allow with input as {"tool_name": "github__update_issue", "arguments": {"issue_number": 7, "state": "closed"}}
}

test_close_any_case_denied if {
	not no_close_issue.allow with input as {"tool_name": "gh__update_issue", "arguments": {"state": "CLOSED"}}
}

test_issue_write_close_denied if {
	not no_close_issue.allow with input as {"tool_name": "github__issue_write", "arguments": {"method": "update", "state": "closed"}}
}

test_close_issue_tool_denied if {
	not no_close_issue.allow with input as {"tool_name": "github__close_issue", "arguments": {}}
}

test_other_tools_allowed if {
	no_close_issue.allow with input as {"tool_name": "github__create_issue", "arguments": {"state": "closed"}}
}

test_reason_given if {
	contains(no_close_issue.deny_reason, "closing issues") with input as {"tool_name": "github__update_issue", "arguments": {"state": "closed"}}
}
