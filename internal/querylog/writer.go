package querylog

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrNoStore is returned by reads when the sink keeps no database (slog).
var ErrNoStore = errors.New("querylog: the query log is not stored on this node (sink slog or disabled)")

// Options are the collaborators and tuning knobs of a Writer.
type Options struct {
	Logger     *slog.Logger          // nil: discard
	Registerer prometheus.Registerer // nil: metrics kept but not registered
	// Now is the clock for retention, maintenance and default windows (nil: time.Now).
	Now           func() time.Time
	BufferRows    int           // rows waiting at most; default 65536 (see Open)
	BatchRows     int           // rows per transaction; default 5000
	FlushInterval time.Duration // default 250ms
	// MaintainEvery runs retention and the size cap; default 1m, <0 never
	// (tests call Maintain).
	MaintainEvery time.Duration
	// DomainCap bounds the in-memory per-hour counts per dimension; default 100000.
	DomainCap int
	// HourTopKeep is how many names per dimension an hour keeps in the
	// database when it ends (the rest is summed under ""); default 1000.
	HourTopKeep int
	// ScanBudget bounds the ids one list page examines when no index
	// narrows the filter (substring, client ID, list, qtype, upstream,
	// zone, policy alone); default 100000.
	ScanBudget int64
}

// Writer is the query log of one node: Enqueue never blocks; a background
// goroutine batches rows into querylog.db (or the process log), keeps the
// rollups and feeds the Broker.
type Writer struct {
	log     *slog.Logger
	now     func() time.Time
	opts    Options
	store   *store // nil for the slog sink
	pol     atomic.Pointer[policy]
	enabled atomic.Bool // pol's cfg.Enabled (Enabled)
	key     []byte
	broker  *Broker
	queue   rowQueue
	flushes chan chan error
	maint   chan chan error
	done    chan struct{}
	closed  atomic.Bool
	wg      sync.WaitGroup
	nextID  int64
	// head is the id of the newest row readers can see (stored and
	// published); a page reports it so a live tail resumes without a gap.
	head atomic.Int64

	dropped  prometheus.Counter
	written  prometheus.Counter
	excluded prometheus.Counter

	hourMu sync.Mutex
	hour   hourCounts

	cl    clientsPending // clients table changes not written yet
	agg   rollup         // the writer goroutine's batch aggregate
	posts postingBuilder // the writer goroutine's batch postings
	enc   blockEncoder   // the writer goroutine's batch block

	// storeRows writes a batch's rows: insertBlock; the benchmarks swap in
	// the compact layout's row inserts as a same-run baseline.
	storeRows func(d *dconn, rows []Row) error
}

// Dimensions of the top lists.
const (
	DimDomains   = "domains"
	DimClients   = "clients"
	DimUpstreams = "upstreams"
	DimLists     = "lists"
	DimZones     = "zones"
)

var dims = []string{DimDomains, DimClients, DimUpstreams, DimLists, DimZones}

type hourCount struct {
	count, blocked int64
	// gen and idx are the block encoder's: the batch that last stored the
	// name and the name's index in that block's domain column.
	gen, idx uint32
	key      string // the name (domains: nameIndex compares it)
	// nh is nameHash(key) for domains: a name's postings group without
	// hashing it again per row.
	nh int64
}

// hourCounts are the current hour's counts per dimension, each map capped.
type hourCounts struct {
	hour   int64 // unix seconds
	counts [5]map[string]*hourCount
	capped [5]bool
	lat    map[string]*latHist // answer times per upstream (latency.go)
	// last and lastC are the previous row's value per dimension and its
	// count (nil: none yet this hour).
	last  [5]string
	lastC [5]*hourCount
	// otherC is the count of the names past the cap (key ""), once made:
	// at the cap, unique names (a flood, a million-name block list) cost
	// one map lookup per row, not two.
	otherC [5]*hourCount
	// dom finds the domains' counts (counts[0]) by name; the map is what
	// is iterated.
	dom nameIndex
}

// newDomain adds a count for domain k, whose hash in h.dom is hash.
func (h *hourCounts) newDomain(k string, hash uint64) *hourCount {
	c := &hourCount{key: k, nh: nameHash(k)}
	h.counts[0][k] = c
	h.dom.putHashed(hash, c)
	return c
}

