package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/svcdns/svc/internal/atomicfile"
)

// Published is what a target was last told about one RRset.
type Published struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Records are the records in presentation form, sorted. Nil means the
	// RRset was claimed (an UPDATE was about to be sent) but not confirmed:
	// it is ours to remove, and sent again.
	Records []string `json:"records"`
}

// Snapshot is a target's remembered state.
type Snapshot struct {
	Version int                  `json:"version"`
	Server  string               `json:"server"`
	Zone    string               `json:"zone"`
	RRsets  map[string]Published `json:"rrsets"` // by "name TYPE"
}

const snapshotVersion = 1

// State keeps each target's Snapshot across restarts: which RRsets this
// service published, the only ones it ever removes.
type State interface {
	// Load returns the target's snapshot; nil when there is none.
	Load(ctx context.Context, target string) (*Snapshot, error)
	Save(ctx context.Context, target string, s *Snapshot) error
}

// FileState keeps one JSON file per target in Dir (SQLite mode: the data
// directory's publish/ folder).
type FileState struct{ Dir string }

func (f FileState) path(target string) string { return filepath.Join(f.Dir, target+".json") }

// Load implements State.
func (f FileState) Load(_ context.Context, target string) (*Snapshot, error) {
	b, err := os.ReadFile(f.path(target))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", f.path(target), err)
	}
	if s.Version != snapshotVersion {
		return nil, fmt.Errorf("%s: version %d, want %d", f.path(target), s.Version, snapshotVersion)
	}
	return &s, nil
}

// Save implements State: write a temporary file, sync, rename, so a crash
// leaves the old or the new snapshot, never half of one.
func (f FileState) Save(_ context.Context, target string, s *Snapshot) error {
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return atomicfile.Write(f.path(target), b, 0o600)
}
