package transport_test

import (
	"context"
	"encoding/base64"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/svcdns/svc/dataplane/transport"
	"github.com/svcdns/svc/test/proc"
)

// TestH2Spec runs the h2spec conformance suite (146 cases of RFC 7540 and
// RFC 7541, built by hack/install-dns-clients.sh) against the DoH listener
// over TLS. The lean HTTP/2 server must pass every case. net/http with
// x/net/http2 (listeners.dohServer stdlib) must pass every case but the
// ones x/net fails on purpose (h2specStdlibKnown).
func TestH2Spec(t *testing.T) {
	bin := proc.ServiceTool(t, "h2spec")
	for _, server := range []string{transport.DoHServerLean, transport.DoHServerStdlib} {
		t.Run(server, func(t *testing.T) {
			st := newStack(t, stackOpts{transport: func(c *transport.Config) { c.DoHServer = server }})
			ap := st.addr("doh")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			q := base64.RawURLEncoding.EncodeToString(query(t, 0))
			out, _ := exec.CommandContext(ctx, bin, "-h", ap.Addr().String(), "-p", strconv.Itoa(int(ap.Port())), "-t", "-k",
				"-P", "/dns-query?dns="+q, "-o", "3").CombinedOutput()
			m := regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`).FindSubmatch(out)
			if m == nil || string(m[1]) != "146" {
				t.Fatalf("h2spec did not run its 146 cases:\n%s", out)
			}
			var unexpected, known []string
			for _, f := range regexp.MustCompile(`(?m)× \d+: (.*)$`).FindAllSubmatch(out, -1) {
				if d := string(f[1]); server != transport.DoHServerStdlib || !h2specStdlibKnown[d] {
					unexpected = append(unexpected, d)
				} else {
					known = append(known, d)
				}
			}
			if len(unexpected) > 0 {
				t.Fatalf("h2spec failures %q:\n%s", unexpected, out)
			}
			t.Logf("h2spec: %s; x/net's known deviations: %q", m[0], known)
		})
	}
}

// h2specStdlibKnown are the h2spec cases x/net/http2's server fails on
// purpose (golang.org/x/net v0.62.0, server.go):
var h2specStdlibKnown = map[string]bool{
	// 6.5.3/1: x/net refuses a SETTINGS frame that repeats a parameter
	// (processSettings: HasDuplicates is a PROTOCOL_ERROR, a guard against
	// settings floods); RFC 9113 lets the last value win.
	"Sends multiple values of SETTINGS_INITIAL_WINDOW_SIZE": true,
	// 8.1.2.2/1 and /2: x/net answers a request with a connection-specific
	// header or TE other than "trailers" with 400 (new400Handler, so the
	// client sees why) where the RFC asks for a stream error.
	"Sends a HEADERS frame that contains the connection-specific header field":                       true,
	"Sends a HEADERS frame that contains the TE header field with any value other than \"trailers\"": true,
	// 6.9.1/3, sometimes: the answer is written at once, and the stream is
	// closed (RST_STREAM STREAM_CLOSED) before the second WINDOW_UPDATE
	// that overflows its window arrives.
	"Sends multiple WINDOW_UPDATE frames increasing the flow control window to above 2^31-1 on a stream": true,
}
