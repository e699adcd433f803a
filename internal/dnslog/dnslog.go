// Package dnslog connects the data plane to the query log: Logger
// implements dataplane.QueryLogger and hands each record to a
// querylog.Writer without blocking. It sits outside internal/querylog so
// that the query log (and the REST API that reads it) never reaches the
// data plane (test/arch guards this).
//
// The data plane's log stage pays one fixed-size copy into a bounded
// channel and nothing else: turning a record into a querylog.Row (the name
// in presentation form, the client address as text, type and rcode
// mnemonics: a few allocations and most of a microsecond) happens on the
// Logger's own goroutine, which runs beside the writer, not on the
// goroutine answering DNS. When the channel is full the record is dropped
// and counted, never waited for.
package dnslog

import (
	"context"
	"errors"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/internal/querylog"
)

// Sink receives rows; *querylog.Writer implements it.
type Sink interface {
	Enqueue(r querylog.Row) bool
}

// batchSink is implemented by sinks that take many rows under one lock
// (*querylog.Writer); it returns how many it took.
type batchSink interface {
	EnqueueRows(rows []querylog.Row) int
}

// dropCounter is implemented by sinks that count rows dropped before they
// reached them (*querylog.Writer: service_querylog_dropped_rows_total).
type dropCounter interface{ CountDropped() }

// behinder is implemented by sinks that report a backlog
// (*querylog.Writer: it is late for the batch it was woken for).
type behinder interface{ Behind() bool }

// enabler is implemented by sinks that can be switched off
// (querylog.enabled); records are not even handed over while off.
type enabler interface{ Enabled() bool }

// flusher is implemented by sinks that can wait for rows to be written.
type flusher interface {
	Flush(ctx context.Context) error
}

// DefaultBuffer is how many records wait for conversion: about 2 MB.
const DefaultBuffer = 4096

// Logger is a dataplane.QueryLogger.
//
// Log appends the record to a buffer under a mutex held for the copy only;
// the converting goroutine swaps the buffer for an empty one and turns the
// records into rows away from the DNS path. It is woken when the first
// record arrives while it sleeps and when the buffer is half full, so a busy
// server pays no goroutine wake-up per query.
type Logger struct {
	sink    Sink
	enabled func() bool
	behind  func() bool   // the sink's backlog (false when it has none to report)
	kick    chan struct{} // capacity 1
	flushes chan chan struct{}
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	dropped atomic.Int64

	conv  converter      // the converting goroutine's
	batch batchSink      // the sink's batch hand-off, nil when it has none
	rows  []querylog.Row // converted rows waiting for batch, at most convChunk

	mu    sync.Mutex
	buf   []dataplane.QueryRecord
	idle  bool   // the converter waits for a kick
	seq   uint32 // records logged, for yieldEvery
	spare []dataplane.QueryRecord
	// max bounds len(buf). buf and spare start small and grow to it by
	// append: a node that logs a few queries a second does not hold two
	// full buffers (2 x 4096 records, ~4 MiB) from the start (issue #27
	// item 4).
	max int
}

var _ dataplane.InPlaceLogger = (*Logger)(nil)

// New returns a Logger writing to sink and starts its converting goroutine;
// Close stops it.
func New(sink Sink) *Logger { return NewBuffered(sink, DefaultBuffer) }

// NewBuffered is New with a buffer of n records.
func NewBuffered(sink Sink, n int) *Logger {
	if n <= 0 {
		n = DefaultBuffer
	}
	l := &Logger{sink: sink, kick: make(chan struct{}, 1), flushes: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}),
		buf: make([]dataplane.QueryRecord, 0, min(n, 64)), spare: make([]dataplane.QueryRecord, 0, min(n, 64)), max: n}
	l.enabled = func() bool { return true }
	if e, ok := sink.(enabler); ok {
		l.enabled = e.Enabled
	}
	l.batch, _ = sink.(batchSink)
	l.behind = func() bool { return false }
	if b, ok := sink.(behinder); ok {
		l.behind = b.Behind
	}
	go l.run()
	return l
}

// Enabled reports whether records are taken (the sink's querylog.enabled):
// the data plane builds no record while it is false.
func (l *Logger) Enabled() bool { return l.enabled() }

