package querylog

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// convertBatch is how many compact rows the conversion reads at a time
// (and the largest block it writes), like the writer's batch.
const convertBatch = 5000

// convertCompact turns the compact layout's queries table into blocks in
// the open transaction: rows are read in id order, 5000 at a time, each
// run of contiguous ids becomes a block (a gap, left by a failed batch or
// a deletion, ends a block), and the postings are rebuilt with them. Ids,
// values, names, rollups and meta stay.
func convertCompact(ctx context.Context, tx *sql.Tx) error {
	wrap := func(err error) error { return fmt.Errorf("convert querylog to blocks: %w", err) }
	for _, q := range []string{schemaV2Blocks, "DELETE FROM postings"} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return wrap(err)
		}
	}
	nm := newNames()
	if err := nm.load(ctx, tx); err != nil {
		return wrap(err)
	}
	ex := txExec{ctx: ctx, tx: tx}
	var enc blockEncoder
	var pb postingBuilder
	rows := make([]Row, 0, convertBatch)
	after := int64(-1 << 62)
	for {
		var err error
		if rows, err = readCompactRows(ctx, tx, nm, after, rows[:0]); err != nil {
			return wrap(err)
		}
		if len(rows) == 0 {
			break
		}
		for start := 0; start < len(rows); {
			end := start + 1
			for end < len(rows) && rows[end].ID == rows[end-1].ID+1 {
				end++
			}
			if err := insertBlock(ex, nm, &enc, &pb, rows[start:end]); err != nil {
				return wrap(err)
			}
			nm.committed()
			start = end
		}
		after = rows[len(rows)-1].ID
	}
	for _, q := range []string{"DROP TABLE queries", layoutSQL, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return wrap(err)
		}
	}
	return nil
}

// readCompactRows appends up to convertBatch rows of the compact queries
// table with id > after, in id order.
func readCompactRows(ctx context.Context, tx *sql.Tx, nm *names, after int64, out []Row) ([]Row, error) {
	rs, err := tx.QueryContext(ctx, "SELECT "+rowColumns+" FROM queries WHERE id > ? ORDER BY id LIMIT ?", after, convertBatch)
	if err != nil {
		return out, fmt.Errorf("read rows: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		r, err := scanCompactRow(nm, rs)
		if err != nil {
			return out, fmt.Errorf("read rows: %w", err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		return out, fmt.Errorf("read rows: %w", err)
	}
	return out, nil
}

// scanCompactRow decodes a compact row selected with rowColumns.
func scanCompactRow(nm *names, sc interface{ Scan(...any) error }) (Row, error) {
	var r Row
	var ts, dur int64
	var domain, client sql.NullString
	var enc [nKinds]any
	dest := make([]any, 0, nRowColumns)
	dest = append(dest, &r.ID, &ts, &enc[kStatus], &domain, &client)
	for k := kQType; k < nKinds; k++ {
		dest = append(dest, &enc[k])
	}
	dest = append(dest, &dur)
	if err := sc.Scan(dest...); err != nil {
		return r, err
	}
	r.Domain, r.Client = domain.String, client.String
	for k := range enc {
		*rowField(&r, k) = nm.decode(enc[k])
	}
	r.Time = time.UnixMicro(ts).UTC()
	r.Duration = time.Duration(dur) * time.Microsecond
	return r, nil
}