func (h *hourCounts) reset(hour int64) {
	h.hour = hour
	// Sized for as many names as the hour before: a busy node does not
	// grow it again, an idle one lets it go an hour later.
	h.dom = newNameIndex(h.dom.n)
	for i := range h.counts {
		h.counts[i] = map[string]*hourCount{}
		h.capped[i] = false
		h.last[i], h.lastC[i], h.otherC[i] = "", nil, nil
	}
	h.lat = map[string]*latHist{}
}

// Open opens (creating or upgrading) <DataDir>/querylog.db unless the sink
// is slog, and starts the background writer. Close stops it.
func Open(ctx context.Context, cfg Config, opts Options) (*Writer, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BufferRows <= 0 {
		// About 200 ms of a saturated core's rows (300,000/s): the
		// writer's write() can wait that long on a disk that other
		// programs keep busy (CI, with etcd's fsyncs beside the busy
		// disk of TestSaturatedLoopDropsNoRows, overflowed 16,384 rows).
		// The queue grows only as rows wait, so a node at rest keeps
		// none of it.
		opts.BufferRows = 65536
	}
	if opts.BatchRows <= 0 {
		opts.BatchRows = 5000
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = 250 * time.Millisecond
	}
	if opts.MaintainEvery == 0 {
		opts.MaintainEvery = time.Minute
	}
	if opts.DomainCap <= 0 {
		opts.DomainCap = 100000
	}
	if opts.ScanBudget <= 0 {
		opts.ScanBudget = 100_000
	}
	if opts.HourTopKeep <= 0 {
		opts.HourTopKeep = 1000
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	w := &Writer{
		log: opts.Logger, now: opts.Now, opts: opts,
		broker:  NewBroker(),
		queue:   rowQueue{max: opts.BufferRows, full: min(opts.BatchRows, opts.BufferRows), ready: make(chan struct{}, 1)},
		flushes: make(chan chan error),
		maint:   make(chan chan error),
		done:    make(chan struct{}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "service_querylog_dropped_rows_total",
			Help: "Query-log rows dropped because the writer's buffer was full."}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "service_querylog_written_rows_total",
			Help: "Query-log rows written to the sink."}),
		excluded: prometheus.NewCounter(prometheus.CounterOpts{Name: "service_querylog_excluded_rows_total",
			Help: "Queries left out of the query log by exclusions."}),
	}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{w.dropped, w.written, w.excluded} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("querylog metrics: %w", err)
			}
		}
	}
	w.hour.reset(0)
	w.storeRows = func(d *dconn, rows []Row) error {
		return insertBlock(d, w.store.names, &w.enc, &w.posts, rows)
	}
	if cfg.Sink == SinkSQLite {
		if cfg.DataDir == "" {
			return nil, fmt.Errorf("querylog: dataDir is required for the sqlite sink")
		}
		st, err := openStore(ctx, DBPath(cfg.DataDir), opts.Logger)
		if err != nil {
			return nil, err
		}
		if w.key, err = st.pseudonymKey(ctx); err != nil {
			st.close()
			return nil, err
		}
		if w.nextID, err = st.maxID(ctx); err != nil {
			st.close()
			return nil, err
		}
		if err := st.recoverPostings(ctx, w.nextID); err != nil {
			st.close()
			return nil, fmt.Errorf("open querylog: %w", err)
		}
		w.posts.reset()
		w.posts.pub = &st.pend // never reset again: see pendingPostings
		w.store = st
	}
	w.head.Store(w.nextID)
	w.nextID++
	if err := w.Update(cfg); err != nil {
		if w.store != nil {
			w.store.close()
		}
		return nil, err
	}
	w.wg.Add(1)
	go w.run()
	return w, nil
}

// Update applies a new configuration (privacy, anonymize, exclusions,
// retention, enabled) to rows written from now on. Sink and DataDir
// changes need a restart and are ignored here.
func (w *Writer) Update(cfg Config) error {
	p, err := compilePolicy(cfg, w.key)
	if err != nil {
		return err
	}
	w.pol.Store(p)
	w.enabled.Store(p.cfg.Enabled)
	return nil
}

// Broker returns the fan-out of committed rows.
func (w *Writer) Broker() *Broker { return w.broker }

