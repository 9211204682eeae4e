package remote

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// sseEvent is one server-sent event: its "event:" name ("" for a plain
// message) and its data lines joined with "\n". errorField is set when the
// event came as llama-server's non-standard "error: {...}" line.
type sseEvent struct {
	name       string
	data       string
	errorField bool
}

// errEventTooLarge: one line or event is over the limit.
var errEventTooLarge = errors.New("an event is larger than the limit")

// errStreamTooLarge: the whole stream is over the limit.
var errStreamTooLarge = errors.New("the stream is larger than the limit")

// sseReader reads events as the text/event-stream format defines them
// (lines ended by LF or CRLF; "field: value", one optional space after
// the colon; a blank line ends an event; lines starting with ":" are
// comments), with limits on an event's size and the stream's.
type sseReader struct {
	r        *bufio.Reader
	maxEvent int
	maxTotal int64
	total    int64
}

func newSSEReader(r io.Reader, maxEvent int, maxTotal int64) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 16<<10), maxEvent: maxEvent, maxTotal: maxTotal}
}

// line reads one line without its end; io.EOF only when nothing was read.
// A last line without an end is returned with a nil error, as a line.
func (s *sseReader) line() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		s.total += int64(len(chunk))
		if s.total > s.maxTotal {
			return nil, errStreamTooLarge
		}
		if len(buf)+len(chunk) > s.maxEvent {
			return nil, errEventTooLarge
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			buf = buf[:len(buf)-1]
			return bytes.TrimSuffix(buf, []byte{'\r'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return bytes.TrimSuffix(buf, []byte{'\r'}), nil
		default:
			return nil, err
		}
	}
}

// next returns the next event with data. At the end of the input it
// returns io.EOF; an event the input stops in the middle of is dropped
// (as the format says) and reported as io.ErrUnexpectedEOF.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data []byte
	pending := false
	for {
		line, err := s.line()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if pending {
					return sseEvent{}, io.ErrUnexpectedEOF
				}
				return sseEvent{}, io.EOF
			}
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if pending {
				ev.data = string(bytes.TrimSuffix(data, []byte{'\n'}))
				return ev, nil
			}
			ev = sseEvent{} // an event name with no data dispatches nothing
			continue
		}
		if line[0] == ':' {
			continue // a comment (keep-alive)
		}
		field, value, found := bytes.Cut(line, []byte{':'})
		if found {
			value = bytes.TrimPrefix(value, []byte{' '})
		}
		switch string(field) {
		case "data", "error":
			data = append(data, value...)
			data = append(data, '\n')
			if len(data) > s.maxEvent {
				return sseEvent{}, errEventTooLarge
			}
			pending = true
			ev.errorField = ev.errorField || string(field) == "error"
		case "event":
			ev.name = string(value)
		}
		// id, retry and unknown fields are ignored.
	}
}
