package dataplane

import (
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// Queries that wait for an upstream (UDP cache misses) and TCP queries do
// not run on the read loop: they go to a pool of long-lived worker
// goroutines. A worker's stack grows once to what the upstream stage needs
// and is reused, where a goroutine per query paid for growing (copying) a
// fresh stack every time. See docs/dataplane.md.
const (
	// defaultMaxWorkers is Config.MaxWorkers' default: the queries that may
	// wait for an upstream at once.
	defaultMaxWorkers = 10000
	// workerIdle is how long an idle worker waits for a job before it
	// exits, so the pool shrinks back after a burst.
	workerIdle = 10 * time.Second
	// defaultMaxPendingBytes is Config.MaxPendingBytes' default: the
	// memory the queries waiting for an upstream may hold at once.
	defaultMaxPendingBytes = 64 << 20
	// pendingOverhead is what a waiting query holds besides its buffers:
	// the Query, its worker's stack (grown to what the upstream stage
	// needs) and the upstream's per-query state. An estimate, measured
	// with the flood harness (test/flood); it turns the byte budget into
	// a bound the allocator will see.
	pendingOverhead = int64(unsafe.Sizeof(Query{})) + 16<<10
	// burstWorkers: a pool that grew to this many workers and shrank to
	// an eighth of it had a burst; its end triggers one collection.
	burstWorkers = 256
)

// clientPrefix is the fairness unit of the pending budget: the client's
// /24 (IPv4) or /56 (IPv6), the blocks a single site or subscriber line
// usually gets; the first byte says which family.
type clientPrefix [8]byte

func prefixOf(a netip.Addr) clientPrefix {
	var k clientPrefix
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		k[0] = 4
		copy(k[1:4], b[:3])
		return k
	}
	b := a.As16()
	k[0] = 6
	copy(k[1:8], b[:7])
	return k
}

// pendingCost is what admitting q to a worker is charged against the
// byte budget.
func pendingCost(q *Query) int64 {
	return pendingOverhead + int64(cap(q.in)+cap(q.out))
}

// job is one query handed to a worker: a detached UDP query answered to
// addr through r, or a TCP query answered on tc.
type job struct {
	q    *Query
	r    *udpReplier
	addr netip.AddrPort
	// local: the UDP query's destination on a wildcard socket, the
	// answer's source.
	local pktInfo
	tc    *tcpConn
	cb    WireCallback // ServeWireNow's detached queries
	// What dispatch charged to the pending budget, released when the job
	// ends.
	prefix clientPrefix
	cost   int64
}

// workers is the pool. An idle worker blocks receiving on the unbuffered
// work channel, so a job is only ever handed to a worker that takes it at
// once; there is no queue in which a query could wait behind slow ones.
//
// Jobs are admitted against a budget (admit): at most max at once, at most
// maxBytes of memory (pendingCost each), and past half of either, a client
// prefix only while it holds less than half of what is still free.
type workers struct {
	work chan job
	mu   sync.Mutex
	n    int // running workers
	peak int // most workers running since the last burst ended
	max  int
	quit chan struct{}
	stop sync.Once
	wg   sync.WaitGroup

	// The pending budget, under mu.
	maxBytes int64
	jobs     int   // admitted jobs not yet finished
	bytes    int64 // their pendingCost
	prefixes map[clientPrefix]*prefixLoad
}

// prefixLoad is what one client prefix holds of the pending budget.
type prefixLoad struct {
	jobs  int
	bytes int64
}

func newWorkers(max int, maxBytes int64) *workers {
	return &workers{work: make(chan job), max: max, maxBytes: maxBytes, quit: make(chan struct{}),
		prefixes: make(map[clientPrefix]*prefixLoad)}
}

// admit charges a job of client k and cost c to the budget, or reports
// false when it does not fit: the whole budget is taken, or the pool is
// past half full and k holds half of what is still free (count or bytes).
// A prefix flooding misses fills the first half and stops there; each
// further flooding prefix takes a third of what is left; a client holding
// nothing is admitted while anything is free. Under w.mu.
func (w *workers) admit(k clientPrefix, c int64) bool {
	if w.jobs >= w.max || w.bytes+c > w.maxBytes {
		return false
	}
	p := w.prefixes[k]
	if p != nil && (w.jobs >= w.max/2 || w.bytes+c > w.maxBytes/2) &&
		(2*p.jobs >= w.max-w.jobs || 2*(p.bytes+c) > w.maxBytes-w.bytes) {
		return false
	}
	if p == nil {
		p = &prefixLoad{}
		w.prefixes[k] = p
	}
	p.jobs++
	p.bytes += c
	w.jobs++
	w.bytes += c
	return true
}

// release gives back what admit charged.
func (w *workers) release(k clientPrefix, c int64) {
	w.mu.Lock()
	w.jobs--
	w.bytes -= c
	if p := w.prefixes[k]; p != nil {
		p.jobs--
		p.bytes -= c
		if p.jobs <= 0 {
			delete(w.prefixes, k) // the map holds only prefixes with work
		}
	}
	w.mu.Unlock()
}

// Pending reports the queries waiting in workers and the bytes charged for
// them (tests, the flood harness).
func (s *Server) Pending() (jobs int, bytes int64) {
	w := s.workers
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.jobs, w.bytes
}

