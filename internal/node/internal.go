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
}

func (d internalDeps) Status(context.Context) internalapi.NodeStatus { return selfStatus(d) }

func (d internalDeps) Zones(context.Context) ([]internalapi.Zone, error) {
	var out []internalapi.Zone
	for _, z := range d.snaps.Zones() {
		out = append(out, internalapi.Zone{Name: z.Name, Serial: z.Serial})
	}
	return out, nil
}
