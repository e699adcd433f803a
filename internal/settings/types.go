package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Values arrive in two shapes: decoded YAML/JSON (string, json.Number, bool,
// []any, map[string]any) from files and the API, and plain strings from the
// environment. Every parser below accepts the first shape; the ones for scalar
// and string-list types also accept the second.

func asString(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case json.Number:
		return t.String(), nil
	case bool:
		return strconv.FormatBool(t), nil
	case nil:
		return "", nil
	default:
		return "", fmt.Errorf("expected a string, got %s", kindOf(v))
	}
}

func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func parseString(v any) (string, error) { return asString(v) }

func parseInt(v any) (int64, error) {
	switch t := v.(type) {
	case json.Number:
		n, err := strconv.ParseInt(t.String(), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("invalid integer %q", t.String())
		}
		return n, nil
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("invalid integer %q", t)
		}
		return n, nil
	default:
		return 0, fmt.Errorf("expected an integer, got %s", kindOf(v))
	}
}

func parseBool(v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(t))
		if err != nil {
			return false, fmt.Errorf("invalid bool %q", t)
		}
		return b, nil
	default:
		return false, fmt.Errorf("expected a bool, got %s", kindOf(v))
	}
}

// parseDuration accepts Go duration strings and a bare 0; negative durations
// mean nothing for any key and are refused.
func parseDuration(v any) (time.Duration, error) {
	var s string
	switch t := v.(type) {
	case string:
		s = strings.TrimSpace(t)
	case json.Number:
		if t.String() == "0" {
			return 0, nil
		}
		return 0, fmt.Errorf("invalid duration %s (a unit is required, e.g. 30s)", t.String())
	default:
		return 0, fmt.Errorf("expected a duration, got %s", kindOf(v))
	}
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: negative", s)
	}
	return d, nil
}

// formatDuration writes the largest exact unit (24h, 5m, 1800ms) rather than
// Go's 24h0m0s, so values read back as the spec and users write them.
func formatDuration(d time.Duration) any {
	if d == 0 {
		return "0s"
	}
	for _, u := range []struct {
		s string
		d time.Duration
	}{{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.s
		}
	}
	return d.String()
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "GiB" is not read as "B".
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
	{"B", 1},
}

// parseBytes reads sizes such as 10GiB, 500MB or 1048576.
func parseBytes(v any) (int64, error) {
	var s string
	switch t := v.(type) {
	case string:
		s = strings.TrimSpace(t)
	case json.Number:
		s = t.String()
	default:
		return 0, fmt.Errorf("expected a size, got %s", kindOf(v))
	}
	num, mult := s, int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return n * mult, nil
}

