package probe

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestQuery(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Name != "health.service.internal." {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	for name, want := range map[string]string{"health.service.internal": "NOERROR", "other.test.": "NXDOMAIN"} {
		got, err := Query(t.Context(), pc.LocalAddr().String(), name, "TXT", 2*time.Second)
		if err != nil || got != want {
			t.Errorf("%s: %q, %v; want %s", name, got, err, want)
		}
	}
	if _, err := Query(t.Context(), pc.LocalAddr().String(), "x.", "NOPE", time.Second); err == nil {
		t.Error("unknown type accepted")
	}
}
