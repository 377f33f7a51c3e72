package gateway

import (
	"github.com/toolgate/toolgate/extension"
	"github.com/toolgate/toolgate/internal/relay"
)

// resultIsError is a result's isError for the tool_called record. A result
// still in the upstream's bytes is not decoded for it when relay.PlainResult
// takes them (such bytes decode, so the call did not fail); any other is
// decoded, and one that does not decode is the upstream's failure, as it
// always was.
func resultIsError(out *extension.CallResult) (bool, error) {
	if raw, ok := out.Raw(); ok {
		if isError, plain := relay.PlainResult(raw); plain {
			return isError, nil
		}
	}
	res, err := out.Result()
	if err != nil {
		return false, err
	}
	return res.IsError, nil
}
