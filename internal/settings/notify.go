package settings

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Notify is the notify section: NOTIFY (RFC 1996) to the secondaries of
// primary zones on every served change and on POST /zones/{zone}/notify.
type Notify struct {
	Enabled bool
	FromNS  bool
	Source  string // IP address; "" lets the system choose
	Timeout time.Duration
	Retries int
	Targets []NotifyTarget
}

// NotifyTarget is one notify.targets item.
type NotifyTarget struct {
	Zone      string   // zone name (or DNSZone object name), "*" for every primary zone
	Addresses []string // host:port or IP (port 53)
	TSIGKey   string   // a tsigKeys name; "" signs with the zone's first transferTSIGKeyRefs key
}

func notifyKeys() []*key {
	const N = ScopeNode
	return []*key{
		mk("notify.enabled", boolean(), true, N, hr, "send NOTIFY to the targets of a primary zone whenever the serial it serves changes", func(c *Config, v bool) { c.Notify.Enabled = v }),
		notifyTargetsKey(),
		mk("notify.fromNS", boolean(), false, N, hr, "also notify the addresses (port 53) of the zone's NS names that served zones hold (in-zone names, glue); no upstream is asked", func(c *Config, v bool) { c.Notify.FromNS = v }),
		mk("notify.source", str(), "", N, hr, "source IP address of NOTIFY messages; empty lets the system choose", func(c *Config, v string) { c.Notify.Source = v }, opt[string]{check: func(s string) error {
			if s == "" {
				return nil
			}
			if _, err := netip.ParseAddr(s); err != nil {
				return fmt.Errorf("invalid address %q: want an IP address such as 192.0.2.1", s)
			}
			return nil
		}}),
		mk("notify.timeout", duration(), 2*time.Second, N, hr, "how long each NOTIFY waits for its answer before it is sent again", func(c *Config, v time.Duration) { c.Notify.Timeout = v }, durMin(100*time.Millisecond)),
		mk("notify.retries", integer(), 2, N, hr, "times an unanswered NOTIFY is sent again", func(c *Config, v int) { c.Notify.Retries = v }, intRange(0, 10)),
	}
}

func notifyTargetsKey() *key {
	parse := func(l []any) ([]NotifyTarget, error) {
		out := make([]NotifyTarget, 0, len(l))
		for i, e := range l {
			m, err := asMap(e)
			if err == nil {
				err = fields(m, []string{"zone", "addresses", "tsigKey"}, "zone", "addresses")
			}
			if err != nil {
				return nil, itemErr(i, err)
			}
			var t NotifyTarget
			if t.Zone, err = asString(m["zone"]); err != nil {
				return nil, itemErr(i, fmt.Errorf("zone: %w", err))
			}
			if t.Zone != "*" {
				if err := checkDomain(t.Zone); err != nil {
					return nil, itemErr(i, fmt.Errorf("zone: %w: want a zone name or \"*\" for every primary zone", err))
				}
			}
			if t.Addresses, err = parseStringList(m["addresses"]); err != nil {
				return nil, itemErr(i, fmt.Errorf("addresses: %w", err))
			}
			if len(t.Addresses) == 0 {
				return nil, itemErr(i, fmt.Errorf("addresses: at least one secondary, e.g. 192.0.2.53 or [2001:db8::53]:5353"))
			}
			for _, a := range t.Addresses {
				if _, err := NotifyAddress(a); err != nil {
					return nil, itemErr(i, fmt.Errorf("addresses: %w", err))
				}
			}
			if v, ok := m["tsigKey"]; ok {
				if t.TSIGKey, err = asString(v); err != nil {
					return nil, itemErr(i, fmt.Errorf("tsigKey: %w", err))
				}
			}
			out = append(out, t)
		}
		return out, nil
	}
	format := func(l []NotifyTarget) []any {
		out := make([]any, len(l))
		for i, t := range l {
			m := map[string]any{"zone": t.Zone, "addresses": formatStringList(t.Addresses)}
			if t.TSIGKey != "" {
				m["tsigKey"] = t.TSIGKey
			}
			out[i] = m
		}
		return out
	}
	return listKey("notify.targets", []NotifyTarget{}, "secondaries to notify: items {zone* (name or \"*\" for all primary zones), addresses* (IP or IP:port; port 53), tsigKey (a tsigKeys name; default the zone's first transferTSIGKeyRefs key)}", parse, format, func(c *Config, v []NotifyTarget) { c.Notify.Targets = v })
}

// NotifyAddress parses a notify.targets address: an IP (port 53) or
// IP:port ([IPv6]:port).
func NotifyAddress(s string) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 53), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 {
		if i := strings.LastIndexByte(s, ':'); i > 0 {
			if _, perr := strconv.Atoi(s[i+1:]); perr == nil && err == nil {
				err = fmt.Errorf("port 0")
			}
		}
		return netip.AddrPort{}, fmt.Errorf("invalid address %q: want an IP address with an optional port, e.g. 192.0.2.53 or 192.0.2.53:5353 (host names are not resolved)", s)
	}
	return ap, nil
}
