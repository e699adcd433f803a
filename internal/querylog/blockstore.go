package querylog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// layoutBlocks names the block layout of schema 2 in meta ('layout').
const layoutBlocks = "blocks-1"

// schemaV2Blocks is the block layout: one row per written batch (see
// block.go). The two small indexes (one entry per block) turn since/until
// into id bounds exactly, without assuming how far rows are out of time
// order.
const schemaV2Blocks = `
CREATE TABLE blocks (
  first INTEGER PRIMARY KEY, -- the first row id; ids first..last are all in data
  last INTEGER NOT NULL,
  ts_min INTEGER NOT NULL,   -- unix microseconds
  ts_max INTEGER NOT NULL,
  data BLOB NOT NULL
);
CREATE INDEX blocks_ts_max ON blocks(ts_max);
CREATE INDEX blocks_ts_min ON blocks(ts_min, last);`

const (
	blockAtSQL     = "SELECT first, last, data FROM blocks WHERE first <= ? ORDER BY first DESC LIMIT 1"
	blockAfterSQL  = "SELECT first, last, data FROM blocks WHERE first > ? ORDER BY first LIMIT 1"
	sinceSQL       = "SELECT min(first) FROM blocks WHERE ts_max >= ?"
	untilSQL       = "SELECT max(last) FROM blocks WHERE ts_min < ?"
	insertBlockSQL = "INSERT INTO blocks (first, last, ts_min, ts_max, data) VALUES (?, ?, ?, ?, ?)"
)

// blockCacheSize bounds the decoded blocks kept for reads (a decoded block
// of 5000 rows is about 100-300 KiB).
const blockCacheSize = 32

// blockCache keeps recently decoded blocks: a page of 50 rows usually
// comes from one or two blocks, and the next page from the same ones.
// Blocks never change; maintenance deletes them and then purges the cache.
type blockCache struct {
	mu   sync.Mutex
	gen  uint64 // bumped by purge: a block read before it is not cached
	ring []*rowBlock
	next int
}

func (c *blockCache) find(id int64) *rowBlock {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.ring {
		if b != nil && b.contains(id) {
			return b
		}
	}
	return nil
}

func (c *blockCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *blockCache) put(b *rowBlock, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if c.ring == nil {
		c.ring = make([]*rowBlock, blockCacheSize)
	}
	c.ring[c.next] = b
	c.next = (c.next + 1) % len(c.ring)
}

func (c *blockCache) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.ring)
	c.gen++
}

// rawCut hides rows older than the last retention cut (unix microseconds):
// retention deletes whole blocks, so the rows of a block that is only
// partly expired stay in the file until the block's newest row expires.
type rawCut struct{ v atomic.Int64 }

func (c *rawCut) visible(r *Row) bool { return r.Time.UnixMicro() >= c.v.Load() }

// loadRawCut reads meta 'raw_cut'.
func (s *store) loadRawCut(ctx context.Context) error {
	var v sql.NullInt64
	err := s.w.QueryRowContext(ctx, "SELECT v FROM meta WHERE k = 'raw_cut'").Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read retention cut: %w", err)
	}
	s.cut.v.Store(v.Int64)
	return nil
}

// setRawCut moves the cut forward (never back: rows once expired stay
// hidden, as they were deleted before blocks).
func (s *store) setRawCut(ctx context.Context, db sqlExecQuerier, cut int64) error {
	if cut <= s.cut.v.Load() {
		return nil
	}
	if _, err := db.ExecContext(ctx, "INSERT OR REPLACE INTO meta (k, v) VALUES ('raw_cut', ?)", cut); err != nil {
		return fmt.Errorf("store retention cut: %w", err)
	}
	s.cut.v.Store(cut)
	return nil
}

// readBlock runs a block query (blockAtSQL, blockAfterSQL) and decodes the
// block; nil when there is none.
func (s *store) readBlock(ctx context.Context, db rowStore, q string, id int64) (*rowBlock, error) {
	gen := s.cache.generation()
	var first, last int64
	var data []byte
	err := db.QueryRowContext(ctx, q, id).Scan(&first, &last, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read query log block: %w", err)
	}
	b, err := decodeBlock(first, data, s.names)
	if err != nil {
		return nil, fmt.Errorf("read query log block %d: %w", first, err)
	}
	if b.last != last {
		return nil, fmt.Errorf("read query log block %d: %w: %d rows, want %d", first, errBlockCorrupt, b.last-first+1, last-first+1)
	}
	s.cache.put(b, gen)
	return b, nil
}

// blockAtOrBefore returns the block holding id or, when id falls in a gap,
// the nearest block below it (nil: none).
func (s *store) blockAtOrBefore(ctx context.Context, db rowStore, id int64) (*rowBlock, error) {
	if b := s.cache.find(id); b != nil {
		return b, nil
	}
	return s.readBlock(ctx, db, blockAtSQL, id)
}

// blockAtOrAfter returns the block holding id or the nearest block above
// it (nil: none).
func (s *store) blockAtOrAfter(ctx context.Context, db rowStore, id int64) (*rowBlock, error) {
	b, err := s.blockAtOrBefore(ctx, db, id)
	if err != nil || b != nil && b.contains(id) {
		return b, err
	}
	return s.readBlock(ctx, db, blockAfterSQL, id)
}

