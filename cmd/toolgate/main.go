// Command toolgate is the MCP gateway. See the README for usage.
package main

import (
	"github.com/toolgate/toolgate/cli"
	_ "github.com/toolgate/toolgate/extensions/all"
)

func main() { cli.Main() }