// Enqueue hands a row to the writer; it never blocks. It reports false
// when the row was dropped (buffer full or closed) and counts the drop.
func (w *Writer) Enqueue(r Row) bool {
	if w.closed.Load() {
		return false
	}
	if !w.queue.push(r) {
		w.dropped.Inc()
		return false
	}
	return true
}

// EnqueueRows hands rows to the writer under one lock, as many as the
// buffer takes; it never blocks and returns how many were taken, counting
// the rest as dropped.
func (w *Writer) EnqueueRows(rows []Row) int {
	if w.closed.Load() {
		return 0
	}
	n := w.queue.pushAll(rows)
	if n < len(rows) {
		w.dropped.Add(float64(len(rows) - n))
	}
	return n
}

// bufferKeeper decides whether a taken buffer is reused. After a burst
// the buffers are not kept at their peak: once letGoAfter takes in a row
// used less than a quarter of a buffer, it is let go and the queue grows
// anew. Under load the flush tick's takes are small between full batches;
// letting the buffer go at the first of them regrew it from nothing
// several times a second (9 MB/s of allocation at 200,000 rows/s,
// test/bench authlog).
type bufferKeeper struct{ small int }

// letGoAfter is how many takes in a row must use less than a quarter of
// their buffer before it is let go: 16 flush ticks, 4 s at rest.
const letGoAfter = 16

// reuse returns taken emptied for the queue to fill next, or nil to let
// it go.
func (k *bufferKeeper) reuse(taken []Row) []Row {
	if cap(taken) <= 256 || len(taken) >= cap(taken)/4 {
		k.small = 0
		return taken[:0]
	}
	if k.small++; k.small >= letGoAfter {
		k.small = 0
		return nil
	}
	return taken[:0]
}

// rowQueue holds the rows enqueued and not yet taken by the writer. It
// grows by append up to max rows instead of a channel of max rows (~4.5 MiB
// at the default 16,384) allocated at the start, which a node that logs
// little never fills (issue #27 item 4).
type rowQueue struct {
	mu    sync.Mutex
	rows  []Row
	max   int           // rows held at most; a push beyond is refused
	full  int           // ready is signalled when this many rows wait
	ready chan struct{} // capacity 1
	// behind is set while more rows wait than the writer was woken for,
	// by a margin (Writer.Behind).
	behind atomic.Bool
}

func (q *rowQueue) push(r Row) bool { return q.pushAll([]Row{r}) == 1 }

