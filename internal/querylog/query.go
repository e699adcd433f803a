package querylog

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Domain match modes of Filter.DomainMatch.
const (
	MatchExact     = "exact"
	MatchSubstring = "substring"
)

// Filter selects rows of the query log. Empty fields match everything.
type Filter struct {
	Client      string // client key (address, prefix or pseudonym)
	ClientID    string // the client's declared client ID, exact
	Domain      string
	DomainMatch string // exact (default) or substring
	List        string
	QType       string
	Status      string
	StatusClass string
	Upstream    string
	Zone        string
	Policy      string
	Since       time.Time // inclusive
	Until       time.Time // exclusive
	Limit       int       // default 50, at most 1000
	Continue    string    // opaque token from the previous page
}

const (
	defaultLimit = 50
	maxLimit     = 1000
)

// ErrInvalid marks a bad filter or request value.
var ErrInvalid = errors.New("invalid")

// Match reports whether a row passes the filter (time bounds included);
// the stream uses it for live rows.
func (f *Filter) Match(r *Row) bool {
	if f.Client != "" && r.Client != f.Client {
		return false
	}
	if f.Domain != "" {
		if f.DomainMatch == MatchSubstring {
			if !strings.Contains(r.Domain, f.Domain) {
				return false
			}
		} else if r.Domain != f.Domain {
			return false
		}
	}
	if f.StatusClass != "" && StatusClass(r.Status) != f.StatusClass {
		return false
	}
	for _, c := range [][2]string{{f.ClientID, r.ClientID}, {f.List, r.List}, {f.QType, r.QType}, {f.Status, r.Status}, {f.Upstream, r.Upstream}, {f.Policy, r.Policy}} {
		if c[0] != "" && c[0] != c[1] {
			return false
		}
	}
	if f.Zone != "" && !sameZone(f.Zone, r.Zone) {
		return false
	}
	if !f.Since.IsZero() && r.Time.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !r.Time.Before(f.Until) {
		return false
	}
	return true
}

// sameZone compares zone names as DNS does: case-insensitive, with or
// without the trailing dot (rows keep the table's "example.test.", users
// type "example.test").
func sameZone(a, b string) bool {
	trim := func(s string) string {
		if len(s) > 1 {
			return strings.TrimSuffix(s, ".")
		}
		return s
	}
	return strings.EqualFold(trim(a), trim(b))
}

func encodeContinue(id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("q1:" + strconv.FormatInt(id, 10)))
}

func decodeContinue(s string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(b), "q1:") {
		return 0, fmt.Errorf("%w: bad continue token", ErrInvalid)
	}
	id, err := strconv.ParseInt(string(b[3:]), 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%w: bad continue token", ErrInvalid)
	}
	return id, nil
}

func (w *Writer) db() (*sql.DB, error) {
	if w.store == nil {
		return nil, ErrNoStore
	}
	return w.store.r, nil
}

func (w *Writer) node() string { return w.pol.Load().cfg.Node }

func tookMS(start time.Time) float64 { return float64(time.Since(start).Microseconds()) / 1000 }

// rowStore answers the row lookups of the read paths; the reader pool in
// production, the writer connection in maintenance.
type rowStore interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// idRangeSQL reads the smallest and largest id.
const idRangeSQL = "SELECT (SELECT min(first) FROM blocks), (SELECT last FROM blocks ORDER BY first DESC LIMIT 1)"

// stmtCache prepares the frequent small statements once per *sql.DB (a
// prepared *sql.Stmt works on every connection of the pool), so the
// block lookups of a page do not parse SQL each time.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func (c *stmtCache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := c.get(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.db.QueryRowContext(ctx, query, args...)
}

