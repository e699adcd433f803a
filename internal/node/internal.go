package node

import (
	"context"

	"github.com/svcdns/svc/internal/internalapi"
)

// internalDeps serve the node-to-node listener from the node's live state.
type internalDeps struct {
	node  string
	snaps *snapshotter
	ops   *Ops
	store *openedStore
	role  string
	// blocking is the blocking toggle, reported so svc edge can flush its
	// cache when it changes (nil: not reported).
	blocking func() bool
}

func (d internalDeps) Status(context.Context) internalapi.NodeStatus {
	st := selfStatus(d)
	if d.blocking != nil {
		b := d.blocking()
		st.Blocking = &b
	}
	return st
}

func (d internalDeps) Zones(context.Context) ([]internalapi.Zone, error) {
	var out []internalapi.Zone
	for _, z := range d.snaps.Zones() {
		out = append(out, internalapi.Zone{Name: z.Name, Serial: z.Serial})
	}
	return out, nil
}
