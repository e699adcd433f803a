package probe

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/fakeupstream"
)

func TestQuery(t *testing.T) {
	addr := fakeupstream.Serve(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Name != "health.service.internal." {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	for name, want := range map[string]string{"health.service.internal": "NOERROR", "other.test.": "NXDOMAIN"} {
		got, err := Query(t.Context(), addr, name, "TXT", 2*time.Second)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %s", name, got, err, want)
		}
	}
	if _, err := Query(t.Context(), addr, "x.", "NOPE", time.Second); err == nil {
		t.Error("unknown type accepted")
	}
}
