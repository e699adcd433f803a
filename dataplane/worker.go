package dataplane

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"time"
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
)

// job is one query handed to a worker: a detached UDP query answered to
// addr through r, or a TCP query answered on tc.
type job struct {
	q    *Query
	r    *udpReplier
	addr netip.AddrPort
	tc   *tcpConn
	cb   WireCallback // ServeWireNow's detached queries
}

// workers is the pool. An idle worker blocks receiving on the unbuffered
// work channel, so a job is only ever handed to a worker that takes it at
// once; there is no queue in which a query could wait behind slow ones.
type workers struct {
	work chan job
	mu   sync.Mutex
	n    int // running workers
	max  int
	quit chan struct{}
	stop sync.Once
	wg   sync.WaitGroup
}

func newWorkers(max int) *workers {
	return &workers{work: make(chan job), max: max, quit: make(chan struct{})}
}

// dispatch hands j to an idle worker, or starts a new one while fewer than
// max run. false means the pool is full: the caller decides (UDP sheds the
// query, TCP runs it on a goroutine of its own). It never blocks.
func (s *Server) dispatch(j job) bool {
	w := s.workers
	select {
	case w.work <- j:
		return true
	default:
	}
	w.mu.Lock()
	if w.n >= w.max {
		w.mu.Unlock()
		return false
	}
	select {
	case <-w.quit:
		w.mu.Unlock()
		return false // shut down: no new workers
	default:
	}
	w.n++
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
		w.mu.Unlock()
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
		s.finishUDP(j.r, j.q, j.addr)
	}
}

// shed gives up on a UDP query that would wait for an upstream while
// MaxWorkers others already do: nothing is sent (the client retries,
// possibly elsewhere) and the query is counted and logged as dropped.
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
