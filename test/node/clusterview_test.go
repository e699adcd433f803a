package node_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// TestNodesListsPeersSQLite: GET /nodes lists the serving node and every
// peer of SERVICE_INTERNAL_PEERS as each answers for itself (readiness,
// snapshot age, serial, version, role), GET /cluster says driver sqlite and
// counts them (issue #23 item 8).
func TestNodesListsPeersSQLite(t *testing.T) {
	key := "SERVICE_ENCRYPTION_KEY=" + strings.Repeat("ef", 32)
	b := startNode(t, nodetest.Name("view-b"), nodetest.Env(key, "SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken))
	a := startNode(t, nodetest.Name("view-a"), nodetest.Env(key, "SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken, node.PeersEnv+"="+b.Addrs.Internal))

	code, body := apiCall(t, a, "GET", "/nodes", "")
	var page struct {
		Items []struct {
			Name, Version, Role, Address, Error string
			Ready                               *bool
			SnapshotAgeSeconds                  *float64
			Serial                              uint64
		}
	}
	if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("GET /nodes = %d %s", code, body)
	}
	if len(page.Items) != 2 || page.Items[0].Name != "view-a" || page.Items[1].Name != "view-b" {
		t.Fatalf("GET /nodes on view-a = %s, want view-a then view-b", body)
	}
	for _, n := range page.Items {
		if n.Ready == nil || !*n.Ready || n.Version == "" || n.SnapshotAgeSeconds == nil || n.Serial == 0 || n.Role != "all" || n.Error != "" {
			t.Errorf("node %s: %+v, want ready, version, snapshot age, serial and role", n.Name, n)
		}
	}
	if page.Items[1].Address != b.Addrs.Internal {
		t.Errorf("peer address %q, want %s", page.Items[1].Address, b.Addrs.Internal)
	}
	code, body = apiCall(t, a, "GET", "/cluster", "")
	if code != 200 || !strings.Contains(body, `"driver":"sqlite"`) || !strings.Contains(body, `"nodes":2`) {
		t.Errorf("GET /cluster = %d %s, want driver sqlite and 2 nodes", code, body)
	}
	// A peer that is gone is listed with why.
	b.Stop()
	code, body = apiCall(t, a, "GET", "/nodes", "")
	if code != 200 || !strings.Contains(body, `"error"`) || !strings.Contains(body, b.Addrs.Internal) {
		t.Errorf("GET /nodes with the peer stopped = %d %s, want it listed with an error", code, body)
	}
}