// pushAll adds rows while they fit, under one lock, and returns how many
// it took. The buffer doubles, never past max (append's own growth
// would); the writer is woken when a full batch waits, and the backlog
// is reported from a batch and an eighth.
func (q *rowQueue) pushAll(rows []Row) int {
	q.mu.Lock()
	n := len(q.rows)
	k := min(len(rows), q.max-n)
	if k <= 0 {
		q.mu.Unlock()
		return 0
	}
	if n+k > cap(q.rows) {
		grown := make([]Row, n, min(max(2*cap(q.rows), n+k, 64), q.max))
		copy(grown, q.rows)
		q.rows = grown
	}
	q.rows = append(q.rows, rows[:k]...)
	if behind := min(q.full+q.full/8, q.max); n < behind && n+k >= behind {
		q.behind.Store(true)
	}
	q.mu.Unlock()
	if n < q.full && n+k >= q.full {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return k
}

// take returns the waiting rows and keeps spare (emptied) for the next.
func (q *rowQueue) take(spare []Row) []Row {
	q.mu.Lock()
	defer q.mu.Unlock()
	rows := q.rows
	q.rows = spare[:0]
	q.behind.Store(false)
	return rows
}

// Behind reports that the writer is late: an eighth more rows wait than
// the batch it was woken for (5,625 at the default sizes; below that,
// rows waiting for their batch are no backlog). The
// data plane's hand-off then yields the core now and then (dnslog), so
// that on one core (GOMAXPROCS 1) a saturated DNS loop does not starve the
// writer into dropping rows.
func (w *Writer) Behind() bool { return w.queue.behind.Load() }

// Dropped returns how many rows were dropped so far.
func (w *Writer) Dropped() float64 { return counterValue(w.dropped) }

// Written returns how many rows were written so far
// (service_querylog_written_rows_total).
func (w *Writer) Written() float64 { return counterValue(w.written) }

// Flush waits until every row enqueued before the call is written.
func (w *Writer) Flush(ctx context.Context) error { return w.request(ctx, w.flushes) }

// Maintain applies retention and the size cap now.
func (w *Writer) Maintain(ctx context.Context) error { return w.request(ctx, w.maint) }

func (w *Writer) request(ctx context.Context, c chan chan error) error {
	done := make(chan error, 1)
	select {
	case c <- done:
	case <-w.done:
		return errors.New("querylog: closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is buffered, stores the current hour's counts and
// closes the database.
func (w *Writer) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	close(w.done)
	w.wg.Wait()
	w.broker.closeAll()
	if w.store == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := w.store.writeTx(ctx, func(d *dconn) error {
		if err := w.cl.add(d, nil, true); err != nil {
			return err
		}
		if w.posts.pub != nil {
			if err := w.posts.writeAll(d, w.nextID-1); err != nil {
				return err
			}
		}
		return w.flushHour(d, -1)
	})
	return errors.Join(err, w.store.close())
}

func (w *Writer) run() {
	defer w.wg.Done()
	tick := time.NewTicker(w.opts.FlushInterval)
	defer tick.Stop()
	var maintC <-chan time.Time
	if w.opts.MaintainEvery > 0 {
		mt := time.NewTicker(w.opts.MaintainEvery)
		defer mt.Stop()
		maintC = mt.C
	}
	ctx := context.Background()
	// spare is the buffer the queue fills next, swapped with the one taken.
	var spare []Row
	var keep bufferKeeper
	// write takes every waiting row and writes them in batches of at most
	// BatchRows (one transaction each); the first error is returned.
	write := func() error {
		taken := w.queue.take(spare)
		rows := taken
		var first error
		for len(rows) > 0 {
			n := min(len(rows), w.opts.BatchRows)
			if err := w.write(ctx, rows[:n]); err != nil {
				w.log.Error("query log write failed", "rows", n, "err", err)
				first = cmp.Or(first, err)
			}
			clear(rows[:n])
			rows = rows[n:]
		}
		spare = keep.reuse(taken)
		return first
	}
	for {
		select {
		case <-w.queue.ready:
			_ = write()
		case <-tick.C:
			_ = write()
		case done := <-w.flushes:
			done <- write()
		case done := <-w.maint:
			err := write()
			done <- errors.Join(err, w.maintain(ctx))
		case <-maintC:
			if err := w.maintain(ctx); err != nil {
				w.log.Error("query log maintenance failed", "err", err)
			}
		case <-w.done:
			_ = write()
			return
		}
	}
}

// write filters, assigns ids, stores and publishes one batch.
func (w *Writer) write(ctx context.Context, batch []Row) error {
	if len(batch) == 0 {
		return nil
	}
	p := w.pol.Load()
	if !p.cfg.Enabled {
		return nil
	}
	rows := batch[:0]
	agg := &w.agg
	agg.reset()
	excluded := 0
	for i := range batch {
		r := &batch[i]
		if p.excluded(r) {
			excluded++
			continue
		}
		keep := p.apply(r)
		agg.add(r, keep && p.cfg.Privacy != PrivacyNothing)
		if !keep {
			continue
		}
		r.ID = w.nextID
		w.nextID++
		if len(rows) == i {
			rows = rows[:i+1] // nothing left out so far: the row is in place
		} else {
			rows = append(rows, *r) // in place: rows never overtakes i
		}
	}
	if excluded > 0 {
		w.excluded.Add(float64(excluded))
	}
	agg.finish()
	agg.dims = p.cfg.Privacy != PrivacyNothing
	agg.rows = rows
	if w.store == nil {
		for i := range rows {
			w.slogRow(ctx, &rows[i])
		}
	} else {
		nm := w.store.names
		err := w.store.writeTx(ctx, func(d *dconn) error {
			if err := w.encodeRows(d, rows, agg.dims); err != nil {
				return err
			}
			return w.writeRollups(d, agg)
		})
		if err != nil {
			// The ids stay used: a reader never sees an id twice. Names
			// first used by the batch are forgotten with it; its
			// postings stay pending, listing ids without rows, which
			// readers skip.
			nm.rollback()
			w.posts.rolledBack()
			return err
		}
		nm.committed()
		w.posts.committed()
		w.cl.committed()
	}
	w.written.Add(float64(len(rows)))
	if len(rows) > 0 {
		w.head.Store(rows[len(rows)-1].ID)
	}
	w.broker.Publish(rows)
	return nil
}

// encodeRows stores a batch's rows; when their names are counted into the
// hour, the block encoder looks each domain up in the hour's counts as it
// goes (blockEncoder.hour) and writeRollups counts through what it found.
func (w *Writer) encodeRows(d *dconn, rows []Row, dims bool) error {
	w.enc.hc = w.enc.hc[:0]
	if !dims {
		return w.storeRows(d, rows)
	}
	w.hourMu.Lock()
	defer w.hourMu.Unlock()
	w.enc.hour, w.enc.cap = &w.hour, w.opts.DomainCap
	defer func() { w.enc.hour = nil }()
	return w.storeRows(d, rows)
}

func (w *Writer) slogRow(ctx context.Context, r *Row) {
	w.log.LogAttrs(ctx, slog.LevelInfo, "query",
		slog.Int64("id", r.ID), slog.Time("ts", r.Time), slog.String("node", r.Node),
		slog.String("client", r.Client), slog.String("client_name", r.ClientName),
		slog.String("client_id", r.ClientID),
		slog.String("domain", r.Domain), slog.String("type", r.QType), slog.String("rcode", r.Rcode),
		slog.String("status", r.Status), slog.String("reason", r.Reason), slog.String("list", r.List),
		slog.String("policy", r.Policy), slog.String("upstream", r.Upstream), slog.String("zone", r.Zone),
		slog.String("transport", r.Transport), slog.Duration("duration", r.Duration))
}

type totalKey struct {
	min    int64 // minute, unix seconds
	status string
}

type totalVal struct{ count, durUS int64 }

type clientSeen struct {
	name, group string
	last        int64
}

// rollup aggregates one batch in memory before it is written: totals per
// minute and status (hours and days are summed from the minutes at write
// time), clients last seen. It is reused from batch to batch.
type rollup struct {
	totals  map[totalKey]totalVal
	clients map[string]clientSeen
	coarse  map[totalKey]totalVal // scratch for the hour and day buckets
	dims    bool                  // count the rows' names into the hour
	rows    []Row                 // the batch's stored rows
	// A run of rows with one minute and status, and of one client, is
	// summed here and merged into the maps when it ends (finish): four map
	// operations per row were a tenth of the writer's CPU.
	runKey    totalKey
	runVal    totalVal
	runClient string
	runSeen   clientSeen
}

func (a *rollup) reset() {
	if a.totals == nil {
		a.totals = map[totalKey]totalVal{}
		a.clients = map[string]clientSeen{}
		a.coarse = map[totalKey]totalVal{}
	}
	clear(a.totals)
	clear(a.clients)
	a.rows, a.dims = nil, false
	a.runKey, a.runVal, a.runClient, a.runSeen = totalKey{}, totalVal{}, "", clientSeen{}
}

// finish merges the current runs into the maps; call it after the last add.
func (a *rollup) finish() {
	a.finishTotal()
	a.finishClient()
}

// totalsAt returns the batch's totals in buckets of step seconds: the
// per-minute map itself, or the minutes summed into the scratch map.
func (a *rollup) totalsAt(step int64) map[totalKey]totalVal {
	if step == 60 {
		return a.totals
	}
	m := a.coarse
	clear(m)
	for k, v := range a.totals {
		k.min -= k.min % step
		c := m[k]
		c.count += v.count
		c.durUS += v.durUS
		m[k] = c
	}
	return m
}

// add counts a row into the runs (finish merges them into the maps).
func (a *rollup) add(r *Row, dimsToo bool) {
	sec := r.Time.Unix()
	if k := (totalKey{sec - sec%60, r.Status}); a.runVal.count == 0 || k != a.runKey {
		a.finishTotal()
		a.runKey = k
	}
	a.runVal.count++
	a.runVal.durUS += r.Duration.Microseconds()
	if !dimsToo || r.Client == "" {
		return
	}
	if r.Client != a.runClient {
		a.finishClient()
		a.runClient = r.Client
	}
	// A later row's name and group win, as mergeClient merges.
	a.runSeen = mergeClient(a.runSeen, clientSeen{name: r.ClientName, group: r.Group, last: r.Time.UnixMicro()})
}

func (a *rollup) finishTotal() {
	if a.runVal.count > 0 {
		v := a.totals[a.runKey]
		v.count += a.runVal.count
		v.durUS += a.runVal.durUS
		a.totals[a.runKey] = v
		a.runVal = totalVal{}
	}
}

func (a *rollup) finishClient() {
	if a.runClient != "" {
		a.clients[a.runClient] = mergeClient(a.clients[a.runClient], a.runSeen)
		a.runClient, a.runSeen = "", clientSeen{}
	}
}

var (
	totalsSQL = `INSERT INTO totals (res, ts, status, count, dur_us) VALUES (?,?,?,?,?)
ON CONFLICT (res, ts, status) DO UPDATE SET count = count + excluded.count, dur_us = dur_us + excluded.dur_us`
	clientsSQL = `INSERT INTO clients (key, name, grp, last_seen) VALUES (?,?,?,?)
ON CONFLICT (key) DO UPDATE SET last_seen = max(last_seen, excluded.last_seen),
  name = CASE WHEN excluded.name != '' THEN excluded.name ELSE name END,
  grp = CASE WHEN excluded.grp != '' THEN excluded.grp ELSE grp END`
)

func (w *Writer) writeRollups(d *dconn, a *rollup) error {
	if len(a.totals) > 0 {
		for _, res := range resolutions {
			m := a.totalsAt(res.step)
			for k, v := range m {
				if err := d.exec(totalsSQL, res.step, k.min, k.status, v.count, v.durUS); err != nil {
					return fmt.Errorf("write totals: %w", err)
				}
			}
		}
	}
	if len(a.clients) > 0 || w.cl.due() {
		if err := w.cl.add(d, a.clients, false); err != nil {
			return err
		}
	}
	if !a.dims {
		return nil
	}
	w.hourMu.Lock()
	defer w.hourMu.Unlock()
	hc := w.enc.hc // each row's domain count, found by the encoder
	if len(hc) != len(a.rows) {
		hc = nil
	}
	for i := range a.rows {
		r := &a.rows[i]
		sec := r.Time.Unix()
		if h := sec - sec%3600; h > w.hour.hour {
			if err := w.flushHourLocked(d, h); err != nil {
				return err
			}
			hc = nil // counts of the hour that ended
		}
		var c *hourCount
		if hc != nil {
			c = hc[i]
		}
		w.countHourLocked(r, c)
	}
	return nil
}

// clientsPending holds the clients table's changes in memory between
// writes: with thousands of clients a batch would otherwise upsert a row
// per client (a tenth of the write cost). Written every clientsEvery, when
// clientsMax are pending, and at Close; readers overlay it.
type clientsPending struct {
	mu      sync.Mutex
	m       map[string]clientSeen
	last    time.Time // last write
	written bool      // the current transaction wrote m: clear it on commit
}

const (
	clientsEvery = 10 * time.Second
	clientsMax   = 10000
)

func mergeClient(old, n clientSeen) clientSeen {
	if n.name != "" {
		old.name = n.name
	}
	if n.group != "" {
		old.group = n.group
	}
	old.last = max(old.last, n.last)
	return old
}

func (c *clientsPending) due() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m) > 0 && time.Since(c.last) >= clientsEvery
}

// add merges a batch's clients and writes everything pending when it is
// due (or force).
func (c *clientsPending) add(d *dconn, batch map[string]clientSeen, force bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]clientSeen{}
		c.last = time.Now()
	}
	for k, v := range batch {
		c.m[k] = mergeClient(c.m[k], v)
	}
	c.written = false
	if len(c.m) == 0 || !force && len(c.m) < clientsMax && time.Since(c.last) < clientsEvery {
		return nil
	}
	for k, v := range c.m {
		if err := d.exec(clientsSQL, k, v.name, v.group, v.last); err != nil {
			return fmt.Errorf("write clients: %w", err)
		}
	}
	c.written = true
	return nil
}

