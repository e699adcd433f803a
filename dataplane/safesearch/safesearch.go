// Package safesearch maps search-engine and video-site host names to the
// vendor's safe-search host (the DNS method each vendor documents; sources
// in docs/policies.md). Tables are built once and are read-only.
package safesearch

import (
	"strings"

	"github.com/miekg/dns"
)

// Mode is spec.safeSearchMode.
type Mode uint8

// Modes: only the video site has two levels.
const (
	Strict Mode = iota
	Moderate
)

// ParseMode maps "strict" (and "") and "moderate".
func ParseMode(s string) (Mode, bool) {
	switch s {
	case "", "strict":
		return Strict, true
	case "moderate":
		return Moderate, true
	}
	return Strict, false
}

// Engine is one vendor with a documented safe-search host.
type Engine struct {
	ID       string
	Name     string
	Source   string // where the vendor documents the method
	Strict   string // target host
	Moderate string // target host in moderate mode (the strict one if empty)
	Hosts    []string
}

// Engines lists the vendors; Google's hosts are every country domain.
func Engines() []Engine {
	return []Engine{
		{ID: "google", Name: "Google Search", Source: "https://support.google.com/websearch/answer/186669",
			Strict: "forcesafesearch.google.com", Hosts: googleHosts()},
		{ID: "youtube", Name: "YouTube", Source: "https://support.google.com/a/answer/6214622",
			Strict: "restrict.youtube.com", Moderate: "restrictmoderate.youtube.com",
			Hosts: []string{"www.youtube.com", "m.youtube.com", "youtubei.googleapis.com", "youtube.googleapis.com", "www.youtube-nocookie.com"}},
		{ID: "bing", Name: "Bing", Source: "https://help.bing.microsoft.com/#apex/bing/en-us/10003/0",
			Strict: "strict.bing.com", Hosts: []string{"www.bing.com", "bing.com"}},
		{ID: "duckduckgo", Name: "DuckDuckGo", Source: "https://duckduckgo.com/duckduckgo-help-pages/features/safe-search/",
			Strict: "safe.duckduckgo.com", Hosts: []string{"duckduckgo.com", "www.duckduckgo.com", "start.duckduckgo.com"}},
		{ID: "yandex", Name: "Yandex", Source: "https://yandex.com/support/search/en/filtration/",
			Strict: "familysearch.yandex.ru", Hosts: []string{"yandex.ru", "www.yandex.ru", "yandex.com", "www.yandex.com",
				"yandex.by", "yandex.kz", "yandex.ua", "yandex.com.tr", "ya.ru", "www.ya.ru"}},
		{ID: "pixabay", Name: "Pixabay", Source: "https://pixabay.com/service/faq/",
			Strict: "safesearch.pixabay.com", Hosts: []string{"pixabay.com", "www.pixabay.com"}},
	}
}

// googleTLDs are the suffixes of https://www.google.com/supported_domains.
const googleTLDs = `com ad ae com.af com.ag al am co.ao com.ar as at com.au az ba com.bd be bf bg com.bh bi bj
com.bn com.bo com.br bs bt co.bw by com.bz ca cd cf cg ch ci co.ck cl cm cn com.co co.cr com.cu cv com.cy cz
de dj dk dm com.do dz com.ec ee com.eg es com.et fi com.fj fm fr ga ge gg com.gh com.gi gl gm gr com.gt gy
com.hk hn hr ht hu co.id ie co.il im co.in iq is it je com.jm jo co.jp co.ke com.kh ki kg co.kr com.kw kz la
com.lb li lk co.ls lt lu lv com.ly co.ma md me mg mk ml com.mm mn com.mt mu mv mw com.mx com.my co.mz com.na
com.ng com.ni ne nl no com.np nr nu co.nz com.om com.pa com.pe com.pg com.ph com.pk pl pn com.pr ps pt com.py
com.qa ro ru rw com.sa com.sb sc se com.sg sh si sk com.sl sn so sm sr st com.sv td tg co.th com.tj tl tm tn
to com.tr tt com.tw co.tz com.ua co.ug co.uk com.uy co.uz com.vc co.ve co.vi com.vn vu ws rs co.za co.zm co.zw cat`

func googleHosts() []string {
	var out []string
	for _, tld := range strings.Fields(googleTLDs) {
		out = append(out, "google."+tld, "www.google."+tld)
	}
	return out
}

type target struct {
	strict, moderate []dns.RR // prebuilt CNAME answers, owner = the host
	engine           string
}

// Table answers host names with their safe-search CNAME.
type Table struct {
	hosts   map[string]target // key: lower-case wire-format name
	engines int
}

// New builds the table of every engine.
func New() *Table {
	t := &Table{hosts: map[string]target{}}
	for _, e := range Engines() {
		t.engines++
		mod := e.Moderate
		if mod == "" {
			mod = e.Strict
		}
		for _, h := range e.Hosts {
			wire := make([]byte, 256)
			n, err := dns.PackDomainName(dns.Fqdn(h), wire, 0, nil, false)
			if err != nil {
				panic("safesearch: bad built-in host " + h) // constant data
			}
			t.hosts[string(wire[:n])] = target{engine: e.ID,
				strict: cname(h, e.Strict), moderate: cname(h, mod)}
		}
	}
	return t
}

func cname(owner, target string) []dns.RR {
	return []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: dns.Fqdn(owner), Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 3600},
		Target: dns.Fqdn(target)}}
}

// Engines counts the vendors (CatalogueInfo.safeSearchEngines).
func (t *Table) Engines() int { return t.engines }

// Hosts counts the host names rewritten.
func (t *Table) Hosts() int { return len(t.hosts) }

// Lookup returns the CNAME answer for a lower-case wire-format query name,
// and the engine id. The answer is shared: callers must not modify it. It
// does not allocate.
func (t *Table) Lookup(qname []byte, mode Mode) (answer []dns.RR, engine string, ok bool) {
	if t == nil {
		return nil, "", false
	}
	tg, ok := t.hosts[string(qname)]
	if !ok {
		return nil, "", false
	}
	if mode == Moderate {
		return tg.moderate, tg.engine, true
	}
	return tg.strict, tg.engine, true
}
