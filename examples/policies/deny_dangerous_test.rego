package toolgate.deny_dangerous_test

import data.toolgate.deny_dangerous

test_read_allowed if {
	deny_dangerous.allow with input as {"tool_name": "filesystem__read_file", "arguments": {"path": "a"}}
}

test_delete_denied if {
	not deny_dangerous.allow with input as {"tool_name": "github__delete_repo", "arguments": {}}
}

test_drop_denied if {
	not deny_dangerous.allow with input as {"tool_name": "db__drop_table", "arguments": {}}
}

test_camel_case_denied if {
	not deny_dangerous.allow with input as {"tool_name": "files__deleteFile", "arguments": {}}
}

test_upper_case_denied if {
	not deny_dangerous.allow with input as {"tool_name": "db__DROP_TABLE", "arguments": {}}
}

test_word_inside_another_allowed if {
	deny_dangerous.allow with input as {"tool_name": "ui__dropdown_select", "arguments": {}}
}

test_reason_given if {
	deny_dangerous.deny_reason == "tools that delete or drop data are disabled by the gateway's policy" with input as {"tool_name": "github__delete_repo"}
}

test_no_reason_when_allowed if {
	not deny_dangerous.deny_reason with input as {"tool_name": "github__get_repo"}
}
