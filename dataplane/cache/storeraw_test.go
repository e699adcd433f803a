package cache

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/wire"
)

// storeRawParity stores raw with StoreRaw in one cache and, unpacked, with
// StoreWire in another, and reports how the entries differ ("" when they
// do not). skipped: StoreRaw left the answer to StoreWire (ErrNotRaw) or
// ScanAnswer refused it.
func storeRawParity(t testing.TB, raw []byte, cfg Config) (diff string, skipped bool) {
	if _, ok := wire.ScanAnswer(raw); !ok { // StoreRaw's precondition
		return "", true
	}
	qend, err := wire.SkipName(raw, wire.HeaderLen)
	if err != nil || qend+4 > len(raw) {
		return "", true
	}
	name := raw[wire.HeaderLen:qend]
	if slices.Contains(name, 0xC0) && name[len(name)-1] != 0 {
		return "", true // a compressed question: rawSections refuses it
	}
	qtype := uint16(raw[qend])<<8 | uint16(raw[qend+1])
	qclass := uint16(raw[qend+2])<<8 | uint16(raw[qend+3])
	now := time.Unix(1_800_000_000, 0)
	e1, err1 := New(cfg, nil).StoreRaw(name, qtype, qclass, 0, raw, now)
	if errors.Is(err1, ErrNotRaw) {
		return "", true
	}
	m := new(dns.Msg)
	if err := m.Unpack(raw); err != nil {
		t.Fatalf("ScanAnswer accepted bytes miekg refuses: %v", err)
	}
	e2, err2 := New(cfg, nil).StoreWire(name, qtype, qclass, 0, m, raw, now)
	switch {
	case (err1 == nil) != (err2 == nil):
		return "errors " + errString(err1) + " / " + errString(err2), false
	case (e1 == nil) != (e2 == nil):
		return "one stored, the other not", false
	case e1 == nil:
		return "", false
	case string(e1.sections) != string(e2.sections), e1.counts != e2.counts:
		return "sections or counts", false
	case !slices.Equal(e1.ttl, e2.ttl):
		return "record TTLs", false
	case e1.rcode != e2.rcode, e1.ad != e2.ad, e1.caseLoose != e2.caseLoose:
		return "rcode, AD or case", false
	case e1.expires-e1.stored != e2.expires-e2.stored, e1.staleUntil-e1.stored != e2.staleUntil-e2.stored, e1.origTTL != e2.origTTL:
		// Each cache counts time from its own start.
		return "lifetime", false
	}
	return "", false
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

func rawAnswer(t testing.TB, rcode int, compress bool, answer, ns []string) []byte {
	q := new(dns.Msg)
	q.SetQuestion("www.example.org.", dns.TypeA)
	m := new(dns.Msg)
	m.SetReply(q)
	m.Rcode = rcode
	m.Compress = compress
	m.AuthenticatedData = compress // both ways
	for _, s := range answer {
		m.Answer = append(m.Answer, rr(t, s))
	}
	for _, s := range ns {
		m.Ns = append(m.Ns, rr(t, s))
	}
	m.SetEdns0(1232, false)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var rawAnswerCases = []struct {
	name       string
	rcode      int
	answer, ns []string
}{
	{"A", dns.RcodeSuccess, []string{"www.example.org. 300 IN A 192.0.2.1"}, nil},
	{"CNAME chain, smallest TTL", dns.RcodeSuccess, []string{"www.example.org. 60 IN CNAME web.example.org.", "web.example.org. 30 IN A 192.0.2.1"}, nil},
	{"TTL 0", dns.RcodeSuccess, []string{"www.example.org. 0 IN A 192.0.2.1"}, nil},
	{"huge TTL", dns.RcodeSuccess, []string{"www.example.org. 4000000000 IN A 192.0.2.1"}, nil},
	{"NXDOMAIN with SOA", dns.RcodeNameError, nil, []string{"example.org. 900 IN SOA ns1.example.org. host.example.org. 1 2 3 4 120"}},
	{"NODATA, SOA TTL below MINIMUM", dns.RcodeSuccess, nil, []string{"example.org. 20 IN SOA ns1.example.org. host.example.org. 1 2 3 4 120"}},
	{"NXDOMAIN without SOA", dns.RcodeNameError, nil, nil},
	{"NXDOMAIN, NS and SOA", dns.RcodeNameError, nil, []string{"example.org. 50 IN NS ns1.example.org.", "example.org. 900 IN SOA ns1.example.org. host.example.org. 1 2 3 4 5"}},
}

// StoreRaw keeps exactly the entry StoreWire makes of the unpacked answer:
// the same bytes, record TTLs, lifetime (positive, negative with and
// without a SOA, clamped), AD and rcode, under default and narrow TTL
// settings.
func TestStoreRawMatchesStoreWire(t *testing.T) {
	narrow := DefaultConfig()
	narrow.MinTTL, narrow.MaxTTL, narrow.NegativeTTL = 45*time.Second, 100*time.Second, 10*time.Second
	for _, cfg := range []Config{DefaultConfig(), narrow} {
		for _, tc := range rawAnswerCases {
			for _, compress := range []bool{true, false} {
				raw := rawAnswer(t, tc.rcode, compress, tc.answer, tc.ns)
				diff, skipped := storeRawParity(t, raw, cfg)
				if skipped {
					t.Errorf("%s (compress %v): StoreRaw did not take a plain answer", tc.name, compress)
				}
				if diff != "" {
					t.Errorf("%s (compress %v): StoreRaw and StoreWire differ in %s", tc.name, compress, diff)
				}
			}
		}
	}
}

func TestStoreRawRefusesOtherRcodes(t *testing.T) {
	raw := rawAnswer(t, dns.RcodeServerFailure, true, nil, nil)
	if _, ok := wire.ScanAnswer(raw); !ok {
		t.Fatal("ScanAnswer refused a SERVFAIL")
	}
	c := New(DefaultConfig(), nil)
	if e, err := c.StoreRaw([]byte("\x03www\x07example\x03org\x00"), dns.TypeA, dns.ClassINET, 0, raw, time.Now()); e != nil || !errors.Is(err, ErrNotRaw) {
		t.Fatalf("StoreRaw(SERVFAIL) = %v, %v; want ErrNotRaw", e, err)
	}
	if c.Len() != 0 {
		t.Fatalf("a refused answer was stored")
	}
}

// FuzzStoreRawParity: for any bytes StoreRaw takes, the entry equals the
// one StoreWire makes of the unpacked message.
func FuzzStoreRawParity(f *testing.F) {
	for _, tc := range rawAnswerCases {
		f.Add(rawAnswer(f, tc.rcode, true, tc.answer, tc.ns))
		f.Add(rawAnswer(f, tc.rcode, false, tc.answer, tc.ns))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if diff, _ := storeRawParity(t, raw, DefaultConfig()); diff != "" {
			t.Fatalf("StoreRaw and StoreWire differ in %s", diff)
		}
	})
}
