package settings

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Publish is the publish section: sinks that record sets labelled
// service.io/publish=<target name> are written to.
type Publish struct {
	Targets []PublishTarget
}

// PublishTarget is one publish.targets item.
type PublishTarget struct {
	Name    string        // the service.io/publish label value that selects it
	Type    string        // rfc2136
	Server  string        // host:port of the primary that accepts UPDATE
	Zone    string        // the zone UPDATE messages name
	TSIGKey string        // a tsigKeys name; "" sends unsigned UPDATE
	Timeout time.Duration // per UPDATE exchange
}

// PublishTypes are the target types built.
var publishTypes = []string{"rfc2136"}

// ReservedPublishTarget names the label value a second external-dns
// instance reads (--label-filter=service.io/publish=external-dns): it is not
// a target of this service.
const ReservedPublishTarget = "external-dns"

// label values: Kubernetes label value syntax, not empty.
var publishNameRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

const defaultPublishTimeout = 5 * time.Second

func publishKeys() []*key {
	return []*key{publishTargetsKey()}
}

func publishTargetsKey() *key {
	parse := func(l []any) ([]PublishTarget, error) {
		out := make([]PublishTarget, 0, len(l))
		seen := map[string]bool{}
		for i, e := range l {
			m, err := asMap(e)
			if err == nil {
				err = fields(m, []string{"name", "type", "server", "zone", "tsigKey", "timeout"}, "name", "type", "server", "zone")
			}
			if err != nil {
				return nil, itemErr(i, err)
			}
			t := PublishTarget{Timeout: defaultPublishTimeout}
			if t.Name, err = asString(m["name"]); err != nil {
				return nil, itemErr(i, fmt.Errorf("name: %w", err))
			}
			if !publishNameRE.MatchString(t.Name) {
				return nil, itemErr(i, fmt.Errorf("name: invalid value %q: want a label value such as public-dns (letters, digits, '-', '_', '.'; at most 63)", t.Name))
			}
			if t.Name == ReservedPublishTarget {
				return nil, itemErr(i, fmt.Errorf("name: %q is reserved for a second external-dns instance (--label-filter=service.io/publish=external-dns); choose another name", t.Name))
			}
			if seen[t.Name] {
				return nil, itemErr(i, fmt.Errorf("name: repeated name %q", t.Name))
			}
			seen[t.Name] = true
			if t.Type, err = asString(m["type"]); err != nil {
				return nil, itemErr(i, fmt.Errorf("type: %w", err))
			}
			if t.Type != "rfc2136" {
				return nil, itemErr(i, fmt.Errorf("type: invalid value %q: want one of %s", t.Type, strings.Join(publishTypes, ", ")))
			}
			if t.Server, err = PublishServer(m["server"]); err != nil {
				return nil, itemErr(i, fmt.Errorf("server: %w", err))
			}
			if t.Zone, err = asString(m["zone"]); err != nil {
				return nil, itemErr(i, fmt.Errorf("zone: %w", err))
			}
			if err := checkDomain(t.Zone); err != nil {
				return nil, itemErr(i, fmt.Errorf("zone: %w: want the zone the server is primary for, e.g. example.com", err))
			}
			if v, ok := m["tsigKey"]; ok {
				if t.TSIGKey, err = asString(v); err != nil {
					return nil, itemErr(i, fmt.Errorf("tsigKey: %w", err))
				}
			}
			if v, ok := m["timeout"]; ok {
				if t.Timeout, err = parseDuration(v); err != nil {
					return nil, itemErr(i, fmt.Errorf("timeout: %w", err))
				}
				if t.Timeout < 100*time.Millisecond || t.Timeout > time.Minute {
					return nil, itemErr(i, fmt.Errorf("timeout: %s is out of range: want 100ms to 1m", t.Timeout))
				}
			}
			out = append(out, t)
		}
		return out, nil
	}
	format := func(l []PublishTarget) []any {
		out := make([]any, len(l))
		for i, t := range l {
			m := map[string]any{"name": t.Name, "type": t.Type, "server": t.Server, "zone": t.Zone, "timeout": formatDuration(t.Timeout)}
			if t.TSIGKey != "" {
				m["tsigKey"] = t.TSIGKey
			}
			out[i] = m
		}
		return out
	}
	return listKey("publish.targets", []PublishTarget{},
		"publication targets of record sets labelled service.io/publish=<name>: items {name* (the label value), type* (rfc2136: DNS UPDATE), server* (host:port of the primary; port 53 when omitted), zone* (the zone updated), tsigKey (a tsigKeys name; empty sends unsigned UPDATE), timeout (default 5s)}",
		parse, format, func(c *Config, v []PublishTarget) { c.Publish.Targets = v })
}

// PublishServer parses a publish.targets server: host or host:port (port
// 53 when omitted); IPv6 addresses with a port in brackets.
func PublishServer(v any) (string, error) {
	s, err := asString(v)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", errors.New("required: the primary's address, e.g. 192.0.2.53 or ns1.example.com:53")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = strings.Trim(s, "[]"), "53"
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return "", fmt.Errorf("invalid address %q: bad port", s)
	}
	if _, err := parseHostPort(net.JoinHostPort(host, port)); err != nil || host == "" {
		return "", fmt.Errorf("invalid address %q: want host or host:port, e.g. 192.0.2.53 or [2001:db8::53]:5353", s)
	}
	return net.JoinHostPort(host, port), nil
}