// Log copies the record for the converting goroutine; it never blocks on
// the sink and drops (and counts) the record when the buffer is full.
func (l *Logger) Log(rec dataplane.QueryRecord) {
	l.log(nil, &rec)
}

// LogFrom is Log with the record written by src straight into the buffer
// (dataplane.InPlaceLogger), under the lock Log holds for its copy. The
// slot is zero: drain clears every record it has converted.
func (l *Logger) LogFrom(src dataplane.RecordSource) {
	l.log(src, nil)
}

// log adds rec, or the record src fills, to the buffer.
func (l *Logger) log(src dataplane.RecordSource, rec *dataplane.QueryRecord) {
	if !l.enabled() {
		return
	}
	l.mu.Lock()
	n := len(l.buf)
	if n == l.max {
		l.mu.Unlock()
		l.drop()
		return
	}
	if src != nil {
		var slot *dataplane.QueryRecord
		l.buf, slot = extend(l.buf)
		src.FillRecord(slot)
	} else {
		l.buf = append(l.buf, *rec)
	}
	wake := (n == 0 && l.idle) || n+1 == l.max/2
	if wake {
		l.idle = false
	}
	l.seq++
	check := l.seq%yieldEvery == 0
	l.mu.Unlock()
	if wake {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	// A DNS goroutine that always finds packets waiting gives up its P
	// only when preempted (every 10 ms); with GOMAXPROCS 1 the converter
	// and the writer then fall behind and rows are dropped. While the
	// converter's buffer is more than half full or the writer reports a
	// backlog, every yieldEvery-th record yields the core to them: answers
	// slow a little instead of the log losing rows.
	if check && (n+1 >= l.max/2 || l.behind()) {
		runtime.Gosched()
	}
}

// yieldEvery is how often (in records) Log checks for a backlog: a yield
// costs about as much as a tenth of a logged row, and the writer, whose
// SQLite calls can each lose the core to the DNS loop, needs it often.
const yieldEvery = 8

func (l *Logger) drop() {
	l.dropped.Add(1)
	if d, ok := l.sink.(dropCounter); ok {
		d.CountDropped()
	}
}

// Dropped is how many records were dropped because the buffer was full.
func (l *Logger) Dropped() int64 { return l.dropped.Load() }

// drain converts everything buffered so far; it reports whether there was
// anything.
func (l *Logger) drain() bool {
	l.mu.Lock()
	batch := l.buf
	l.buf, l.spare = l.spare[:0], nil
	l.mu.Unlock()
	for i := range batch {
		if l.batch == nil {
			l.sink.Enqueue(l.conv.convert(&batch[i]))
		} else {
			// Converted in place: a Row is 330 bytes, returned and then
			// appended it was copied twice.
			var r *querylog.Row
			l.rows, r = extend(l.rows)
			l.conv.convertInto(&batch[i], r)
			if len(l.rows) == convChunk {
				l.handOff()
			}
		}
		batch[i] = dataplane.QueryRecord{} // drop references to old strings
	}
	if len(l.rows) > 0 {
		l.handOff()
	}
	l.mu.Lock()
	l.spare = batch[:0]
	l.mu.Unlock()
	return len(batch) > 0
}

// extend returns s one element longer and that element, which keeps what
// the spare capacity held (appending a zero value instead wrote a 520-byte
// record or a 330-byte row that the caller overwrites). The record buffer's
// spare elements are zero: drain clears each record it has converted.
func extend[T any](s []T) ([]T, *T) {
	if len(s) < cap(s) {
		s = s[:len(s)+1]
	} else {
		var zero T
		s = append(s, zero)
	}
	return s, &s[len(s)-1]
}

// convChunk is how many converted rows are handed to a batch sink at a
// time: one lock per chunk instead of per row, and a chunk buffer of
// about 80 KiB.
const convChunk = 256

// handOff gives l.rows to the batch sink; what it does not take it has
// counted as dropped.
func (l *Logger) handOff() {
	l.batch.EnqueueRows(l.rows)
	clear(l.rows)
	l.rows = l.rows[:0]
}

func (l *Logger) run() {
	defer close(l.done)
	for {
		if l.drain() {
			continue
		}
		l.mu.Lock()
		if len(l.buf) > 0 {
			l.mu.Unlock()
			continue
		}
		l.idle = true
		l.mu.Unlock()
		select {
		case <-l.kick:
		case b := <-l.flushes:
			l.drain()
			close(b)
		case <-l.stop:
			l.drain()
			return
		}
	}
}

var errClosed = errors.New("dnslog: closed")

// Flush waits until every record logged before the call has reached the
// sink and, when the sink can (the querylog.Writer), has been written.
func (l *Logger) Flush(ctx context.Context) error {
	b := make(chan struct{})
	select {
	case l.flushes <- b:
	case <-l.done:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-b:
	case <-ctx.Done():
		return ctx.Err()
	}
	if f, ok := l.sink.(flusher); ok {
		return f.Flush(ctx)
	}
	return nil
}

// Close hands the buffered records to the sink and stops the goroutine.
// Records logged afterwards are dropped. It does not close the sink.
func (l *Logger) Close() error {
	l.once.Do(func() { close(l.stop) })
	<-l.done
	return nil
}

// maxClients bounds a converter's map of client addresses.
const maxClients = 1 << 12

// converter turns records into rows on the Logger's goroutine. It keeps the
// text of recent client addresses (a few clients send most queries), so a
// client seen again costs a map lookup instead of formatting its address.
// Names are not kept: a map of recent names costs more in cache misses
// than the one allocation of a name's text it saves (BenchmarkLogPipeline).
type converter struct {
	clients map[netip.Addr]string
	buf     []byte
	// The previous record's client and its text: most records come in
	// runs of one client, and hashing a netip.Addr (a generic map key
	// with a pointer) cost more than formatting the row's name.
	last    netip.Addr
	lastStr string
}

// convert turns a data-plane record into a row.
func (c *converter) convert(rec *dataplane.QueryRecord) querylog.Row {
	var r querylog.Row
	c.convertInto(rec, &r)
	return r
}

// convertInto is convert into *r.
func (c *converter) convertInto(rec *dataplane.QueryRecord, r *querylog.Row) {
	// Cleared in place and set field by field: a literal with fields was
	// built in a temporary and copied over *r, the copy stalling on the
	// stores of its fields (as dataplane's Query.reset did).
	*r = querylog.Row{}
	r.Time, r.Node, r.ClientName, r.ClientID = rec.Time, rec.Node, rec.ClientName, rec.ClientID
	r.Domain, r.QType, r.Rcode = c.domain(rec), dataplane.TypeString(rec.Type), dataplane.RcodeString(rec.Rcode)
	r.Status, r.Reason = rec.Status.String(), rec.Reason.String()
	r.List, r.Policy, r.Upstream, r.Zone = rec.List, rec.Policy, rec.Upstream, rec.Zone
	r.Transport, r.Duration = rec.Transport.String(), rec.Duration
	if rec.Client.IsValid() {
		r.Client = c.client(rec.Client.Addr().Unmap())
	}
	if len(rec.Groups) > 0 {
		r.Group = rec.Groups[0]
	}
	switch {
	case rec.RuleIsName && rec.RulePre == "" && rec.RulePost == "":
		r.Rule = r.Domain // the same string: the block encoder compares pointers first
	case rec.RuleIsName:
		r.Rule = rec.RulePre + r.Domain + rec.RulePost
	default:
		r.Rule = rec.RuleText()
	}
}

// domain is querylog.NormalizeDomain(rec.Name()) in one allocation: the
// record's name is lower-case wire form, so its presentation needs only the
// trailing dot cut.
func (c *converter) domain(rec *dataplane.QueryRecord) string {
	b := rec.AppendName(c.buf[:0])
	c.buf = b
	if len(b) > 1 && b[len(b)-1] == '.' {
		b = b[:len(b)-1]
	}
	return string(b)
}

func (c *converter) client(a netip.Addr) string {
	if a == c.last && c.lastStr != "" {
		return c.lastStr
	}
	s := c.lookupClient(a)
	c.last, c.lastStr = a, s
	return s
}

func (c *converter) lookupClient(a netip.Addr) string {
	if s, ok := c.clients[a]; ok {
		return s
	}
	s := a.String()
	if c.clients == nil || len(c.clients) >= maxClients {
		c.clients = make(map[netip.Addr]string, 64)
	}
	c.clients[a] = s
	return s
}
