package xfr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/authority"
)

// NotifyConfig is the notify settings section.
type NotifyConfig struct {
	Source  netip.Addr    // source address; invalid: the system picks
	Timeout time.Duration // per attempt (default 2s)
	Retries int           // attempts after the first (default 2)
	FromNS  bool          // also notify the addresses of the zone's NS names found in served zones
	Targets []NotifyTarget
	Logger  *slog.Logger
	Metrics *Metrics
}

// NotifyTarget is one notify.targets item.
type NotifyTarget struct {
	Zone      string           // zone name, or "*" for every primary zone
	Addresses []netip.AddrPort // port 53 when the setting named none
	Key       string           // TSIG key name; "" signs with the zone's first transfer key, if any
}

// Sent is what one NOTIFY target answered.
type Sent struct {
	Target   string // address:port
	Key      string // TSIG key that signed it, "" unsigned
	Rcode    string // the answer's rcode; "" when none came
	Error    string // why no (valid) answer came
	Attempts int
	Took     time.Duration
}

// Notifier sends NOTIFY (RFC 1996) over UDP, retrying unanswered
// messages, signed with TSIG when a key applies.
type Notifier struct {
	cfg  NotifyConfig
	keys func() Keyring
	log  *slog.Logger

	mu      sync.Mutex
	running map[string]*round // zone -> the round in flight
}

// NewNotifier returns a Notifier; keys gives the current TSIG keys.
func NewNotifier(cfg NotifyConfig, keys func() Keyring) *Notifier {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Retries < 0 {
		cfg.Retries = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{cfg: cfg, keys: keys, log: cfg.Logger, running: map[string]*round{}}
}

// round is one NOTIFY round of a zone.
type round struct{ cancel context.CancelFunc }

// target is one address with the key to sign for it.
type target struct {
	addr netip.AddrPort
	key  string
}

// targets lists where NOTIFY for tz goes: notify.targets naming the zone
// (or "*"), and with notify.fromNS the addresses of its NS names that a
// served zone holds (port 53). Each address once.
func (n *Notifier) targets(t *authority.Table, tz authority.TransferZone) []target {
	def := ""
	if ks := tz.Keys(); len(ks) > 0 {
		def = ks[0]
	}
	var out []target
	seen := map[netip.AddrPort]bool{}
	add := func(a netip.AddrPort, key string) {
		if key == "" {
			key = def
		}
		if !seen[a] {
			seen[a] = true
			out = append(out, target{addr: a, key: key})
		}
	}
	for _, tg := range n.cfg.Targets {
		if tg.Zone == "*" || dns.CanonicalName(tg.Zone) == tz.Name() || tg.Zone == tz.Object() {
			for _, a := range tg.Addresses {
				add(a, tg.Key)
			}
		}
	}
	if n.cfg.FromNS && t != nil {
		for _, a := range nsAddresses(t, tz) {
			add(a, "")
		}
	}
	return out
}

// nsAddresses resolves the zone's NS names from the served zones only
// (in-zone names and glue; no upstream is asked).
func nsAddresses(t *authority.Table, tz authority.TransferZone) []netip.AddrPort {
	var out []netip.AddrPort
	ans := t.Lookup(lowerWire(tz.Name()), dns.TypeNS, authority.Client{})
	for _, rr := range ans.Answer {
		ns, ok := rr.(*dns.NS)
		if !ok {
			continue
		}
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			a := t.Lookup(lowerWire(ns.Ns), qt, authority.Client{})
			recs := append(append([]dns.RR{}, a.Answer...), a.Extra...)
			for _, r := range recs {
				var ip net.IP
				switch v := r.(type) {
				case *dns.A:
					ip = v.A
				case *dns.AAAA:
					ip = v.AAAA
				default:
					continue
				}
				if !dns.IsSubDomain(dns.CanonicalName(r.Header().Name), dns.CanonicalName(ns.Ns)) {
					continue
				}
				if addr, ok := netip.AddrFromSlice(ip); ok {
					out = append(out, netip.AddrPortFrom(addr.Unmap(), 53))
				}
			}
		}
	}
	return out
}

// HasTargets reports whether any NOTIFY could be sent for tz.
func (n *Notifier) HasTargets(t *authority.Table, tz authority.TransferZone) bool {
	return len(n.targets(t, tz)) > 0
}

