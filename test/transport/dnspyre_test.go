package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/dataplane"
)

// TestDnspyre runs dnspyre, a DNS benchmark written by others, as a client
// over every transport it speaks (its DoH default is HTTP/1.1), 3 workers
// x 10 queries each: every query must come back NOERROR with no I/O
// errors, the certificate is verified against the test CA (SSL_CERT_FILE),
// and a DoH path client ID arrives.
func TestDnspyre(t *testing.T) {
	st := newStack(t, stackOpts{})
	bin := serviceTool(t, "dnspyre")
	port := func(k string) string { return fmt.Sprint(st.addr(k).Port()) }
	doh := "https://127.0.0.1:" + port("doh") + "/dns-query"
	cases := []struct {
		name string
		args []string
		tr   dataplane.Transport
		id   string
	}{
		{"udp", []string{"-s", "127.0.0.1:" + port("udp")}, dataplane.TransportUDP, ""},
		{"tcp", []string{"--tcp", "-s", "127.0.0.1:" + port("tcp")}, dataplane.TransportTCP, ""},
		{"dot", []string{"--dot", "-s", "127.0.0.1:" + port("dot")}, dataplane.TransportDoT, ""},
		{"doh1.1-post", []string{"-s", doh + "/pyre1"}, dataplane.TransportDoH, "pyre1"},
		{"doh1.1-get", []string{"-s", doh, "--doh-method=get"}, dataplane.TransportDoH, ""},
		{"doh2", []string{"-s", doh + "/pyre2", "--doh-protocol=2"}, dataplane.TransportDoH, "pyre2"},
		{"doh3", []string{"-s", "https://127.0.0.1:" + port("doh3") + "/dns-query/pyre3", "--doh-protocol=3"}, dataplane.TransportDoH3, "pyre3"},
		{"doq", []string{"-s", "quic://127.0.0.1:" + port("doq")}, dataplane.TransportDoQ, ""},
	}
	type result struct {
		Total    int            `json:"totalRequests"`
		Success  int            `json:"totalSuccessResponses"`
		IOErrors int            `json:"totalIOErrors"`
		Rcodes   map[string]int `json:"responseRcodes"`
	}
	pyre := func(t *testing.T, caFile string, args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		args = append(args, "-n", "10", "-c", "3", "--json", "--no-distribution", "--no-color", "--no-progress", "www.example.com")
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+caFile, "SSL_CERT_DIR=/nonexistent")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("dnspyre %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		var res result
		i := strings.IndexByte(string(out), '{')
		if i < 0 {
			t.Fatalf("dnspyre printed no JSON:\n%s", out)
		}
		if err := json.Unmarshal(out[i:], &res); err != nil {
			t.Fatalf("dnspyre output: %v\n%s", err, out)
		}
		return res
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := st.rec.count(tc.tr)
			res := pyre(t, st.pki.CAFile, tc.args...)
			if res.Total != 30 || res.Success != 30 || res.IOErrors != 0 || res.Rcodes["NOERROR"] != 30 {
				t.Fatalf("dnspyre: %+v, want 30 NOERROR answers and no errors", res)
			}
			// Plain DNS goes to the data plane directly, past the recorder.
			if tc.tr != dataplane.TransportUDP && tc.tr != dataplane.TransportTCP && st.rec.count(tc.tr)-before < 30 {
				got := st.rec.count(tc.tr) - before
				t.Errorf("%d queries reached the pipeline over %v, want 30", got, tc.tr)
			}
			if tc.id != "" && !st.rec.seen(tc.tr, tc.id) {
				t.Errorf("client ID %q not passed", tc.id)
			}
		})
	}
	t.Run("untrusted", func(t *testing.T) {
		if res := pyre(t, "/nonexistent", "-s", doh); res.Success != 0 || res.IOErrors != res.Total {
			t.Fatalf("dnspyre got answers without the test CA: %+v", res)
		}
	})
}
