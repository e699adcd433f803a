package transport

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane"
)

func newTestHandler(t testing.TB) *dohHandler {
	dp, err := dataplane.New(dataplane.Config{Node: "fuzz"}, dataplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(dp, Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s.newDoHHandler(Listener{}, dataplane.TransportDoH, "doh")
}

// FuzzDoHRequest drives the DoH request decoder with arbitrary methods,
// paths, content types and bodies against the real (empty) data plane:
// every response is a valid status, and 200 carries a DNS message.
func FuzzDoHRequest(f *testing.F) {
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	wire, _ := m.Pack()
	f.Add("GET", "/dns-query?dns=AAABAAABAAAAAAAAB2V4YW1wbGUDY29tAAABAAE", "", []byte(nil))
	f.Add("POST", "/dns-query/abc", "application/dns-message", wire)
	f.Add("POST", "/dns-query", "application/dns-message; charset=x", []byte{1, 2})
	f.Add("GET", "/dns-query?dns=%%%", "", []byte(nil))
	h := newTestHandler(f)
	f.Fuzz(func(t *testing.T, method, target, ctype string, body []byte) {
		req, err := http.NewRequest(method, "https://x"+target, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", ctype)
		req.RemoteAddr = "192.0.2.1:5"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case 200:
			if _, err := strconv.Atoi(rec.Header().Get("Content-Length")); err != nil {
				t.Fatal("no length")
			}
			if new(dns.Msg).Unpack(rec.Body.Bytes()) != nil && len(rec.Body.Bytes()) < 12 {
				t.Fatal("200 without a DNS message")
			}
		case 400, 404, 405, 413, 415:
		default:
			t.Fatalf("status %d", rec.Code)
		}
	})
}

func TestCacheTTLAndClientID(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("a.example.", dns.TypeA)
	m.Response = true
	rr1, _ := dns.NewRR("a.example. 300 IN A 192.0.2.1")
	rr2, _ := dns.NewRR("a.example. 60 IN A 192.0.2.2")
	m.Answer = []dns.RR{rr1, rr2}
	m.SetEdns0(1232, false)
	b, _ := m.Pack()
	if ttl, ok := cacheTTL(b); !ok || ttl != 60 {
		t.Fatalf("%d %v", ttl, ok)
	}
	m.Rcode = dns.RcodeServerFailure
	b, _ = m.Pack()
	if _, ok := cacheTTL(b); ok {
		t.Fatal("SERVFAIL cacheable")
	}
	s := &Server{cfg: Config{ClientIDDomain: "dns.example.com"}}
	for sni, want := range map[string]string{"Abc.dns.example.com": "abc", "dns.example.com": "", "a.b.dns.example.com": "", "x.other.com": ""} {
		if got := s.clientIDFromSNI(sni, nil); got != want {
			t.Errorf("%s: %q want %q", sni, got, want)
		}
	}
	h := &dohHandler{path: "/dns-query"}
	for p, want := range map[string]string{"/dns-query": "", "/dns-query/id1": "id1", "/dns-query/id1/": "id1"} {
		if got, ok := h.clientID(p); !ok || got != want {
			t.Errorf("%s: %q %v", p, got, ok)
		}
	}
	if _, ok := h.clientID("/dns-query/a/b"); ok {
		t.Error("nested path accepted")
	}
}
