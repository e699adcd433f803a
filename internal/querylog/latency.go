package querylog

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"
)

// Upstream latency: per hour and upstream, a histogram of the answer time
// of forwarded queries in log-spaced buckets (each 30% wider than the one
// before, from 100 µs; the last is open). /stats/top reports its average
// and 95th percentile for the upstreams dimension without reading raw rows,
// so the answer costs the same at 10 million rows as at ten. The p95 is
// interpolated inside its bucket: within about 15% of the exact value.
const schemaUpstreamLatency = `
CREATE TABLE IF NOT EXISTS upstream_latency (
  hour INTEGER NOT NULL,     -- unix seconds of the hour
  upstream TEXT NOT NULL,
  bucket INTEGER NOT NULL,   -- latBucket of the answer time
  count INTEGER NOT NULL,
  dur_us INTEGER NOT NULL,   -- sum of the answer times in the bucket
  PRIMARY KEY (hour, upstream, bucket)
) WITHOUT ROWID;`

const (
	latBuckets = 40
	latBase    = 100.0 // µs, the upper bound of bucket 0
	latFactor  = 1.3
)

// latBucket is the bucket of an answer time in µs.
func latBucket(us int64) int {
	if us < int64(latBase) {
		return 0
	}
	b := int(math.Log(float64(us)/latBase)/math.Log(latFactor)) + 1
	return min(b, latBuckets-1)
}

// latBounds are bucket b's lower and upper bounds in µs (the last bucket's
// upper bound is its lower bound times the factor, for interpolation).
func latBounds(b int) (lo, hi float64) {
	if b == 0 {
		return 0, latBase
	}
	lo = latBase * math.Pow(latFactor, float64(b-1))
	return lo, lo * latFactor
}

// latHist is one upstream's histogram.
type latHist struct {
	n   [latBuckets]int64
	dur [latBuckets]int64
}

func (h *latHist) add(us int64) {
	b := latBucket(us)
	h.n[b]++
	h.dur[b] += us
}

// stats returns the average and the 95th percentile in ms.
func (h *latHist) stats() (avg, p95 float64) {
	var n, dur int64
	for i := range h.n {
		n += h.n[i]
		dur += h.dur[i]
	}
	if n == 0 {
		return 0, 0
	}
	avg = float64(dur) / float64(n) / 1000
	rank := 0.95 * float64(n)
	var seen int64
	for i := range h.n {
		if h.n[i] == 0 {
			continue
		}
		if float64(seen+h.n[i]) >= rank {
			lo, hi := latBounds(i)
			frac := (rank - float64(seen)) / float64(h.n[i])
			return avg, (lo + frac*(hi-lo)) / 1000
		}
		seen += h.n[i]
	}
	return avg, avg
}

// countLatencyLocked adds a forwarded row's answer time to the current
// hour. Cached and stale answers carry the upstream that filled the cache
// but not its latency, so they are left out.
func (w *Writer) countLatencyLocked(r *Row) {
	if r.Upstream == "" || r.Status == "cached" || r.Status == "stale" {
		return
	}
	h := w.hour.lat[r.Upstream]
	if h == nil {
		if len(w.hour.lat) >= w.opts.DomainCap {
			return
		}
		h = &latHist{}
		w.hour.lat[r.Upstream] = h
	}
	h.add(r.Duration.Microseconds())
}

const upstreamLatencySQL = `INSERT INTO upstream_latency (hour, upstream, bucket, count, dur_us) VALUES (?,?,?,?,?)
ON CONFLICT (hour, upstream, bucket) DO UPDATE SET count = count + excluded.count, dur_us = dur_us + excluded.dur_us`

// flushLatencyLocked writes the current hour's histograms.
func (w *Writer) flushLatencyLocked(d *dconn) error {
	for up, h := range w.hour.lat {
		for b := range h.n {
			if h.n[b] == 0 {
				continue
			}
			if err := d.exec(upstreamLatencySQL, w.hour.hour, up, int64(b), h.n[b], h.dur[b]); err != nil {
				return fmt.Errorf("write upstream_latency: %w", err)
			}
		}
	}
	return nil
}

// upstreamLatency sums the histograms of the window (database and the
// current hour in memory) per upstream.
func (w *Writer) upstreamLatency(ctx context.Context, db *sql.DB, from time.Time) (map[string]*latHist, error) {
	fromHour := from.Unix() - from.Unix()%3600
	out := map[string]*latHist{}
	rs, err := db.QueryContext(ctx, "SELECT upstream, bucket, sum(count), sum(dur_us) FROM upstream_latency WHERE hour >= ? GROUP BY upstream, bucket", fromHour)
	if err != nil {
		return nil, fmt.Errorf("upstream latency: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		var up string
		var b int
		var n, dur int64
		if err := rs.Scan(&up, &b, &n, &dur); err != nil {
			return nil, fmt.Errorf("upstream latency: %w", err)
		}
		if b < 0 || b >= latBuckets {
			continue
		}
		h := out[up]
		if h == nil {
			h = &latHist{}
			out[up] = h
		}
		h.n[b] += n
		h.dur[b] += dur
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("upstream latency: %w", err)
	}
	w.hourMu.Lock()
	if w.hour.hour >= fromHour {
		for up, c := range w.hour.lat {
			h := out[up]
			if h == nil {
				h = &latHist{}
				out[up] = h
			}
			for b := range c.n {
				h.n[b] += c.n[b]
				h.dur[b] += c.dur[b]
			}
		}
	}
	w.hourMu.Unlock()
	return out, nil
}
