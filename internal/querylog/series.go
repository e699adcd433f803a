package querylog

import (
	"context"
	"fmt"
	"time"
)

// SeriesPoint is one bucket of the totals over time.
type SeriesPoint struct {
	TS      time.Time `json:"ts" doc:"bucket start"`
	Total   int64     `json:"total"`
	Blocked int64     `json:"blocked"`
}

// Series returns the queries and blocked queries of a window (default 24h)
// in buckets of step (at least 1m, at most 1000 buckets), every bucket
// present, from the per-minute, per-hour or per-day totals: the coarsest
// rollup still kept for the window whose bucket divides step. It reads
// rollup rows only, so it costs the same at 10 million rows as at ten
// (the overview's chart used to sum the per-client series, which reads the
// rows of the busiest clients: seconds at 10^5 rows).
func (w *Writer) Series(ctx context.Context, window, step time.Duration) ([]SeriesPoint, error) {
	db, err := w.db()
	if err != nil {
		return nil, err
	}
	from, until := w.window(window)
	d := until.Sub(from)
	if step < time.Minute || d/step > 1000 {
		return nil, fmt.Errorf("%w: step %s: at least 1m and at most 1000 buckets in the window (%s)", ErrInvalid, step, d)
	}
	st := int64(step / time.Second)
	var res int64
	for _, r := range resolutions {
		if (r.keep == 0 || d <= r.keep) && st%r.step == 0 {
			res = r.step // resolutions go from fine to coarse: the last fit wins
		}
	}
	if res == 0 {
		return nil, fmt.Errorf("%w: step %s is not a whole number of minutes", ErrInvalid, step)
	}
	fromB := from.Unix() - from.Unix()%st
	n := int((until.Unix()-fromB)/st) + 1
	pts := make([]SeriesPoint, n)
	for i := range pts {
		pts[i].TS = time.Unix(fromB+int64(i)*st, 0).UTC()
	}
	rs, err := db.QueryContext(ctx, "SELECT ts, status, sum(count) FROM totals WHERE res = ? AND ts >= ? GROUP BY ts, status", res, fromB)
	if err != nil {
		return nil, fmt.Errorf("stats series: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		var ts, c int64
		var status string
		if err := rs.Scan(&ts, &status, &c); err != nil {
			return nil, fmt.Errorf("stats series: %w", err)
		}
		i := int((ts - fromB) / st)
		if i < 0 || i >= n {
			continue
		}
		pts[i].Total += c
		if StatusClass(status) == ClassBlocked {
			pts[i].Blocked += c
		}
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("stats series: %w", err)
	}
	return pts, nil
}
