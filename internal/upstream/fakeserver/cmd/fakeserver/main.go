// Command fakeserver runs internal/upstream/fakeserver over stdio, for the
// end-to-end lifecycle tests.
package main

import "github.com/toolgate/toolgate/internal/upstream/fakeserver"

func main() { fakeserver.Main() }