// committed forgets what the committed transaction wrote.
func (c *clientsPending) committed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written {
		clear(c.m)
		c.last, c.written = time.Now(), false
	}
}

// overlay applies the pending change of a client to what the table said.
func (c *clientsPending) overlay(key string, v clientSeen) clientSeen {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[key]; ok {
		return mergeClient(v, p)
	}
	return v
}

func dimValue(i int, r *Row) string {
	switch i {
	case 0:
		return r.Domain
	case 1:
		return r.Client
	case 2:
		return r.Upstream
	case 3:
		return r.List
	default:
		return r.Zone
	}
}

// countHour adds a row to the current hour's counts; names past the cap are
// counted under "" and make the answers approximate. domain is the row's
// domain count when the block encoder found it (nil: look it up).
func (w *Writer) countHourLocked(r *Row, domain *hourCount) {
	blocked := int64(0)
	if r.Status == "blocked" {
		blocked = 1
	}
	for i := range dims {
		if i == 0 && domain != nil {
			domain.count++
			domain.blocked += blocked
			continue
		}
		k := dimValue(i, r)
		if k == "" {
			continue
		}
		// Runs of one value (a client, zone, upstream or list over many
		// rows) skip the map.
		if w.hour.lastC[i] != nil && k == w.hour.last[i] {
			w.hour.lastC[i].count++
			w.hour.lastC[i].blocked += blocked
			continue
		}
		key := k
		m := w.hour.counts[i]
		var c *hourCount
		if i == 0 {
			c = w.hour.dom.get(k)
		} else {
			c = m[k]
		}
		if c == nil {
			if len(m) >= w.opts.DomainCap {
				w.hour.capped[i] = true
				if c = w.hour.otherC[i]; c == nil {
					if c = m[""]; c == nil {
						c = &hourCount{}
						m[""] = c
					}
					w.hour.otherC[i] = c
				}
			} else if i == 0 {
				c = w.hour.newDomain(k, w.hour.dom.hash(k))
			} else {
				c = &hourCount{key: k}
				m[k] = c
			}
		}
		c.count++
		c.blocked += blocked
		w.hour.last[i], w.hour.lastC[i] = key, c
	}
	w.countLatencyLocked(r)
}

