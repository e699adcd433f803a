package upstream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Bootstrap cache bounds: TTLs are honoured up to maxBootTTL; a lookup
// runs at most bootTimeout however long its callers wait.
const (
	maxBootTTL  = 24 * time.Hour
	bootTimeout = 5 * time.Second
)

// bootstrap resolves upstream host names through plain DNS servers and
// caches the addresses for their TTL.
type bootstrap struct {
	servers []transport
	names   []string
	bufs    *bufPool
	ctx     context.Context // ended by close, stops lookups in flight
	cancel  context.CancelFunc

	mu       sync.Mutex
	cache    map[string]bootEntry
	inflight map[string]*bootCall
}

type bootEntry struct {
	addrs   []netip.Addr
	expires time.Time
}

type bootCall struct {
	done  chan struct{}
	addrs []netip.Addr
	err   error
}

func newBootstrap(servers []string, bufs *bufPool) (*bootstrap, error) {
	b := &bootstrap{
		bufs:     bufs,
		cache:    make(map[string]bootEntry),
		inflight: make(map[string]*bootCall),
	}
	d := &dialer{} // bootstrap servers are IP literals: no lookup needed
	for _, s := range servers {
		a, err := ParseAddress(s)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		if !a.IsIP() {
			return nil, fmt.Errorf("bootstrap server %q must be an IP address", s)
		}
		switch a.Scheme {
		case SchemeUDP:
			b.servers = append(b.servers, &udpTransport{addr: a, d: d, tcp: newStreamTransport(tcpDial(d, a))})
		case SchemeTCP:
			b.servers = append(b.servers, newStreamTransport(tcpDial(d, a)))
		default:
			return nil, fmt.Errorf("bootstrap server %q must be plain DNS (udp or tcp)", s)
		}
		b.names = append(b.names, s)
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// lookup returns the addresses of host, IPv4 first. An expired entry is
// still returned while a refresh runs in the background, so a TTL expiry
// never delays a query and a bootstrap outage does not take down upstreams
// that were reachable before.
func (b *bootstrap) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	b.mu.Lock()
	e, cached := b.cache[host]
	if cached && time.Now().Before(e.expires) {
		b.mu.Unlock()
		return e.addrs, nil
	}
	call, ok := b.inflight[host]
	if !ok {
		// One lookup per name however many queries wait for it, detached
		// from the first caller so its cancellation does not fail the rest.
		call = &bootCall{done: make(chan struct{})}
		b.inflight[host] = call
		go b.resolve(host, call)
	}
	b.mu.Unlock()
	if cached {
		return e.addrs, nil
	}
	select {
	case <-call.done:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %s: %w", errBootstrap, host, ctx.Err())
	}
	return call.addrs, call.err
}

func (b *bootstrap) resolve(host string, call *bootCall) {
	ctx, cancel := context.WithTimeout(b.ctx, bootTimeout)
	defer cancel()
	addrs, ttl, err := b.query(ctx, host)
	b.mu.Lock()
	if err == nil {
		// TTL 0 keeps the addresses only as stale ones, refreshed on
		// every use.
		b.cache[host] = bootEntry{addrs: addrs, expires: time.Now().Add(ttl)}
	}
	delete(b.inflight, host)
	b.mu.Unlock()
	call.addrs, call.err = addrs, err
	close(call.done)
}

// query asks for A and AAAA at once and merges them.
func (b *bootstrap) query(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	type res struct {
		addrs []netip.Addr
		ttl   time.Duration
		err   error
	}
	var four, six res
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		six.addrs, six.ttl, six.err = b.queryType(ctx, host, dns.TypeAAAA)
	}()
	four.addrs, four.ttl, four.err = b.queryType(ctx, host, dns.TypeA)
	wg.Wait()
	addrs := append(four.addrs, six.addrs...)
	if len(addrs) == 0 {
		err := errors.Join(four.err, six.err)
		if err == nil {
			err = errors.New("no A or AAAA records")
		}
		return nil, 0, fmt.Errorf("%w: %s: %w", errBootstrap, host, err)
	}
	ttl := four.ttl
	if len(four.addrs) == 0 || (len(six.addrs) > 0 && six.ttl < ttl) {
		ttl = six.ttl
	}
	return addrs, ttl, nil
}

// queryType asks the bootstrap servers in order until one answers; an
// answer without records of the type is final.
func (b *bootstrap) queryType(ctx context.Context, host string, qtype uint16) ([]netip.Addr, time.Duration, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(host), qtype)
	wire, err := m.Pack()
	if err != nil {
		return nil, 0, fmt.Errorf("pack: %w", err)
	}
	if len(b.servers) == 0 {
		return nil, 0, errors.New("no bootstrap servers configured")
	}
	var last error
	for i, t := range b.servers {
		resp, err := exchangeWire(ctx, t, b.bufs, wire, uint16(rand.Uint32()), m.Question[0])
		if err != nil {
			last = fmt.Errorf("bootstrap %s: %w", b.names[i], err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
			last = fmt.Errorf("bootstrap %s: rcode %s", b.names[i], dns.RcodeToString[resp.Rcode])
			continue
		}
		var addrs []netip.Addr
		ttl := maxBootTTL
		for _, rr := range resp.Answer {
			var ip netip.Addr
			switch v := rr.(type) {
			case *dns.A:
				ip, _ = netip.AddrFromSlice(v.A.To4())
			case *dns.AAAA:
				ip, _ = netip.AddrFromSlice(v.AAAA)
			default:
				continue // CNAME chain: only the addresses matter
			}
			if !ip.IsValid() || rr.Header().Rrtype != qtype {
				continue
			}
			addrs = append(addrs, ip.Unmap())
			ttl = min(ttl, time.Duration(rr.Header().Ttl)*time.Second)
		}
		if len(addrs) == 0 {
			return nil, 0, nil
		}
		return addrs, ttl, nil
	}
	return nil, 0, last
}

func (b *bootstrap) close() error {
	b.cancel()
	for _, t := range b.servers {
		_ = t.close()
	}
	return nil
}