// dispatch admits j against the pending budget and hands it to an idle
// worker, or starts a new one. false means it did not fit: the caller
// decides (UDP sheds the query, TCP runs it on a goroutine of its own). It
// never blocks.
func (s *Server) dispatch(j job) bool {
	w := s.workers
	j.prefix, j.cost = prefixOf(j.q.Client.Addr()), pendingCost(j.q)
	w.mu.Lock()
	ok := w.admit(j.prefix, j.cost)
	w.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case w.work <- j:
		return true
	default:
	}
	w.mu.Lock()
	// Admission bounds the jobs; a worker that gave its job's budget back
	// may still be sending that answer, so a new one may start beside it.
	// Twice max bounds the goroutines (the extra ones go idle and exit).
	if w.n >= 2*w.max {
		w.mu.Unlock()
		w.release(j.prefix, j.cost)
		return false
	}
	select {
	case <-w.quit:
		w.mu.Unlock()
		w.release(j.prefix, j.cost)
		return false // shut down: no new workers
	default:
	}
	w.n++
	w.peak = max(w.peak, w.n)
	w.wg.Add(1)
	w.mu.Unlock()
	go s.worker(j)
	return true
}

// worker runs jobs until it has been idle for workerIdle or the server has
// shut down.
func (s *Server) worker(j job) {
	w := s.workers
	defer func() {
		w.mu.Lock()
		w.n--
		// A burst is over once its workers have gone idle and exited:
		// their stacks, Queries and buffers are garbage now, but with no
		// traffic no collection would run for minutes (forced GC every 2
		// min), and only a collection frees them (dead goroutines' stacks
		// and sync.Pools are released by the GC). The collections then let
		// the runtime's background scavenger return the memory to the OS.
		collect := w.peak >= burstWorkers && w.n <= w.peak/8
		if collect {
			w.peak = w.n
		}
		w.mu.Unlock()
		if collect {
			// Twice: a sync.Pool's objects survive one collection (as
			// its victim cache) and are freed by the next.
			runtime.GC()
			runtime.GC()
		}
		w.wg.Done()
	}()
	var idle *time.Timer
	for {
		s.runJob(j)
		if idle == nil {
			idle = time.NewTimer(workerIdle)
		} else {
			idle.Reset(workerIdle)
		}
		select {
		case j = <-w.work:
		case <-idle.C:
			return
		case <-w.quit:
			idle.Stop()
			return
		}
	}
}

// stopWorkers ends idle workers once every query has finished (s.wg).
func (w *workers) stopAll() {
	w.stop.Do(func() {
		w.mu.Lock()
		close(w.quit)
		w.mu.Unlock()
	})
	w.wg.Wait()
}

func (s *Server) runJob(j job) {
	switch {
	case j.tc != nil:
		j.tc.answer(s, j.q)
	case j.cb != nil:
		s.finishWire(j.q, j.cb)
	default:
		s.finishUDP(&j) // releases the budget itself, before the reply
		return
	}
	s.workers.release(j.prefix, j.cost)
}

// shed gives up on a UDP query that would wait for an upstream while the
// pending budget is taken (MaxWorkers, MaxPendingBytes, or its prefix's
// share): nothing is sent (the client retries, possibly elsewhere) and the
// query is counted and logged as dropped.
func (s *Server) shed(q *Query) {
	s.metrics.shed.Inc()
	q.detachable = false
	q.Status, q.fast, q.resp = StatusDropped, fastNone, nil
	s.stages[len(s.stages)-1].run(s, q)
}

// tcpConn is the state the queries of one TCP connection share.
type tcpConn struct {
	conn     net.Conn
	wmu      sync.Mutex
	wbuf     []byte
	inflight chan struct{}
	pending  sync.WaitGroup
}

// answer runs q and writes its answer, length-framed, on the connection.
func (t *tcpConn) answer(s *Server, q *Query) {
	defer t.pending.Done()
	defer func() { <-t.inflight }()
	s.run(q)
	if b := s.encode(q); b != nil {
		t.wmu.Lock()
		t.wbuf = binary.BigEndian.AppendUint16(t.wbuf[:0], uint16(len(b)))
		t.wbuf = append(t.wbuf, b...)
		_ = t.conn.SetWriteDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
		_, err := t.conn.Write(t.wbuf)
		t.wmu.Unlock()
		if err != nil {
			_ = t.conn.SetReadDeadline(time.Now())
		}
	}
	putQuery(q)
}

// transfer answers an AXFR or IXFR on the connection (ServeTransfer).
func (t *tcpConn) transfer(s *Server, q *Query, client netip.AddrPort) {
	defer t.pending.Done()
	defer func() { <-t.inflight }()
	msg := append([]byte(nil), q.in...)
	putQuery(q)
	var frame []byte
	write := func(b []byte) error {
		t.wmu.Lock()
		defer t.wmu.Unlock()
		frame = binary.BigEndian.AppendUint16(frame[:0], uint16(len(b)))
		frame = append(frame, b...)
		_ = t.conn.SetWriteDeadline(time.Now().Add(s.cfg.TCPIdleTimeout))
		_, err := t.conn.Write(frame)
		if err != nil {
			_ = t.conn.SetReadDeadline(time.Now())
		}
		return err
	}
	if !s.ServeTransfer(msg, client, TransportTCP, write) {
		// the handler went away meanwhile: the pipeline refuses
		q = s.begin(client, TransportTCP)
		q.in = append(q.in[:0], msg...)
		q.Start = time.Now()
		s.run(q)
		if b := s.encode(q); b != nil {
			_ = write(b)
		}
		putQuery(q)
	}
}