// flushHour writes the current hour's counts and starts hour next (-1: keep
// the hour, only persist; used at Close).
func (w *Writer) flushHour(d *dconn, next int64) error {
	w.hourMu.Lock()
	defer w.hourMu.Unlock()
	return w.flushHourLocked(d, next)
}

const topHourlySQL = `INSERT INTO top_hourly (hour, dim, key, count, blocked) VALUES (?,?,?,?,?)
ON CONFLICT (hour, dim, key) DO UPDATE SET count = count + excluded.count, blocked = blocked + excluded.blocked`

func (w *Writer) flushHourLocked(d *dconn, next int64) error {
	if w.hour.hour != 0 {
		for i, dim := range dims {
			for _, e := range truncateCounts(w.hour.counts[i], w.opts.HourTopKeep) {
				if err := d.exec(topHourlySQL, w.hour.hour, dim, e.Key, e.Count, e.Blocked); err != nil {
					return fmt.Errorf("write top_hourly: %w", err)
				}
			}
		}
		if err := w.flushLatencyLocked(d); err != nil {
			return err
		}
	}
	if next >= 0 {
		w.hour.reset(next)
	} else {
		w.hour.reset(w.hour.hour)
	}
	return nil
}

// topKeep is how long the per-hour top lists are kept.
const topKeep = 35 * 24 * time.Hour

