package llmproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// event is one server-sent event: its raw bytes (every line, terminators
// and the blank line included) as received, so an event passed through is
// byte for byte what the provider sent, plus its name and data.
type event struct {
	raw  []byte
	name string
	data []byte
}

// errEventTooLarge is a line or event beyond the configured bound.
var errEventTooLarge = errors.New("server-sent event larger than max_event_bytes")

// sseReader reads events line by line with a bounded buffer: an event
// never holds more than max bytes.
type sseReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// next returns the next event. Its slices are valid until the following
// call. At the end of the stream it returns io.EOF; a last event without
// its blank line is returned first. Blank lines between events come back
// as events with only raw set, so that nothing received is lost.
func (s *sseReader) next() (event, error) {
	s.buf = s.buf[:0]
	var e event
	dataStart, dataEnd := -1, -1
	var multi []byte
	for {
		off := len(s.buf)
		err := s.appendLine()
		if err != nil && err != io.EOF {
			return event{}, err
		}
		line := s.buf[off:]
		if len(line) == 0 { // io.EOF
			if off == 0 {
				return event{}, io.EOF
			}
			break
		}
		body := bytes.TrimRight(line, "\r\n")
		if len(body) == 0 {
			break
		}
		field, value, found := bytes.Cut(body, []byte(":"))
		vstart := off + len(body)
		if found {
			vstart = off + len(field) + 1
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
				vstart++
			}
		} else {
			value = nil
		}
		switch string(field) {
		case "event":
			e.name = eventName(value)
		case "data":
			switch {
			case dataStart < 0:
				dataStart, dataEnd = vstart, vstart+len(value)
			case multi == nil:
				multi = append(append(append([]byte{}, s.buf[dataStart:dataEnd]...), '\n'), value...)
			default:
				multi = append(append(multi, '\n'), value...)
			}
		}
		if err == io.EOF {
			break
		}
	}
	e.raw = s.buf
	switch {
	case multi != nil:
		e.data = multi
	case dataStart >= 0:
		e.data = s.buf[dataStart:dataEnd]
	}
	return e, nil
}

// appendLine appends one line, its terminator included, to s.buf, keeping
// the event within the bound.
func (s *sseReader) appendLine() error {
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(s.buf)+len(chunk) > s.max {
			return errEventTooLarge
		}
		s.buf = append(s.buf, chunk...)
		if err != bufio.ErrBufferFull {
			return err
		}
	}
}

// formatEvent renders an event with one data line (data must hold no
// newline; JSON from encoding/json never does).
func formatEvent(name string, data []byte) []byte {
	var b bytes.Buffer
	if name != "" {
		fmt.Fprintf(&b, "event: %s\n", name)
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return b.Bytes()
}

// eventName returns the providers' event names without allocating.
func eventName(b []byte) string {
	switch string(b) {
	case "content_block_delta":
		return "content_block_delta"
	case "content_block_start":
		return "content_block_start"
	case "content_block_stop":
		return "content_block_stop"
	case "message_start":
		return "message_start"
	case "message_delta":
		return "message_delta"
	case "message_stop":
		return "message_stop"
	case "ping":
		return "ping"
	case "response.output_text.delta":
		return "response.output_text.delta"
	case "response.function_call_arguments.delta":
		return "response.function_call_arguments.delta"
	}
	return string(b)
}