// formatBytes writes the largest exact binary unit, so 10GiB stays 10GiB.
func formatBytes(n int64) any {
	if n == 0 {
		return "0"
	}
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.m == 0 {
			return strconv.FormatInt(n/u.m, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// parseHostPort checks host:port where host is empty, an IP or a name.
func parseHostPort(v any) (string, error) {
	s, err := asString(v)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("invalid host:port %q", s)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("invalid host:port %q: bad port", s)
	}
	if host != "" {
		if _, err := netip.ParseAddr(host); err != nil && checkDomain(host) != nil {
			return "", fmt.Errorf("invalid host:port %q: bad host", s)
		}
	}
	return s, nil
}

// requiredHostPort is parseHostPort for fields that cannot be empty.
func requiredHostPort(v any) (string, error) {
	s, err := parseHostPort(v)
	if err == nil && s == "" {
		err = errors.New("address is required")
	}
	return s, err
}

// parseStringList takes a YAML list or, from the environment, a
// comma-separated string.
func parseStringList(v any) ([]string, error) {
	switch t := v.(type) {
	case string:
		out := []string{}
		for _, p := range strings.Split(t, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out, nil
	case []any:
		out := make([]string, 0, len(t))
		for i, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("item %d: expected a string, got %s", i, kindOf(e))
			}
			out = append(out, s)
		}
		return out, nil
	case nil:
		return []string{}, nil
	default:
		return nil, fmt.Errorf("expected a list of strings, got %s", kindOf(v))
	}
}

func formatStringList(l []string) any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// parsePrefix reads a CIDR; a bare address stands for itself (/32 or /128).
func parsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid CIDR %q", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR %q", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parseCIDRList(v any) ([]netip.Prefix, error) {
	l, err := parseStringList(v)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, len(l))
	for _, s := range l {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func formatCIDRList(l []netip.Prefix) any {
	out := make([]any, len(l))
	for i, p := range l {
		out[i] = p.String()
	}
	return out
}

// parseURL accepts empty or an absolute http(s) URL.
func parseURL(v any) (string, error) {
	s, err := asString(v)
	if err != nil || s == "" {
		return s, err
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("invalid URL %q: want an absolute http or https URL", s)
	}
	return s, nil
}

func parseIPv4(v any) (netip.Addr, error) {
	s, err := asString(v)
	if err != nil || s == "" {
		return netip.Addr{}, err
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Errorf("invalid IPv4 address %q", s)
	}
	return a, nil
}

func parseIPv6(v any) (netip.Addr, error) {
	s, err := asString(v)
	if err != nil || s == "" {
		return netip.Addr{}, err
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("invalid IPv6 address %q", s)
	}
	return a, nil
}

func formatAddr(a netip.Addr) any {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// checkDomain validates a DNS name in presentation form (trailing dot optional).
func checkDomain(s string) error {
	n := strings.TrimSuffix(s, ".")
	if n == "" || len(n) > 253 {
		return fmt.Errorf("invalid domain %q", s)
	}
	for _, l := range strings.Split(n, ".") {
		if len(l) == 0 || len(l) > 63 {
			return fmt.Errorf("invalid domain %q", s)
		}
		for _, c := range l {
			ok := c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
			if !ok {
				return fmt.Errorf("invalid domain %q", s)
			}
		}
	}
	return nil
}

func parseDomain(v any) (string, error) {
	s, err := asString(v)
	if err != nil || s == "" {
		return s, err
	}
	return s, checkDomain(s)
}

// parseAutoBool reads "auto", "true" or "false" (auth.session.secure).
func parseAutoBool(v any) (string, error) {
	if b, ok := v.(bool); ok {
		return strconv.FormatBool(b), nil
	}
	s, err := asString(v)
	if err != nil {
		return "", err
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		return "auto", nil
	case "true", "1", "yes":
		return "true", nil
	case "false", "0", "no":
		return "false", nil
	}
	return "", fmt.Errorf("invalid value %q: want auto, true or false", s)
}

var upstreamSchemes = map[string]bool{"udp": true, "tcp": true, "tls": true, "https": true, "quic": true, "h3": true}

// checkUpstream validates one upstream: host:port, a bare IP (port 53), or a
// URL with scheme udp, tcp, tls, https, quic or h3.
func checkUpstream(s string) error {
	if s == "" {
		return errors.New("empty upstream")
	}
	if i := strings.Index(s, "://"); i >= 0 {
		u, err := url.Parse(s)
		if err != nil || !upstreamSchemes[u.Scheme] || u.Hostname() == "" {
			return fmt.Errorf("invalid upstream %q: want host:port or udp://, tcp://, tls://, https://, quic://, h3:// URL", s)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("invalid upstream %q: bad port", s)
			}
		}
		return nil
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("invalid upstream %q: want host:port or a URL", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("invalid upstream %q: bad port", s)
	}
	if _, err := netip.ParseAddr(host); err != nil && checkDomain(host) != nil {
		return fmt.Errorf("invalid upstream %q: bad host", s)
	}
	return nil
}

// upstreamHostIsIP tells whether an upstream names its server by address; the
// bootstrap resolvers must, since nothing resolves their names.
func upstreamHostIsIP(s string) bool {
	host := s
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return false
		}
		host = u.Hostname()
	} else if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// checkExcludePattern validates a query-log domain exclusion: exact,
// *.suffix or /regex/.
func checkExcludePattern(s string) error {
	if len(s) >= 2 && strings.HasPrefix(s, "/") && strings.HasSuffix(s, "/") {
		if _, err := regexp.Compile(s[1 : len(s)-1]); err != nil {
			return fmt.Errorf("invalid pattern %q: %v", s, err)
		}
		return nil
	}
	if strings.HasPrefix(s, "*.") {
		return checkDomain(s[2:])
	}
	return checkDomain(s)
}

// checkClientPattern validates a query-log client exclusion: IP, CIDR or name.
func checkClientPattern(s string) error {
	if _, err := parsePrefix(s); err == nil {
		return nil
	}
	if s == "" || strings.ContainsAny(s, " \t/") {
		return fmt.Errorf("invalid client %q: want an IP, CIDR or client name", s)
	}
	return nil
}

// asMap requires a decoded mapping.
func asMap(v any) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected a map, got %s", kindOf(v))
	}
	return m, nil
}

func asList(v any) ([]any, error) {
	if v == nil {
		return []any{}, nil
	}
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("expected a list, got %s", kindOf(v))
	}
	return l, nil
}

// fields checks that a list item or map value has only known fields and all
// required ones; it names the offender so users can find it.
func fields(m map[string]any, allowed []string, required ...string) error {
	ok := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		ok[a] = true
	}
	var unknown []string
	for k := range m {
		if !ok[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("unknown field %q", unknown[0])
	}
	for _, r := range required {
		if v, present := m[r]; !present || v == nil || v == "" {
			return fmt.Errorf("field %q is required", r)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkNamespaceOrAll accepts a Kubernetes namespace name (an RFC 1123
// label) or "*".
func checkNamespaceOrAll(s string) error {
	if s == "*" {
		return nil
	}
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return fmt.Errorf("%q is not a namespace name (lower-case letters, digits and '-', at most 63) or *", s)
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%q is not a namespace name (lower-case letters, digits and '-', at most 63) or *", s)
		}
	}
	return nil
}