// truncateCounts returns the keep largest counts and the rest summed under "".
func truncateCounts(m map[string]*hourCount, keep int) []TopItem {
	out := make([]TopItem, 0, len(m))
	for k, c := range m {
		if c.count == 0 {
			continue // found by the block encoder for a batch that failed
		}
		out = append(out, TopItem{Key: k, Count: c.count, Blocked: c.blocked})
	}
	if len(out) <= keep {
		return out
	}
	sort.Slice(out, func(i, j int) bool {
		if (out[i].Key == "") != (out[j].Key == "") {
			return out[j].Key == "" // the overflow bucket goes to the rest
		}
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Key < out[j].Key
	})
	rest := TopItem{}
	for _, e := range out[keep:] {
		rest.Count += e.Count
		rest.Blocked += e.Blocked
	}
	return append(out[:keep], rest)
}

// maintain applies retention and the size cap; it runs on the writer goroutine.
func (w *Writer) maintain(ctx context.Context) error {
	if w.store == nil {
		return nil
	}
	p := w.pol.Load()
	now := w.now()
	db := w.store.w
	if p.cfg.RetentionRaw > 0 {
		if err := w.expireRaw(ctx, now.Add(-p.cfg.RetentionRaw).UnixMicro()); err != nil {
			return fmt.Errorf("raw retention: %w", err)
		}
	}
	for _, r := range resolutions {
		if r.keep > 0 {
			if _, err := db.ExecContext(ctx, "DELETE FROM totals WHERE res = ? AND ts < ?", r.step, now.Add(-r.keep).Unix()); err != nil {
				return fmt.Errorf("rollup retention: %w", err)
			}
		}
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM top_hourly WHERE hour < ?", now.Add(-topKeep).Unix()); err != nil {
		return fmt.Errorf("top retention: %w", err)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM upstream_latency WHERE hour < ?", now.Add(-topKeep).Unix()); err != nil {
		return fmt.Errorf("latency retention: %w", err)
	}
	return w.enforceCap(ctx, p.cfg.MaxDBBytes)
}

