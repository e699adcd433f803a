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
	// disorder bounds how far a row's ts may precede rows written before it
	// (query start vs. commit order); time bounds become id bounds with it.
	disorder = 30 * time.Second
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
	for _, c := range [][2]string{{f.List, r.List}, {f.QType, r.QType}, {f.Status, r.Status}, {f.Upstream, r.Upstream}, {f.Zone, r.Zone}, {f.Policy, r.Policy}} {
		if c[0] != "" && c[0] != c[1] {
			return false
		}
	}
	if !f.Since.IsZero() && r.Time.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !r.Time.Before(f.Until) {
		return false
	}
	return true
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

// where builds the SQL condition of a filter with keyset bound beforeID.
func (w *Writer) where(ctx context.Context, db *sql.DB, f *Filter, beforeID int64) (string, []any, error) {
	var conds []string
	var args []any
	eq := func(col, v string) {
		if v != "" {
			conds = append(conds, col+" = ?")
			args = append(args, v)
		}
	}
	// Client and exact domain go through the hash indexes, then the text.
	if f.Client != "" {
		conds = append(conds, "ch = ? AND client = ?")
		args = append(args, nameHash(f.Client), f.Client)
	}
	if f.Domain != "" {
		if f.DomainMatch == MatchSubstring {
			conds = append(conds, "instr(domain, ?) > 0")
			args = append(args, f.Domain)
		} else {
			conds = append(conds, "dh = ? AND domain = ?")
			args = append(args, nameHash(f.Domain), f.Domain)
		}
	}
	eq("list", f.List)
	eq("qtype", f.QType)
	eq("status", f.Status)
	eq("upstream", f.Upstream)
	eq("zone", f.Zone)
	eq("policy", f.Policy)
	if f.StatusClass != "" {
		sts, ok := statusesOfClass(f.StatusClass)
		if !ok {
			return "", nil, fmt.Errorf("%w: unknown status class %q", ErrInvalid, f.StatusClass)
		}
		conds = append(conds, "status IN ("+strings.TrimSuffix(strings.Repeat("?,", len(sts)), ",")+")")
		for _, s := range sts {
			args = append(args, s)
		}
	}
	// Time bounds become id bounds (rows are written in about time order),
	// so the newest-first walk stays on the primary key; the ts conditions
	// keep the answer exact.
	if !f.Until.IsZero() {
		var id sql.NullInt64
		if err := db.QueryRowContext(ctx, "SELECT id FROM queries WHERE ts >= ? ORDER BY ts LIMIT 1", f.Until.Add(disorder).UnixMicro()).Scan(&id); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", nil, fmt.Errorf("query log until bound: %w", err)
		}
		if id.Valid && (beforeID == 0 || id.Int64 < beforeID) {
			beforeID = id.Int64
		}
		conds = append(conds, "ts < ?")
		args = append(args, f.Until.UnixMicro())
	}
	if !f.Since.IsZero() {
		var id sql.NullInt64
		err := db.QueryRowContext(ctx, "SELECT id FROM queries WHERE ts >= ? ORDER BY ts LIMIT 1", f.Since.Add(-disorder).UnixMicro()).Scan(&id)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", nil, fmt.Errorf("query log since bound: %w", err)
		}
		if id.Valid {
			conds = append(conds, "id >= ?")
			args = append(args, id.Int64)
		}
		conds = append(conds, "ts >= ?")
		args = append(args, f.Since.UnixMicro())
	}
	if beforeID > 0 {
		conds = append(conds, "id < ?")
		args = append(args, beforeID)
	}
	if len(conds) == 0 {
		return "", nil, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

// scanBounded reports whether the filter has no indexed equality (client,
// exact domain, status, status class) but filters on something else.
func (f *Filter) scanBounded() bool {
	if f.Client != "" || (f.Domain != "" && f.DomainMatch != MatchSubstring) || f.Status != "" || f.StatusClass != "" {
		return false
	}
	return f.Domain != "" || f.List != "" || f.QType != "" || f.Upstream != "" || f.Zone != "" || f.Policy != ""
}

// hasRowsBefore reports whether a row below id is at or after since.
func (w *Writer) hasRowsBefore(ctx context.Context, db *sql.DB, id int64, since time.Time) bool {
	var ts sql.NullInt64
	_ = db.QueryRowContext(ctx, "SELECT ts FROM queries WHERE id < ? ORDER BY id DESC LIMIT 1", id).Scan(&ts)
	return ts.Valid && ts.Int64 >= since.Add(-disorder).UnixMicro()
}

func scanRow(sc interface{ Scan(...any) error }) (Row, error) {
	var r Row
	var ts, dur int64
	err := sc.Scan(&r.ID, &ts, &r.Client, &r.Domain, &r.QType, &r.Status, &r.Node, &r.ClientName, &r.Rcode, &r.Reason,
		&r.List, &r.Rule, &r.Policy, &r.Upstream, &r.Zone, &r.Transport, &dur)
	r.Time = time.UnixMicro(ts).UTC()
	r.Duration = time.Duration(dur) * time.Microsecond
	return r, err
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
	where, args, err := w.where(ctx, db, &f, before)
	if err != nil {
		return nil, "", err
	}
	// Without an indexed equality a rare match would scan the whole table:
	// such a page examines at most scanBudget ids and, when it is not full,
	// its continue token resumes below the scanned window.
	var low int64
	if f.scanBounded() {
		top := before
		if top == 0 {
			if err := db.QueryRowContext(ctx, "SELECT coalesce(max(id), 0) + 1 FROM queries").Scan(&top); err != nil {
				return nil, "", fmt.Errorf("query log list: %w", err)
			}
		}
		var minID int64
		if err := db.QueryRowContext(ctx, "SELECT coalesce(min(id), 0) FROM queries").Scan(&minID); err != nil {
			return nil, "", fmt.Errorf("query log list: %w", err)
		}
		if top-w.opts.ScanBudget > minID {
			low = top - w.opts.ScanBudget
			if where == "" {
				where = " WHERE id >= ?"
			} else {
				where += " AND id >= ?"
			}
			args = append(args, low)
		}
	}
	rs, err := db.QueryContext(ctx, "SELECT "+rowColumns+" FROM queries"+where+" ORDER BY id DESC LIMIT ?", append(args, limit)...)
	if err != nil {
		return nil, "", fmt.Errorf("query log list: %w", err)
	}
	defer rs.Close()
	rows := make([]Row, 0, limit)
	for rs.Next() {
		r, err := scanRow(rs)
		if err != nil {
			return nil, "", fmt.Errorf("query log list: %w", err)
		}
		rows = append(rows, r)
	}
	if err := rs.Err(); err != nil {
		return nil, "", fmt.Errorf("query log list: %w", err)
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
	rows, next, err := w.Rows(ctx, f)
	if err != nil {
		return nil, err
	}
	p := &QueryPage{Items: make([]QueryItem, len(rows)), Node: w.node(), Continue: next}
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
		var last int64
		err := st.QueryRowContext(ctx, items[i].Key).Scan(&items[i].Name, &items[i].Group, &last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("clients: %w", err)
		}
		if last > 0 {
			t := time.UnixMicro(last).UTC()
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
		_ = db.QueryRowContext(ctx, "SELECT name FROM clients WHERE key = ?", k).Scan(&ck.Name)
		body.Clients = append(body.Clients, ck)
	}
	var oldest sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT min(ts) FROM queries").Scan(&oldest); err != nil {
		return nil, fmt.Errorf("client timeseries: %w", err)
	}
	body.Partial = !oldest.Valid || oldest.Int64 > from
	points := map[int64][]int64{}
	if len(keys) > 0 {
		args := []any{step, step}
		for _, k := range keys {
			args = append(args, nameHash(k))
		}
		for _, k := range keys {
			args = append(args, k)
		}
		args = append(args, from, until)
		in := strings.TrimSuffix(strings.Repeat("?,", len(keys)), ",")
		rs, err := db.QueryContext(ctx, "SELECT (ts/?)*? AS b, client, count(*) FROM queries WHERE ch IN ("+in+
			") AND client IN ("+in+") AND ts >= ? AND ts < ? GROUP BY b, client", args...)
		if err != nil {
			return nil, fmt.Errorf("client timeseries: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			var b, n int64
			var k string
			if err := rs.Scan(&b, &k, &n); err != nil {
				return nil, fmt.Errorf("client timeseries: %w", err)
			}
			p := points[b]
			if p == nil {
				p = make([]int64, len(keys))
				points[b] = p
			}
			p[idx[k]] += n
		}
		if err := rs.Err(); err != nil {
			return nil, fmt.Errorf("client timeseries: %w", err)
		}
	}
	for b := from; b < until; b += step {
		body.Points = append(body.Points, ClientPoint{TS: time.UnixMicro(b).UTC(), Counts: points[b]})
	}
	body.TookMS = tookMS(start)
	return body, nil
}
