package httpadapter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// errNoBytes: the body budget has no room for bytes just received.
var errNoBytes = errors.New("no room for the request body")

// slowBodyError: the body stopped arriving, or arrives too slowly to be a
// review worth waiting for.
type slowBodyError struct {
	received int64
	idle     time.Duration // set when no byte came for this long
	rate     int64         // else the minimum rate it fell below
}

func (e *slowBodyError) Error() string {
	if e.idle > 0 {
		return fmt.Sprintf("request body stopped arriving: no byte for %v", e.idle)
	}
	return fmt.Sprintf("request body arrives too slowly: under %d bytes a second", e.rate)
}

// readBody reads r's body into buf, at most MaxBodyBytes, taking the body
// budget for each chunk as it arrives. It returns the bytes taken, which
// the caller releases once the review is answered, also on error.
//
// Each read waits at most BodyIdle for the next bytes, and no longer than
// the review's deadline: a caller cannot hold a request open with a body
// that does not arrive. Where the transport cannot set read deadlines (a
// Lambda event, whose body is already in memory), reads do not block.
func (h *Handler) readBody(ctx context.Context, w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) (held int64, err error) {
	rc := http.NewResponseController(w)
	deadline, _ := ctx.Deadline()
	idle, rate := h.limits.bodyIdle(), h.limits.minBodyRate()
	body := http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	start := time.Now()
	for {
		now := time.Now()
		next := now.Add(idle)
		if !deadline.IsZero() && deadline.Before(next) {
			next = deadline
		}
		timed := rc.SetReadDeadline(next) == nil
		if buf.Available() < 4<<10 {
			buf.Grow(max(buf.Len(), 4<<10))
		}
		chunk := buf.AvailableBuffer()
		n, rerr := body.Read(chunk[:cap(chunk)])
		if n > 0 {
			if !h.takeBytes(int64(n)) {
				return held, errNoBytes
			}
			held += int64(n)
			buf.Write(chunk[:n])
		}
		switch {
		case rerr == io.EOF:
			if timed {
				// Back to the review's deadline: the answer is written
				// under the server's own timeouts.
				rc.SetReadDeadline(time.Time{})
			}
			return held, nil
		case rerr != nil:
			// The idle deadline, not the review's (a failed read also
			// cancels the request's context, so ask the clock).
			if timed && errors.Is(rerr, os.ErrDeadlineExceeded) && time.Now().Before(deadline) {
				return held, &slowBodyError{received: held, idle: idle}
			}
			return held, rerr
		}
		if elapsed := time.Since(start); elapsed > idle && float64(held) < float64(rate)*elapsed.Seconds() {
			return held, &slowBodyError{received: held, rate: rate}
		}
	}
}
