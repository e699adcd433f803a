package node_test

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// effective reads one nested key of GET /settings from a node.
func effective(t *testing.T, tn *nodetest.Node, path ...string) any {
	t.Helper()
	code, body := apiCall(t, tn, "GET", "/settings", "")
	if code != 200 {
		t.Fatalf("GET /settings = %d %s", code, body)
	}
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

// TestSettingsReachPeersSQLite: with the SQLite store and
// SERVICE_INTERNAL_PEERS, PATCH /settings served by one node changes the
// cluster-scope keys of its peers too (issue #23 item 7), node-scope keys
// stay per node, and a peer that cannot be reached makes the answer 503
// naming it while the reachable ones keep the change.
func TestSettingsReachPeersSQLite(t *testing.T) {
	key := "SERVICE_ENCRYPTION_KEY=" + strings.Repeat("cd", 32) // one cluster: the internal token and CA derive from it
	b := startNode(t, nodetest.Name("node-b"), nodetest.SettingsFile(), nodetest.Env(key, "SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken))
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there any more
	a := startNode(t, nodetest.Name("node-a"), nodetest.SettingsFile(),
		nodetest.Env(key, "SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken, node.PeersEnv+"="+b.Addrs.Internal))

	code, body := apiCall(t, a, "PATCH", "/settings", `{"cache":{"maxEntries":1234},"blocking":{"blockTTL":"7m"}}`)
	if code != 200 {
		t.Fatalf("PATCH /settings on node-a = %d %s", code, body)
	}
	start := time.Now()
	for _, tn := range []*nodetest.Node{a, b} {
		if got := effective(t, tn, "cache", "maxEntries"); got != float64(1234) {
			t.Errorf("%s: cache.maxEntries = %v after PATCH on node-a, want 1234", tn.Addrs.API, got)
		}
		if got := effective(t, tn, "blocking", "blockTTL"); got != "7m" {
			t.Errorf("%s: blocking.blockTTL = %v after PATCH on node-a, want 7m", tn.Addrs.API, got)
		}
	}
	t.Logf("cluster settings on both nodes %s after the PATCH answered", time.Since(start))

	// A node-scope key stays on the node that was asked.
	if code, body := apiCall(t, a, "PATCH", "/node/config", `{"auth":{"tokens":{"maxLifetime":"24h"}}}`); code != 200 {
		t.Fatalf("PATCH /node/config = %d %s", code, body)
	}
	if got := effective(t, b, "auth", "tokens", "maxLifetime"); got != "0s" {
		t.Errorf("node-b auth.tokens.maxLifetime = %v after PATCH /node/config on node-a, want its own 0s", got)
	}
	// Removing an override (null) reaches the peer as well.
	if code, body := apiCall(t, a, "PATCH", "/settings", `{"cache":{"maxEntries":null}}`); code != 200 {
		t.Fatalf("PATCH null = %d %s", code, body)
	}
	if got := effective(t, b, "cache", "maxEntries"); got != float64(200000) {
		t.Errorf("node-b cache.maxEntries = %v after the override was removed on node-a, want the default 200000", got)
	}

	// A third node whose peers include one that is down.
	c := startNode(t, nodetest.Name("node-c"), nodetest.SettingsFile(),
		nodetest.Env(key, "SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken, node.PeersEnv+"="+b.Addrs.Internal+","+deadAddr))
	code, body = apiCall(t, c, "PATCH", "/settings", `{"cache":{"maxEntries":777}}`)
	if code != 503 || !strings.Contains(body, deadAddr) || !strings.Contains(body, `"unavailable"`) {
		t.Errorf("PATCH with a peer down = %d %s, want 503 unavailable naming %s", code, body, deadAddr)
	}
	for _, tn := range []*nodetest.Node{c, b} {
		if got := effective(t, tn, "cache", "maxEntries"); got != float64(777) {
			t.Errorf("%s: cache.maxEntries = %v, want 777 on the nodes that were reached", tn.Addrs.API, got)
		}
	}
}
