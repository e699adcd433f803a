package kubenode_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

const visibleToken = "svc_visiblekube1_QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"

// TestWriteVisibleKube: on the kube store a write through the data-plane
// pod's API returns once that pod answers with it (its informers and
// snapshot), the README's write-then-query, 20 rounds without a retry; the
// answer carries the served snapshot's revision (an etcd revision).
func TestWriteVisibleKube(t *testing.T) {
	c := needEnv(t)
	kc := kubeconfig(t, env.Config, "")
	op := startNode(t, "op-vis", node.RoleOperator, kc)
	dp := startNode(t, "dp-vis", node.RoleDataplane, kc, "SERVICE_INTERNAL_PEERS="+op.Addrs.Internal,
		"SERVICE_BOOTSTRAP_TOKEN="+visibleToken, "SERVICE_ADMIN_PASSWORD=visible-kube-admin-pw")
	// the package's tests share the apiserver
	removeAfter(t, c, [3]string{"DNSZone", "", "vis.test"}, [3]string{"DNSRecordSet", "default", "vis.test-hosts"},
		[3]string{"DNSRecordSet", "default", "api-vis.test"})
	apply(t, c, zoneDocs("vis.test", "www.vis.test", "192.0.2.1"))
	nodetest.Eventually(t, 10*time.Second, "www.vis.test answered", func() bool { return dp.answersA("www.vis.test", "192.0.2.1") })
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	call := func(method, path string, body any) *http.Response {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, "https://"+dp.Addrs.API+"/api/v1"+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+visibleToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d", method, path, resp.StatusCode)
		}
		return resp
	}
	misses := 0
	for i := range 20 {
		host, ip := fmt.Sprintf("h%d", i), fmt.Sprintf("192.0.2.%d", 10+i)
		resp := call(http.MethodPost, "/zones/vis.test/records", map[string]any{"name": host, "type": "A", "targets": []string{ip}})
		if v := resp.Header.Get("X-Service-Visible"); v != "true" {
			t.Errorf("round %d: X-Service-Visible %q", i, v)
		}
		if _, err := strconv.ParseInt(resp.Header.Get("X-Service-Revision"), 10, 64); err != nil {
			t.Errorf("round %d: X-Service-Revision %q is not a revision", i, resp.Header.Get("X-Service-Revision"))
		}
		if !dp.answersA(host+".vis.test", ip) {
			misses++
			t.Errorf("round %d: %s.vis.test not answered right after the write", i, host)
		}
	}
	t.Logf("%d misses in 20 rounds", misses)
}