func (c *stmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := c.get(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.db.QueryContext(ctx, query, args...)
}

func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	switch query {
	case idRangeSQL, blockAtSQL, blockAfterSQL, sinceSQL, untilSQL:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.m[query]; st != nil {
		return st
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[query] = st
	return st
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// idRange returns the smallest and largest id (0, 0 when empty).
func idRange(ctx context.Context, db rowStore) (lo, hi int64, err error) {
	var a, b sql.NullInt64
	if err := db.QueryRowContext(ctx, idRangeSQL).Scan(&a, &b); err != nil {
		return 0, 0, fmt.Errorf("query log id range: %w", err)
	}
	return a.Int64, b.Int64, nil
}

// idSince returns the smallest id of the rows at or after t: the first id
// of the oldest block with a row that late (ok false: no such row).
func idSince(ctx context.Context, db rowStore, t int64) (int64, bool, error) {
	var id sql.NullInt64
	if err := db.QueryRowContext(ctx, sinceSQL, t).Scan(&id); err != nil {
		return 0, false, fmt.Errorf("query log since bound: %w", err)
	}
	return id.Int64, id.Valid, nil
}

// idUntil returns an id bound for the rows before t: every such row has an
// id below it (0: there is none).
func idUntil(ctx context.Context, db rowStore, t int64) (int64, error) {
	var id sql.NullInt64
	if err := db.QueryRowContext(ctx, untilSQL, t).Scan(&id); err != nil {
		return 0, fmt.Errorf("query log until bound: %w", err)
	}
	if !id.Valid {
		return 0, nil
	}
	return id.Int64 + 1, nil
}

// plan is a filter turned into id bounds and postings sources; the rows
// found are checked against the whole filter (Filter.Match).
type plan struct {
	// sources are the filter's conditions that postings answer (client,
	// exact domain, status, status class).
	sources []postSource
	lo, hi  int64 // id window [lo, hi)
	keep    func(*Row) bool
}

// stored returns the stored form of a filter value of kind k.
func (s *store) stored(k int, v string) any {
	if id, ok := s.names.lookup(k, v); ok {
		return id
	}
	return v
}

// plan builds the sources and bounds of a filter with keyset bound beforeID.
func (w *Writer) plan(ctx context.Context, db rowStore, f *Filter, beforeID int64) (*plan, error) {
	p := &plan{keep: f.Match}
	st := w.store
	if f.Client != "" {
		p.sources = append(p.sources, nameSource(postClient, f.Client))
	}
	if f.Domain != "" && f.DomainMatch != MatchSubstring {
		p.sources = append(p.sources, nameSource(postDomain, f.Domain))
	}
	if f.Status != "" {
		p.sources = append(p.sources, postSource{dim: postStatus, vals: []uint32{statusPostValue(st.stored(kStatus, f.Status))}})
	}
	if f.StatusClass != "" {
		sts, ok := statusesOfClass(f.StatusClass)
		if !ok {
			return nil, fmt.Errorf("%w: unknown status class %q", ErrInvalid, f.StatusClass)
		}
		src := postSource{dim: postStatus}
		for _, s := range sts {
			src.vals = append(src.vals, statusPostValue(st.stored(kStatus, s)))
		}
		if f.Status == "" {
			p.sources = append(p.sources, src)
		}
	}
	var err error
	if p.lo, p.hi, err = w.idWindow(ctx, db, f.Since, f.Until); err != nil {
		return nil, err
	}
	if beforeID > 0 && beforeID < p.hi {
		p.hi = beforeID
	}
	return p, nil
}

// idWindow turns a time window (zero: open) into ids [lo, hi); rows hidden
// by the retention cut are left out too.
func (w *Writer) idWindow(ctx context.Context, db rowStore, since, until time.Time) (lo, hi int64, err error) {
	minID, maxID, err := idRange(ctx, db)
	if err != nil {
		return 0, 0, err
	}
	lo, hi = minID, maxID+1
	from := w.store.cut.v.Load()
	if !since.IsZero() {
		from = max(from, since.UnixMicro())
	}
	if from > 0 && maxID > 0 {
		id, ok, err := idSince(ctx, db, from)
		if err != nil {
			return 0, 0, err
		}
		if !ok {
			return 0, 0, nil
		}
		lo = max(lo, id)
	}
	if !until.IsZero() && maxID > 0 {
		id, err := idUntil(ctx, db, until.UnixMicro())
		if err != nil {
			return 0, 0, err
		}
		hi = min(hi, id)
	}
	return lo, hi, nil
}

// scanBounded reports whether the filter has no indexed equality (client,
// exact domain, status, status class) but filters on something else (a
// client ID has no postings: it usually comes with few, busy clients).
func (f *Filter) scanBounded() bool {
	if f.Client != "" || (f.Domain != "" && f.DomainMatch != MatchSubstring) || f.Status != "" || f.StatusClass != "" {
		return false
	}
	return f.Domain != "" || f.ClientID != "" || f.List != "" || f.QType != "" || f.Upstream != "" || f.Zone != "" || f.Policy != ""
}

// hasRowsBefore reports whether a block below id has a row at or after since.
func (w *Writer) hasRowsBefore(ctx context.Context, db *sql.DB, id int64, since time.Time) bool {
	var n int
	_ = db.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 FROM blocks WHERE first < ? AND ts_max >= ? LIMIT 1)", id, since.UnixMicro()).Scan(&n)
	return n > 0
}

// maxChunkBuckets bounds the buckets one postings statement reads.
const maxChunkBuckets = 256

// fetchOverIntersect: with at most this many candidates from the sparser
// sources, the rows are fetched and checked rather than the denser
// sources' postings read (a dense status lists most ids of a bucket). A
// fetch may read and decode a whole block, so the bound is low.
const fetchOverIntersect = 64

// sortSources puts the usually sparser sources first: a domain, a client,
// one status, a status class.
func sortSources(srcs []postSource) {
	sort.SliceStable(srcs, func(i, j int) bool {
		if srcs[i].dim != srcs[j].dim {
			return srcs[i].dim < srcs[j].dim
		}
		return len(srcs[i].vals) < len(srcs[j].vals)
	})
}

// walkPostings pages through the rows the plan's postings list, newest
// first: the newest bucket first, then growing chunks of buckets while they
// yield fewer rows than the page wants (a rare name costs a few statements
// over the whole table, a common one a single bucket). The candidates of
// all sources are intersected, then read from their blocks and checked
// against the filter.
func (w *Writer) walkPostings(ctx context.Context, db rowStore, p *plan, limit int) ([]Row, error) {
	rows := make([]Row, 0, limit)
	if p.hi <= p.lo {
		return rows, nil
	}
	sortSources(p.sources)
	low := bucketOf(p.lo)
	b := bucketOf(p.hi - 1)
	chunk := int64(1)
	for b >= low && len(rows) < limit {
		n := min(chunk, b-low+1)
		var cand []int64
		most := 0
		for i, src := range p.sources {
			if i > 0 && len(cand) <= fetchOverIntersect {
				break // few candidates: the fetch checks the rest
			}
			ids, err := postingIDs(ctx, db, w.store.pend.Load(), src, b, n, p.lo, p.hi)
			if err != nil {
				return nil, err
			}
			most = max(most, len(ids))
			if i == 0 {
				cand = ids
			} else {
				cand = intersectDesc(cand, ids)
			}
		}
		before := len(rows)
		var err error
		if rows, err = w.store.rowsByID(ctx, db, cand, p.keep, limit, rows); err != nil {
			return nil, err
		}
		b -= n
		if len(rows)-before < limit/2 && most < 1<<16 {
			chunk = min(chunk*2, maxChunkBuckets)
		}
	}
	return rows, nil
}

// Rows returns one page of rows, newest first, and the continue token of
// the next page ("" at the end). A page may hold fewer than Limit rows and
// still have a continue token (see Options.ScanBudget).
func (w *Writer) Rows(ctx context.Context, f Filter) ([]Row, string, error) {
	db, err := w.db()
	if err != nil {
		return nil, "", err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultLimit
	}
	limit = min(limit, maxLimit)
	var before int64
	if f.Continue != "" {
		if before, err = decodeContinue(f.Continue); err != nil {
			return nil, "", err
		}
	}
	rdb := &w.store.rstmts
	p, err := w.plan(ctx, rdb, &f, before)
	if err != nil {
		return nil, "", err
	}
	// Without an indexed equality a rare match would scan the whole table:
	// such a page examines at most scanBudget ids and, when it is not full,
	// its continue token resumes below the scanned window.
	var low int64
	if f.scanBounded() && p.hi-w.opts.ScanBudget > p.lo {
		low = p.hi - w.opts.ScanBudget
		p.lo = low
	}
	var rows []Row
	switch {
	case len(p.sources) > 0:
		rows, err = w.walkPostings(ctx, rdb, p, limit)
	default:
		rows, err = w.store.scanRows(ctx, rdb, p.lo, p.hi, p.keep, limit, make([]Row, 0, limit))
	}
	if err != nil {
		return nil, "", err
	}
	next := ""
	switch {
	case len(rows) == limit:
		next = encodeContinue(rows[len(rows)-1].ID)
	case low > 0 && (f.Since.IsZero() || w.hasRowsBefore(ctx, db, low, f.Since)):
		next = encodeContinue(low)
	}
	return rows, next, nil
}

// List answers the query-log route.
func (w *Writer) List(ctx context.Context, f Filter) (*QueryPage, error) {
	start := time.Now()
	// Read before the rows: a row published in between is then in the page
	// or after NewestID, never in neither.
	head := w.head.Load()
	rows, next, err := w.Rows(ctx, f)
	if err != nil {
		return nil, err
	}
	p := &QueryPage{Items: make([]QueryItem, len(rows)), Node: w.node(), Continue: next, NewestID: head}
	for i := range rows {
		p.Items[i] = rows[i].Item()
	}
	p.TookMS = tookMS(start)
	return p, nil
}

// Blocked lists blocked queries (status blocked; other filters apply).
func (w *Writer) Blocked(ctx context.Context, f Filter) (*BlockedPage, error) {
	start := time.Now()
	f.Status, f.StatusClass = "blocked", ""
	rows, next, err := w.Rows(ctx, f)
	if err != nil {
		return nil, err
	}
	p := &BlockedPage{Items: make([]BlockedItem, len(rows)), Node: w.node(), Continue: next}
	for i, r := range rows {
		p.Items[i] = BlockedItem{ID: r.ID, TS: r.Time, Domain: r.Domain, Client: r.Client, Status: r.Status, ClientName: r.ClientName, List: r.List}
	}
	p.TookMS = tookMS(start)
	return p, nil
}

// window resolves a window ending now (default 24h).
func (w *Writer) window(d time.Duration) (from, until time.Time) {
	if d <= 0 {
		d = 24 * time.Hour
	}
	until = w.now().UTC()
	return until.Add(-d), until
}

// topCounts sums per-hour counts of a dimension from the database and the
// current hour in memory. approximate is set when names went past the cap.
func (w *Writer) topCounts(ctx context.Context, db *sql.DB, dim string, from time.Time) (map[string]*hourCount, bool, error) {
	di := -1
	for i, d := range dims {
		if d == dim {
			di = i
		}
	}
	if di < 0 {
		return nil, false, fmt.Errorf("%w: unknown dimension %q (want domains, clients, upstreams, lists or zones)", ErrInvalid, dim)
	}
	fromHour := from.Unix() - from.Unix()%3600
	out := map[string]*hourCount{}
	approx := false
	rs, err := db.QueryContext(ctx, "SELECT key, sum(count), sum(blocked) FROM top_hourly WHERE dim = ? AND hour >= ? GROUP BY key", dim, fromHour)
	if err != nil {
		return nil, false, fmt.Errorf("top %s: %w", dim, err)
	}
	defer rs.Close()
	for rs.Next() {
		var k string
		var c hourCount
		if err := rs.Scan(&k, &c.count, &c.blocked); err != nil {
			return nil, false, fmt.Errorf("top %s: %w", dim, err)
		}
		out[k] = &c
	}
	if err := rs.Err(); err != nil {
		return nil, false, fmt.Errorf("top %s: %w", dim, err)
	}
	w.hourMu.Lock()
	if w.hour.hour >= fromHour {
		for k, c := range w.hour.counts[di] {
			if c.count == 0 {
				continue // found by the block encoder, not counted yet
			}
			o := out[k]
			if o == nil {
				o = &hourCount{}
				out[k] = o
			}
			o.count += c.count
			o.blocked += c.blocked
		}
		approx = w.hour.capped[di]
	}
	w.hourMu.Unlock()
	if _, ok := out[""]; ok {
		approx = true
		delete(out, "")
	}
	return out, approx, nil
}

// TopRequest asks for `stats top`.
type TopRequest struct {
	Dim     string        // domains (default), clients, upstreams, lists, zones
	N       int           // default 10, at most 100
	Blocked bool          // rank by blocked count, only names with blocks
	Window  time.Duration // default 24h
}

// Top ranks a dimension over a window. Counts are per hour: the window is
// widened to the start of its first hour.
func (w *Writer) Top(ctx context.Context, req TopRequest) (*TopBody, error) {
	start := time.Now()
	db, err := w.db()
	if err != nil {
		return nil, err
	}
	if req.Dim == "" {
		req.Dim = DimDomains
	}
	if req.N <= 0 {
		req.N = 10
	}
	if req.N > 100 {
		return nil, fmt.Errorf("%w: top is at most 100", ErrInvalid)
	}
	from, until := w.window(req.Window)
	counts, approx, err := w.topCounts(ctx, db, req.Dim, from)
	if err != nil {
		return nil, err
	}
	items := make([]TopItem, 0, len(counts))
	for k, c := range counts {
		if req.Blocked && c.blocked == 0 {
			continue
		}
		items = append(items, TopItem{Key: k, Count: c.count, Blocked: c.blocked})
	}
	rank := func(t TopItem) int64 {
		if req.Blocked {
			return t.Blocked
		}
		return t.Count
	}
	sort.Slice(items, func(i, j int) bool {
		if rank(items[i]) != rank(items[j]) {
			return rank(items[i]) > rank(items[j])
		}
		return items[i].Key < items[j].Key
	})
	if len(items) > req.N {
		items = items[:req.N]
	}
	if req.Dim == DimUpstreams && len(items) > 0 {
		lat, err := w.upstreamLatency(ctx, db, from)
		if err != nil {
			return nil, err
		}
		for i := range items {
			if h := lat[items[i].Key]; h != nil {
				items[i].AvgLatencyMS, items[i].P95LatencyMS = h.stats()
			}
		}
	}
	return &TopBody{Dim: req.Dim, Window: (until.Sub(from)).String(), Blocked: req.Blocked, Items: items, Approximate: approx,
		From: from, Until: until, Node: w.node(), TookMS: tookMS(start)}, nil
}

// Summary totals a window (default 24h) from the per-minute, per-hour or
// per-day rollups, whichever still covers it.
func (w *Writer) Summary(ctx context.Context, window time.Duration) (*Summary, error) {
	start := time.Now()
	db, err := w.db()
	if err != nil {
		return nil, err
	}
	from, until := w.window(window)
	d := until.Sub(from)
	res := resolutions[len(resolutions)-1].step
	for _, r := range resolutions {
		if r.keep == 0 || d <= r.keep {
			res = r.step
			break
		}
	}
	fromB := from.Unix() - from.Unix()%res
	rs, err := db.QueryContext(ctx, "SELECT status, sum(count), sum(dur_us) FROM totals WHERE res = ? AND ts >= ? GROUP BY status", res, fromB)
	if err != nil {
		return nil, fmt.Errorf("stats summary: %w", err)
	}
	defer rs.Close()
	s := &Summary{Window: d.String(), From: from, Until: until, ByStatus: map[string]int64{}, ByClass: map[string]int64{}, Node: w.node()}
	var dur int64
	for rs.Next() {
		var st string
		var n, du int64
		if err := rs.Scan(&st, &n, &du); err != nil {
			return nil, fmt.Errorf("stats summary: %w", err)
		}
		s.ByStatus[st] += n
		s.ByClass[StatusClass(st)] += n
		s.Total += n
		dur += du
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("stats summary: %w", err)
	}
	s.Blocked = s.ByClass[ClassBlocked]
	if s.Total > 0 {
		s.BlockedShare = float64(s.Blocked) / float64(s.Total)
		s.AvgLatencyMS = float64(dur) / float64(s.Total) / 1000
	}
	s.TookMS = tookMS(start)
	return s, nil
}

// ClientsRequest asks for the clients list.
type ClientsRequest struct {
	Window time.Duration // default 24h
	Limit  int           // default 100, at most 1000
}

// Clients lists clients seen in the window with their counts, blocked
// counts, last seen time, name and group, busiest first.
func (w *Writer) Clients(ctx context.Context, req ClientsRequest) (*ClientsPage, error) {
	start := time.Now()
	db, err := w.db()
	if err != nil {
		return nil, err
	}
	if req.Limit <= 0 {
		req.Limit = 100
	}
	req.Limit = min(req.Limit, maxLimit)
	from, _ := w.window(req.Window)
	counts, approx, err := w.topCounts(ctx, db, DimClients, from)
	if err != nil {
		return nil, err
	}
	items := make([]ClientItem, 0, len(counts))
	for k, c := range counts {
		items = append(items, ClientItem{Key: k, Count: c.count, Blocked: c.blocked})
	}
	sort.Slice(items, func(i, j int) bool {
		if items[i].Count != items[j].Count {
			return items[i].Count > items[j].Count
		}
		return items[i].Key < items[j].Key
	})
	if len(items) > req.Limit {
		items = items[:req.Limit]
	}
	st, err := db.PrepareContext(ctx, "SELECT name, grp, last_seen FROM clients WHERE key = ?")
	if err != nil {
		return nil, fmt.Errorf("clients: %w", err)
	}
	defer st.Close()
	for i := range items {
		var c clientSeen
		err := st.QueryRowContext(ctx, items[i].Key).Scan(&c.name, &c.group, &c.last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("clients: %w", err)
		}
		c = w.cl.overlay(items[i].Key, c)
		items[i].Name, items[i].Group = c.name, c.group
		if c.last > 0 {
			t := time.UnixMicro(c.last).UTC()
			items[i].LastSeen = &t
		}
	}
	return &ClientsPage{Items: items, Approximate: approx, Node: w.node(), TookMS: tookMS(start)}, nil
}

// TimeseriesRequest asks for queries per client per step.
type TimeseriesRequest struct {
	From, Until time.Time     // default: the last 24h
	Step        time.Duration // default 1h; at least 1m; at most 1000 points
	Clients     []string      // client keys; empty: the Top busiest
	Top         int           // default 5, at most 100
}

// ClientTimeseries counts queries per client per step from the raw rows
// (the answer is marked partial when raw retention no longer covers From).
func (w *Writer) ClientTimeseries(ctx context.Context, req TimeseriesRequest) (*ClientTimeseriesBody, error) {
	start := time.Now()
	db, err := w.db()
	if err != nil {
		return nil, err
	}
	if req.Until.IsZero() {
		req.Until = w.now().UTC()
	}
	if req.From.IsZero() {
		req.From = req.Until.Add(-24 * time.Hour)
	}
	if req.Step <= 0 {
		req.Step = time.Hour
	}
	if req.Step < time.Minute || !req.From.Before(req.Until) || req.Until.Sub(req.From)/req.Step > 1000 {
		return nil, fmt.Errorf("%w: step at least 1m, from before until, at most 1000 points", ErrInvalid)
	}
	if req.Top <= 0 {
		req.Top = 5
	}
	req.Top = min(req.Top, 100)
	step := int64(req.Step / time.Microsecond)
	from := req.From.UnixMicro() - req.From.UnixMicro()%step
	until := req.Until.UnixMicro()
	body := &ClientTimeseriesBody{Step: req.Step.String(), Scope: "node", Nodes: []string{w.node()},
		From: time.UnixMicro(from).UTC(), Until: req.Until.UTC(), Clients: []ClientKey{}, Points: []ClientPoint{}}
	keys := req.Clients
	if len(keys) == 0 {
		counts, approx, err := w.topCounts(ctx, db, DimClients, req.From)
		if err != nil {
			return nil, err
		}
		body.Approximate = approx
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if counts[keys[i]].count != counts[keys[j]].count {
				return counts[keys[i]].count > counts[keys[j]].count
			}
			return keys[i] < keys[j]
		})
		keys = keys[:min(len(keys), req.Top)]
	}
	idx := map[string]int{}
	for i, k := range keys {
		idx[k] = i
		ck := ClientKey{Key: k}
		var c clientSeen
		_ = db.QueryRowContext(ctx, "SELECT name FROM clients WHERE key = ?", k).Scan(&c.name)
		ck.Name = w.cl.overlay(k, c).name
		body.Clients = append(body.Clients, ck)
	}
	// The oldest block's oldest row (or the retention cut, when later)
	// stands for the oldest ts.
	var oldest sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT ts_min FROM blocks ORDER BY first LIMIT 1").Scan(&oldest); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("client timeseries: %w", err)
	}
	oldest.Int64 = max(oldest.Int64, w.store.cut.v.Load())
	body.Partial = !oldest.Valid || oldest.Int64 > from
	points := map[int64][]int64{}
	if len(keys) > 0 && oldest.Valid {
		rdb := &w.store.rstmts
		lo, hi, err := w.idWindow(ctx, rdb, time.UnixMicro(from), req.Until)
		if err != nil {
			return nil, fmt.Errorf("client timeseries: %w", err)
		}
		// Per client: its ids from the postings, chunk by chunk of
		// buckets, then their rows counted per step.
		for _, k := range keys {
			src := nameSource(postClient, k)
			count := func(r *Row) bool {
				if ts := r.Time.UnixMicro(); r.Client == k && ts >= from && ts < until {
					bt := ts / step * step
					p := points[bt]
					if p == nil {
						p = make([]int64, len(keys))
						points[bt] = p
					}
					p[idx[k]]++
				}
				return false // counted, not collected
			}
			for b := bucketOf(max(hi-1, 0)); hi > lo && b >= bucketOf(lo); b -= maxChunkBuckets {
				ids, err := postingIDs(ctx, db, w.store.pend.Load(), src, b, min(maxChunkBuckets, b-bucketOf(lo)+1), lo, hi)
				if err != nil {
					return nil, fmt.Errorf("client timeseries: %w", err)
				}
				if _, err := w.store.rowsByID(ctx, rdb, ids, count, len(ids), nil); err != nil {
					return nil, fmt.Errorf("client timeseries: %w", err)
				}
			}
		}
	}
	for b := from; b < until; b += step {
		body.Points = append(body.Points, ClientPoint{TS: time.UnixMicro(b).UTC(), Counts: points[b]})
	}
	body.TookMS = tookMS(start)
	return body, nil
}