// enforceCap deletes the oldest raw rows until the used pages fit in 90%
// of maxBytes, then returns free pages to the file system.
func (w *Writer) enforceCap(ctx context.Context, maxBytes int64) error {
	if maxBytes <= 0 {
		return nil
	}
	db := w.store.w
	deleted := false
	for range 200 {
		used, _, err := w.store.usedBytes(ctx)
		if err != nil {
			return err
		}
		if used <= maxBytes && !deleted || used <= maxBytes*9/10 {
			break
		}
		var lo, hi sql.NullInt64
		if err := db.QueryRowContext(ctx, idRangeSQL).Scan(&lo, &hi); err != nil {
			return fmt.Errorf("size cap: %w", err)
		}
		if !lo.Valid {
			break // nothing left to delete: rollups alone exceed the cap
		}
		// Delete about a twentieth of the rows, oldest first, in whole
		// blocks (at least the oldest one).
		step := max((hi.Int64-lo.Int64)/20, 100)
		if _, err := db.ExecContext(ctx, "DELETE FROM blocks WHERE first < ? AND (last < ? OR first = ?)", lo.Int64+step, lo.Int64+step, lo.Int64); err != nil {
			return fmt.Errorf("size cap: %w", err)
		}
		w.store.cache.purge()
		if err := w.dropPostings(ctx); err != nil {
			return fmt.Errorf("size cap: %w", err)
		}
		// Clients last seen before the oldest raw row left go with the rows.
		if _, err := db.ExecContext(ctx, "DELETE FROM clients WHERE last_seen < coalesce((SELECT ts_min FROM blocks ORDER BY first LIMIT 1), 0)"); err != nil {
			return fmt.Errorf("size cap: %w", err)
		}
		deleted = true
	}
	if deleted {
		// incremental_vacuum frees one page per step: drain its rows.
		rs, err := db.QueryContext(ctx, "PRAGMA incremental_vacuum")
		if err != nil {
			return fmt.Errorf("incremental vacuum: %w", err)
		}
		for rs.Next() {
		}
		if err := errors.Join(rs.Err(), rs.Close()); err != nil {
			return fmt.Errorf("incremental vacuum: %w", err)
		}
		if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	return nil
}

// expireRaw applies raw retention: blocks whose newest row is older than
// cut are deleted, and reads hide the older rows of the blocks left (a
// block is written in about 250 ms, so few rows wait for their block).
func (w *Writer) expireRaw(ctx context.Context, cut int64) error {
	db := w.store.w
	if err := w.store.setRawCut(ctx, db, cut); err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, "DELETE FROM blocks WHERE ts_max < ?", cut)
	if err != nil {
		return fmt.Errorf("delete blocks: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		w.store.cache.purge()
	}
	return w.dropPostings(ctx)
}

// dropPostings deletes the postings of the buckets wholly below the
// oldest block (all of them when no block is left).
func (w *Writer) dropPostings(ctx context.Context) error {
	db := w.store.w
	var lo sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT min(first) FROM blocks").Scan(&lo); err != nil {
		return fmt.Errorf("oldest block: %w", err)
	}
	if !lo.Valid {
		lo.Int64 = w.nextID
	}
	return dropPostingsBelow(ctx, db, lo.Int64)
}
