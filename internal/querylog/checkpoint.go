package querylog

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"time"

	"github.com/svcdns/svc/internal/sqlitedb"
)

// The writer's connection would checkpoint inside the commit that grows the
// WAL past 1,000 pages (4 MiB, about a second of rows at full rate), and
// that checkpoint fsyncs the WAL and the database file: on a busy disk the
// writer then waited 40-80 ms, the data plane's rows filled its buffer, and
// rows were dropped (TestSaturatedLoopDropsNoRows under disk load). The
// checkpointer does that work on its own connection instead; a passive
// checkpoint takes no lock the writer needs, so commits go on meanwhile.
//
// The writer keeps SQLite's own checkpoint as a backstop at 16,384 pages
// (64 MiB): the WAL restarts from its beginning only at a commit that
// finds it wholly copied back, and a checkpoint that races the writer's
// commits may never find that moment.
const (
	writerAutoCheckpoint = 16384
	// checkpointEvery spaces the checkpoints: each costs two fsyncs, so
	// they are not run per commit (a commit every 33 ms at full rate).
	checkpointEvery = 250 * time.Millisecond
)

var checkpointOptions = sqlitedb.Options{BusyTimeout: 10 * time.Second, WAL: true, Synchronous: sqlitedb.SyncNormal, AutoCheckpoint: -1}

type checkpointer struct {
	db   *sql.DB
	log  *slog.Logger
	kick chan struct{} // capacity 1: a commit happened since the last run
	stop chan struct{}
	wg   sync.WaitGroup
}

func startCheckpointer(path string, log *slog.Logger) (*checkpointer, error) {
	db, err := sqlitedb.OpenSingle(path, checkpointOptions)
	if err != nil {
		return nil, err
	}
	c := &checkpointer{db: db, log: log, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	c.wg.Add(1)
	go c.run()
	return c, nil
}

// committed tells the checkpointer that the WAL grew; it never blocks.
func (c *checkpointer) committed() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer c.wg.Done()
	ctx := context.Background()
	pace := time.NewTimer(0)
	defer pace.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		if _, err := c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
			c.log.Warn("query log checkpoint failed; the writer's own checkpoint takes over at 64 MiB of WAL", "err", err)
		}
		pace.Reset(checkpointEvery)
		select {
		case <-c.stop:
			return
		case <-pace.C:
		}
	}
}

// close stops the checkpointer; the last connection to close (the
// writer's) checkpoints what is left.
func (c *checkpointer) close() error {
	close(c.stop)
	c.wg.Wait()
	return c.db.Close()
}
