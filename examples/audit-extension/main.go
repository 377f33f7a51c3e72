// Command audit-toolgate is toolgate with one extra extension of your own:
// an audit log that writes one JSON line per call_tool to a file. It shows
// how to add extensions without forking toolgate: import the public
// packages, build your extension, and call cli.Main with it.
//
//	go build -o audit-toolgate .
//	TOOLGATE_AUDIT_LOG=/tmp/audit.jsonl ./audit-toolgate serve --config ../config.json
//
// Without TOOLGATE_AUDIT_LOG the log goes to audit.jsonl in the state
// directory (--state-dir).
package main

import (
	"github.com/toolgate/toolgate/cli"
	_ "github.com/toolgate/toolgate/extensions/all" // the built-in filters: access_control, load_control, rego_policy
)

func main() {
	cli.Main(&Audit{})
}
