// Package all links in every built-in extension. It is the single list of
// what ships; each line is a blank import that registers one config key.
package all

import (
	_ "github.com/toolgate/toolgate/extensions/accesscontrol" // access_control
	_ "github.com/toolgate/toolgate/extensions/extmcp"        // guardrails
	_ "github.com/toolgate/toolgate/extensions/flow"          // cross_server
	_ "github.com/toolgate/toolgate/extensions/loadcontrol"   // load_control
	_ "github.com/toolgate/toolgate/extensions/outputpoison"  // output_poisoning
	_ "github.com/toolgate/toolgate/extensions/pin"           // version_pinning
	_ "github.com/toolgate/toolgate/extensions/poisondef"     // tool_poisoning
	_ "github.com/toolgate/toolgate/extensions/ratelimit"     // rate_limits
	_ "github.com/toolgate/toolgate/extensions/rego"          // rego_policy
	_ "github.com/toolgate/toolgate/extensions/shadow"        // shadowing
	_ "github.com/toolgate/toolgate/extensions/typosquat"     // name_similarity
)