// scanRows appends the visible rows with ids in [lo, hi) that pass keep,
// newest first, until out holds limit rows.
func (s *store) scanRows(ctx context.Context, db rowStore, lo, hi int64, keep func(*Row) bool, limit int, out []Row) ([]Row, error) {
	var r Row
	for id := hi - 1; id >= lo && len(out) < limit; {
		b, err := s.blockAtOrBefore(ctx, db, id)
		if err != nil || b == nil {
			return out, err
		}
		for id = min(id, b.last); id >= max(lo, b.first) && len(out) < limit; id-- {
			b.row(id, &r)
			if s.cut.visible(&r) && keep(&r) {
				out = append(out, r)
			}
		}
		id = b.first - 1
	}
	return out, nil
}

// rowsByID appends the visible rows of ids (descending) that pass keep,
// until out holds limit rows; ids without a row are skipped.
func (s *store) rowsByID(ctx context.Context, db rowStore, ids []int64, keep func(*Row) bool, limit int, out []Row) ([]Row, error) {
	var r Row
	var b *rowBlock
	for _, id := range ids {
		if len(out) >= limit {
			break
		}
		if b == nil || !b.contains(id) {
			nb, err := s.blockAtOrBefore(ctx, db, id)
			if err != nil {
				return out, err
			}
			if nb == nil || !nb.contains(id) {
				continue
			}
			b = nb
		}
		b.row(id, &r)
		if s.cut.visible(&r) && keep(&r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// execer runs one statement: the writer's driver connection (*dconn) or,
// for the conversions at open, a transaction (txExec).
type execer interface {
	exec(query string, args ...any) error
}

// txExec runs statements in a database/sql transaction.
type txExec struct {
	ctx context.Context
	tx  *sql.Tx
}

func (t txExec) exec(query string, args ...any) error {
	_, err := t.tx.ExecContext(t.ctx, query, args...)
	return err
}

// insertBlock writes rows (ids assigned, contiguous) as one block with its
// postings; names staged by the encoder are inserted first.
func insertBlock(d execer, nm *names, enc *blockEncoder, pb *postingBuilder, rows []Row) error {
	if len(rows) == 0 {
		return nil
	}
	deferred := pb.pub != nil
	if !deferred {
		pb.reset()
	}
	data, tsMin, tsMax := enc.encode(nm, pb, rows)
	if deferred {
		pb.publish() // before the commit: see postingIDs
	}
	for _, e := range nm.staged {
		if err := d.exec("INSERT INTO names (id, kind, name) VALUES (?, ?, ?)", e.id, int64(e.kind), e.name); err != nil {
			return fmt.Errorf("insert names: %w", err)
		}
	}
	if err := d.exec(insertBlockSQL, rows[0].ID, rows[len(rows)-1].ID, tsMin, tsMax, data); err != nil {
		return fmt.Errorf("insert block: %w", err)
	}
	if dc, ok := d.(*dconn); ok {
		if deferred {
			return pb.writeClosed(dc, bucketOf(rows[len(rows)-1].ID+1))
		}
		return pb.write(dc)
	}
	return pb.writeEach(d)
}

// recoverBlocks is how many blocks recoverPostings rebuilds in one
// transaction.
const recoverBlocks = 16

// recoverPostings makes the postings table cover every stored row. The
// writer keeps a bucket's postings in memory until the bucket is complete
// (postingBuilder.pub) and records in meta ('postings_through') the last
// id covered; after a crash the rows after it have no postings until they
// are rebuilt here from their blocks. A query log without the key (written
// before postings were deferred: every batch wrote its own) or with one
// past maxID (retention emptied the table) is recorded as covered through
// maxID.
//
// Each block's postings are rebuilt on their own, as a writer that wrote
// every batch's postings wrote them: rows such a writer already wrote
// (an earlier binary run after a crash of this one) are the same rows,
// and are kept (INSERT OR IGNORE).
func (s *store) recoverPostings(ctx context.Context, maxID int64) error {
	var through sql.NullInt64
	err := s.w.QueryRowContext(ctx, "SELECT v FROM meta WHERE k = 'postings_through'").Scan(&through)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read postings_through: %w", err)
	}
	if through.Valid && through.Int64 == maxID {
		return nil
	}
	from := maxID + 1 // no key, or one past maxID: nothing to rebuild
	if through.Valid && through.Int64 < maxID {
		from = through.Int64 + 1
	}
	pb := postingBuilder{ignoreDup: true}
	var r Row
	for {
		var blocks []*rowBlock
		for id := from; id <= maxID && len(blocks) < recoverBlocks; {
			b, err := s.blockAtOrAfter(ctx, s.w, id)
			if err != nil {
				return fmt.Errorf("recover postings: %w", err)
			}
			if b == nil {
				break
			}
			blocks = append(blocks, b)
			id = b.last + 1
		}
		last := maxID
		if n := len(blocks); n > 0 {
			last = blocks[n-1].last
		}
		err := s.writeTx(ctx, func(d *dconn) error {
			for _, b := range blocks {
				pb.reset()
				for id := max(b.first, from); id <= b.last; id++ {
					b.row(id, &r)
					pb.addRow(id, r.Domain, 0, r.Client, s.stored(kStatus, r.Status))
				}
				if err := pb.write(d); err != nil {
					return err
				}
			}
			return d.exec(throughSQL, last)
		})
		if err != nil {
			return fmt.Errorf("recover postings: %w", err)
		}
		if last >= maxID {
			return nil
		}
		from = last + 1
	}
}
