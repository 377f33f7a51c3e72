// Package egress polices what a stdio MCP server may connect to.
//
// In monitor mode the server is handed an HTTP/HTTPS forward proxy (CONNECT
// for TLS, absolute-URI forwarding for plain HTTP, no TLS interception)
// through HTTP_PROXY and friends. The proxy admits a host:port only if the
// server's allow list names it, checks again every address it is about to
// dial (a name never reaches loopback, link-local, metadata or private
// addresses unless the list names that address), and reports every
// connection. A server that ignores the proxy variables still connects
// directly.
//
// In enforce mode (Linux) the server runs in a network namespace of its own
// that holds only a loopback interface, whose one listening socket is the
// proxy's: a server that ignores the proxy variables, opens raw sockets or
// does its own DNS reaches nothing. See netns_linux.go for the mechanism.
package egress
