// Package all links in every built-in extension. It is the single list of
// what ships; each line is a blank import that registers one config key.
package all

import (
	_ "github.com/toolgate/toolgate/extensions/access_control"   // access_control
	_ "github.com/toolgate/toolgate/extensions/cross_server"     // cross_server
	_ "github.com/toolgate/toolgate/extensions/guardrails"       // guardrails
	_ "github.com/toolgate/toolgate/extensions/load_control"     // load_control
	_ "github.com/toolgate/toolgate/extensions/name_similarity"  // name_similarity
	_ "github.com/toolgate/toolgate/extensions/output_poisoning" // output_poisoning
	_ "github.com/toolgate/toolgate/extensions/rate_limits"      // rate_limits
	_ "github.com/toolgate/toolgate/extensions/rego_policy"      // rego_policy
	_ "github.com/toolgate/toolgate/extensions/shadowing"        // shadowing
	_ "github.com/toolgate/toolgate/extensions/tool_poisoning"   // tool_poisoning
	_ "github.com/toolgate/toolgate/extensions/version_pinning"  // version_pinning
)
