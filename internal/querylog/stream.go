package querylog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrSlowClient ends a stream whose reader fell behind its buffer.
var ErrSlowClient = errors.New("querylog: stream reader too slow; reconnect with Last-Event-ID")

// errOverflow: the subscription overflowed while fn kept up (a replay hand-over).
var errOverflow = errors.New("querylog: subscription overflowed")

// Stream calls fn for every row with id > after in id order: first the
// stored rows (replay), then live rows, without gaps or duplicates. after
// < 0 starts live. f filters rows (nil: all). It returns when ctx ends, fn
// fails, the writer closes, or a live reader falls behind (ErrSlowClient).
func (w *Writer) Stream(ctx context.Context, after int64, buf int, f *Filter, fn func(Row) error) error {
	return w.stream(ctx, after, buf, f, fn, w.broker.Subscribe(buf))
}

// stream is Stream with its first subscription already made (the HTTP
// handler makes it before it answers, so a client that has the answer's
// headers misses no row committed after them).
func (w *Writer) stream(ctx context.Context, after int64, buf int, f *Filter, fn func(Row) error, sub *Subscription) error {
	if f == nil {
		f = &Filter{}
	}
	last := after
	for {
		// Subscribe before reading the database: every row committed after
		// the read is on the subscription, every row before it in the file.
		if sub == nil {
			sub = w.broker.Subscribe(buf)
		}
		if last >= 0 && w.store != nil {
			var err error
			if last, err = w.replay(ctx, last, f, fn); err != nil {
				sub.Close()
				return err
			}
		}
		err := w.live(ctx, sub, &last, f, fn)
		sub.Close()
		sub = nil
		if errors.Is(err, errOverflow) {
			if last < 0 || w.store == nil || w.closed.Load() {
				return ErrSlowClient
			}
			// Fell behind during the replay hand-over: the rows are in the file.
			if err := w.catchUpGuard(ctx); err != nil {
				return err
			}
			continue
		}
		return err
	}
}

// catchUpGuard waits briefly so a resubscribe loop cannot spin.
func (w *Writer) catchUpGuard(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Millisecond):
		return nil
	}
}

// replay calls fn for the stored rows with id > last that pass f, in id
// order, block by block.
func (w *Writer) replay(ctx context.Context, last int64, f *Filter, fn func(Row) error) (int64, error) {
	st := w.store
	var r Row
	for {
		b, err := st.blockAtOrAfter(ctx, &st.rstmts, last+1)
		if err != nil {
			return last, fmt.Errorf("stream replay: %w", err)
		}
		if b == nil {
			return last, nil
		}
		for id := max(last+1, b.first); id <= b.last; id++ {
			b.row(id, &r)
			last = id
			if st.cut.visible(&r) && f.Match(&r) {
				if err := fn(r); err != nil {
					return last, err
				}
			}
		}
	}
}

func (w *Writer) live(ctx context.Context, sub *Subscription, last *int64, f *Filter, fn func(Row) error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r, ok := <-sub.C:
			if !ok {
				if sub.Overflowed() {
					return errOverflow
				}
				return nil // writer closed
			}
			if r.ID <= *last {
				continue // already replayed
			}
			*last = r.ID
			if f.Match(&r) {
				if err := fn(r); err != nil {
					return err
				}
			}
		}
	}
}

// StreamOptions tune the SSE handler.
type StreamOptions struct {
	Heartbeat time.Duration // comment line interval; default 15s
	Buffer    int           // rows buffered per client; default 1024
	// SlowAfter disconnects a client whose buffer stays full this long; default 5s.
	SlowAfter time.Duration
}

// StreamHandler serves GET /queries/stream: text/event-stream with one
// event per row (`id:` the row id, `data:` a QueryItem as JSON), comment
// heartbeats, resume after `Last-Event-ID` (header, or the `last_event_id`
// query parameter for first connects). The list filters apply. A client
// that cannot keep up with its buffer is disconnected.
func (w *Writer) StreamHandler(opts StreamOptions) http.Handler {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 1024
	}
	if opts.SlowAfter <= 0 {
		opts.SlowAfter = 5 * time.Second
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet {
			rw.Header().Set("Allow", "GET")
			http.Error(rw, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		f, err := ParseFilter(req.URL.Query())
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		after := int64(-1)
		lid := req.Header.Get("Last-Event-ID")
		if lid == "" {
			lid = req.URL.Query().Get("last_event_id")
		}
		if lid = strings.TrimSpace(lid); lid != "" {
			if after, err = strconv.ParseInt(lid, 10, 64); err != nil || after < 0 {
				http.Error(rw, "bad Last-Event-ID", http.StatusBadRequest)
				return
			}
		}
		// Subscribed before the headers go out: rows committed once the
		// client has them all reach it.
		sub := w.broker.Subscribe(opts.Buffer)
		rc := http.NewResponseController(rw)
		h := rw.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		rw.WriteHeader(http.StatusOK)
		if _, err := rw.Write([]byte(": stream\nretry: 2000\n\n")); err != nil {
			sub.Close()
			return
		}
		_ = rc.Flush()
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		// One goroutine writes: rows and heartbeats go through it.
		events := make(chan []byte, opts.Buffer)
		errc := make(chan error, 1)
		go func() {
			errc <- w.stream(ctx, after, opts.Buffer, &f, func(r Row) error {
				b, err := json.Marshal(r.Item())
				if err != nil {
					return err
				}
				ev := fmt.Appendf(nil, "id: %d\ndata: %s\n\n", r.ID, b)
				select {
				case events <- ev:
					return nil
				default:
				}
				t := time.NewTimer(opts.SlowAfter)
				defer t.Stop()
				select {
				case events <- ev:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				case <-t.C:
					return ErrSlowClient
				}
			}, sub)
			close(events)
		}()
		hb := time.NewTicker(opts.Heartbeat)
		defer hb.Stop()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return
				}
				_ = rc.SetWriteDeadline(time.Now().Add(opts.Heartbeat))
				if _, err := rw.Write(ev); err != nil {
					return
				}
				// Write what else is queued before flushing.
				for more := true; more; {
					select {
					case ev, ok := <-events:
						if !ok {
							_ = rc.Flush()
							return
						}
						if _, err := rw.Write(ev); err != nil {
							return
						}
					default:
						more = false
					}
				}
				if err := rc.Flush(); err != nil {
					return
				}
			case <-hb.C:
				_ = rc.SetWriteDeadline(time.Now().Add(opts.Heartbeat))
				if _, err := rw.Write([]byte(": ping\n\n")); err != nil {
					return
				}
				if err := rc.Flush(); err != nil {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	})
}