// Notify sends NOTIFY for tz to its targets at once, in parallel, and
// returns what each answered. A round still running for the zone is
// cancelled: the newer serial is what matters.
func (n *Notifier) Notify(ctx context.Context, t *authority.Table, tz authority.TransferZone) []Sent {
	tgs := n.targets(t, tz)
	if len(tgs) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	me := &round{cancel: cancel}
	n.mu.Lock()
	if prev := n.running[tz.Name()]; prev != nil {
		prev.cancel()
	}
	n.running[tz.Name()] = me
	n.mu.Unlock()
	defer func() {
		cancel()
		n.mu.Lock()
		if n.running[tz.Name()] == me { // a newer round may have replaced it
			delete(n.running, tz.Name())
		}
		n.mu.Unlock()
	}()
	soa := tz.SOA()
	out := make([]Sent, len(tgs))
	var wg sync.WaitGroup
	for i, tg := range tgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = n.send(ctx, tz.Name(), soa, tg)
		}()
	}
	wg.Wait()
	for _, s := range out {
		lvl := slog.LevelInfo
		if s.Rcode != "NOERROR" {
			lvl = slog.LevelWarn
		}
		n.log.Log(ctx, lvl, "NOTIFY sent", "zone", tz.Name(), "serial", soa.Serial, "target", s.Target, "key", s.Key,
			"rcode", s.Rcode, "error", s.Error, "attempts", s.Attempts, "took", s.Took)
	}
	return out
}

// send delivers one NOTIFY, retrying on timeouts.
func (n *Notifier) send(ctx context.Context, zone string, soa *dns.SOA, tg target) Sent {
	start := time.Now()
	res := Sent{Target: tg.addr.String()}
	m := new(dns.Msg)
	m.SetNotify(zone)
	m.Answer = []dns.RR{soa} // RFC 1996 3.7: the new SOA as a hint
	c := &dns.Client{Net: "udp", Timeout: n.cfg.Timeout}
	if n.cfg.Source.IsValid() {
		c.Dialer = &net.Dialer{Timeout: n.cfg.Timeout, LocalAddr: &net.UDPAddr{IP: n.cfg.Source.AsSlice()}}
	}
	alg := ""
	if tg.key != "" {
		k, ok := n.keys().Lookup(tg.key)
		if !ok {
			res.Error = fmt.Sprintf("TSIG key %q is not in tsigKeys", tg.key)
			n.cfg.Metrics.notified(zone, 0, errors.New(res.Error))
			return res
		}
		res.Key = k.Name
		c.TsigSecret = map[string]string{k.Name: k.Secret}
		alg = k.Algorithm
	}
	var err error
	for attempt := 0; attempt <= n.cfg.Retries; attempt++ {
		if ctx.Err() != nil {
			err = ctx.Err()
			break
		}
		res.Attempts++
		m.Id = dns.Id()
		if res.Key != "" {
			// signing takes the TSIG stub off the message: add it each
			// time, after the ID (its Original ID must be the header's)
			m.Extra = m.Extra[:0]
			m.SetTsig(res.Key, alg, fudge, time.Now().Unix())
		}
		var r *dns.Msg
		r, _, err = c.ExchangeContext(ctx, m, tg.addr.String())
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue // RFC 1996 3.6: retry unanswered NOTIFY
			}
			break
		}
		if r.Opcode != dns.OpcodeNotify {
			err = fmt.Errorf("answer with opcode %s", dns.OpcodeToString[r.Opcode])
			break
		}
		res.Rcode = dns.RcodeToString[r.Rcode]
		if ts := r.IsTsig(); ts != nil && ts.Error != 0 {
			res.Rcode += "/" + dns.RcodeToString[int(ts.Error)]
		}
		n.cfg.Metrics.notified(zone, r.Rcode, nil)
		res.Took = time.Since(start)
		return res
	}
	if err == nil {
		err = errors.New("no answer")
	}
	res.Error = err.Error()
	var te *dns.Error
	if errors.As(err, &te) || errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrTime) {
		res.Error = "answer failed TSIG verification: " + err.Error()
	}
	res.Took = time.Since(start)
	n.cfg.Metrics.notified(zone, 0, err)
	return res
}
