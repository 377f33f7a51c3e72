// Command hostilehttp is a hostile MCP server over streamable HTTP, for
// tests: its "huge" tool answers with a result of any size, streamed without
// ever holding it in memory (so a test can send hundreds of megabytes
// cheaply), and its "headers" tool echoes the request headers it received.
// It speaks just enough JSON-RPC by hand to get there.
//
//	hostilehttp [-listen 127.0.0.1:0] [-sse] [-content-length]
//
// It prints its URL (http://ADDR/mcp) on stdout once it listens. -sse
// answers calls as a text/event-stream with one event, the default is
// application/json; -content-length sends the JSON answer with its length
// rather than chunked.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	sse := flag.Bool("sse", false, "answer calls with text/event-stream")
	withLength := flag.Bool("content-length", false, "send JSON answers with a Content-Length")
	flag.Parse()
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	h := &handler{sse: *sse, withLength: *withLength}
	log.Fatal(http.Serve(ln, h))
}

type handler struct {
	sse, withLength bool
}

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	} `json:"params"`
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	var req request
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	if len(req.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	switch req.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "hostile-session")
		h.answer(w, req.ID, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"hostilehttp","version":"1"}}`)
	case "tools/list":
		h.answer(w, req.ID, `{"tools":[`+
			`{"name":"huge","description":"Returns a text result of the given size in bytes.","inputSchema":{"type":"object","properties":{"bytes":{"type":"number"}}}},`+
			`{"name":"headers","description":"Returns the HTTP request headers the server received.","inputSchema":{"type":"object"}}]}`)
	case "tools/call":
		switch req.Params.Name {
		case "huge":
			n, _ := req.Params.Arguments["bytes"].(float64)
			h.huge(w, req.ID, int64(n))
		case "headers":
			var lines []string
			for k, v := range r.Header {
				lines = append(lines, k+": "+strings.Join(v, ","))
			}
			sort.Strings(lines)
			text, _ := json.Marshal(strings.Join(lines, "\n"))
			h.answer(w, req.ID, `{"content":[{"type":"text","text":`+string(text)+`}]}`)
		default:
			h.answer(w, req.ID, `{"content":[{"type":"text","text":"unknown tool"}],"isError":true}`)
		}
	default:
		h.answerRaw(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, req.ID))
	}
}

func (h *handler) answer(w http.ResponseWriter, id json.RawMessage, result string) {
	h.answerRaw(w, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result))
}

func (h *handler) answerRaw(w http.ResponseWriter, msg string) {
	if h.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, msg)
}

// huge streams {"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"aaa…"}]}}
// with n bytes of text.
func (h *handler) huge(w http.ResponseWriter, id json.RawMessage, n int64) {
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, id)
	tail := `"}]}}`
	prefix, suffix := "", ""
	if h.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		prefix, suffix = "event: message\ndata: ", "\n\n"
	} else {
		w.Header().Set("Content-Type", "application/json")
		if h.withLength {
			w.Header().Set("Content-Length", fmt.Sprint(int64(len(head)+len(tail))+n))
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(prefix + head)
	chunk := []byte(strings.Repeat("a", 64<<10))
	for left := n; left > 0; {
		k := min(left, int64(len(chunk)))
		if _, err := bw.Write(chunk[:k]); err != nil {
			return // the client went away
		}
		left -= k
	}
	bw.WriteString(tail + suffix)
	bw.Flush()
}

func init() { log.SetOutput(os.Stderr) }
