// Package vip renders and supervises keepalived (VRRP) so that the DNS
// service keeps stable addresses when a node dies: one VRRP instance per
// virtual address, unicast adverts between the peers, priorities that
// spread the addresses over the nodes, a track script that gives the
// addresses away when the local DNS stops answering, and a drain file that
// moves them away before maintenance (svc vip, issue #26).
package vip

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// VIP is one --vip name=addr/len@iface#vrid.
type VIP struct {
	Name   string
	Prefix netip.Prefix // the address and its prefix length on the interface
	Iface  string
	VRID   int
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$`)

// ParseVIP parses name=addr/len@iface#vrid (e.g. dns-a=192.0.2.53/24@eth0#53).
func ParseVIP(s string) (VIP, error) {
	const form = "want name=addr/len@iface#vrid, e.g. dns-a=192.0.2.53/24@eth0#53"
	name, rest, ok := strings.Cut(s, "=")
	if !ok {
		return VIP{}, fmt.Errorf("--vip %q: no name: %s", s, form)
	}
	if !nameRE.MatchString(name) {
		return VIP{}, fmt.Errorf("--vip %q: name %q must be 1-32 lower-case letters, digits or '-'", s, name)
	}
	rest, vrid, ok := strings.Cut(rest, "#")
	if !ok {
		return VIP{}, fmt.Errorf("--vip %q: no #vrid: %s", s, form)
	}
	addr, iface, ok := strings.Cut(rest, "@")
	if !ok || iface == "" {
		return VIP{}, fmt.Errorf("--vip %q: no @iface: %s", s, form)
	}
	if len(iface) > 15 || strings.ContainsAny(iface, " /\t{}\"") {
		return VIP{}, fmt.Errorf("--vip %q: %q is not an interface name", s, iface)
	}
	p, err := netip.ParsePrefix(addr)
	if err != nil {
		return VIP{}, fmt.Errorf("--vip %q: %v: %s", s, err, form)
	}
	id, err := strconv.Atoi(vrid)
	if err != nil || id < 1 || id > 255 {
		return VIP{}, fmt.Errorf("--vip %q: vrid %q must be a number from 1 to 255 (unique per segment)", s, vrid)
	}
	return VIP{Name: name, Prefix: p, Iface: iface, VRID: id}, nil
}

// String is the --vip form.
func (v VIP) String() string {
	return fmt.Sprintf("%s=%s@%s#%d", v.Name, v.Prefix, v.Iface, v.VRID)
}

// Probe is what the track script checks (svc vip probe).
type Probe struct {
	DNS             []string      // local DNS addresses to ask for the health name
	Timeout         time.Duration // per probe run
	RequireBackends int           // how many of DNS must answer
}

// Options is everything a rendering depends on.
type Options struct {
	VIPs  []VIP
	Peers []netip.Addr // every node's unicast address, this one included or not
	Self  netip.Addr   // this node's unicast source address
	// PriorityIndex is this node's position among the nodes; -1: its
	// position in the sorted peers (self included).
	PriorityIndex int
	PreemptDelay  time.Duration
	// KeyFile is the HMAC key path; {vrid} is replaced by the instance's VRID.
	KeyFile string
	Legacy  bool // no advert authentication
	RunDir  string
	// Svc is the absolute path of the svc binary keepalived runs for the
	// track script and the notify fifo.
	Svc   string
	Probe Probe
	// RouterID names this node in keepalived's logs (default: Self).
	RouterID string
	// Track is how the local DNS's health reaches keepalived: TrackFile
	// (svc vip run probes in process and writes HealthFile) or TrackScript
	// (keepalived runs svc vip probe every second).
	Track string
}

// Track modes.
const (
	TrackFile   = "file"
	TrackScript = "script"
)

// Files in the run dir.
const (
	ConfigFile = "keepalived.conf"
	DrainFile  = "vip-drain"      // keepalived track_file: 0 serving, -254 fault, -100 drained backup
	FifoFile   = "vip.fifo"       // keepalived's notify fifo, read by svc vip fifo
	StateFile  = "vip-state.json" // instance states written by svc vip fifo
	PlanFile   = "vip-plan.json"  // what this node renders: instances, priorities, preferred
	PIDFile    = "keepalived.pid"
	VRRPPID    = "keepalived-vrrp.pid"
	ProbeFile  = "vip-probe"  // last probe failure, for svc health and doctor
	HealthFile = "vip-health" // keepalived track_file: 0 the local DNS answers, 1 it does not
)

// Drain values written to DrainFile (keepalived adds value*weight, weight 1).
const (
	drainServing = 0
	// drainFault is below -253: keepalived puts the instances in FAULT, and
	// a master in FAULT sends a priority 0 advert so a backup takes over at
	// once instead of after the master-down interval.
	drainFault = -254
	// drainBackup keeps a drained node a backup of last resort, below every
	// serving node (priorities 101..200).
	drainBackup = -100
)

// Priority of a node for a VIP: the node of rank 0 prefers it; ranks rotate
// with the VIP's position so that k VIPs over k nodes land one per node.
const (
	topPriority = 200
	maxNodes    = 99
)

// Instance is one rendered VRRP instance.
type Instance struct {
	Name      string `json:"name"` // keepalived instance name
	VIP       string `json:"vip"`  // the --vip form
	Address   string `json:"address"`
	VRID      int    `json:"vrid"`
	Priority  int    `json:"priority"`
	Preferred bool   `json:"preferred"` // this node is the VIP's first choice
}

// Plan is what a rendering decided; run writes it to PlanFile for drain,
// rebalance and health.
type Plan struct {
	Self          string     `json:"self"`
	Peers         []string   `json:"peers"`
	PriorityIndex int        `json:"priorityIndex"`
	Instances     []Instance `json:"instances"`
	Auth          string     `json:"auth"` // "AH" or "none"
}

// InstanceName is the keepalived instance name of a VIP.
func InstanceName(v VIP) string { return "svc_" + v.Name }

// KeyPath is the key file of a VRID.
func KeyPath(tmpl string, vrid int) string {
	return strings.ReplaceAll(tmpl, "{vrid}", strconv.Itoa(vrid))
}

// authPass derives the 8-character VRRPv2 auth_pass of a VRID from the
// HMAC key: keepalived keys its AH HMAC-MD5-96 with at most 8 bytes of
// auth_pass, so the key file's secret is stretched into a per-VRID value
// instead of being pasted (and truncated) as it is. Two VRIDs never share
// a pass, and the key itself never reaches keepalived's config.
func authPass(key []byte, vrid int) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "svc vrrp auth_pass v1 vrid=%d", vrid)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))[:8]
}

// ReadKey reads an HMAC key file: at least 16 bytes, surrounding white
// space ignored.
func ReadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("advert authentication key: %w (create it, e.g. `head -c 32 /dev/urandom | base64 > %s`, the same on every node, or pass --legacy for unauthenticated adverts)", err, path)
	}
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) < 16 {
		return nil, fmt.Errorf("advert authentication key %s: %d bytes, want at least 16 (e.g. `head -c 32 /dev/urandom | base64 > %s`)", path, len(b), path)
	}
	return b, nil
}

// validate checks the options and returns the sorted, deduplicated peers
// with self in them, and this node's index.
func (o *Options) validate() ([]netip.Addr, int, error) {
	if len(o.VIPs) == 0 {
		return nil, 0, fmt.Errorf("no --vip: give at least one name=addr/len@iface#vrid")
	}
	seenName, seenVRID := map[string]bool{}, map[string]bool{}
	for _, v := range o.VIPs {
		if seenName[v.Name] {
			return nil, 0, fmt.Errorf("--vip %s: name %q given twice", v, v.Name)
		}
		key := v.Iface + "#" + strconv.Itoa(v.VRID) + "/" + strconv.FormatBool(v.Prefix.Addr().Is4())
		if seenVRID[key] {
			return nil, 0, fmt.Errorf("--vip %s: vrid %d used twice on %s; each VIP needs its own VRID", v, v.VRID, v.Iface)
		}
		seenName[v.Name], seenVRID[key] = true, true
		if v.Prefix.Addr().Is4() != o.Self.Is4() {
			return nil, 0, fmt.Errorf("--vip %s: address family differs from this node's unicast address %s", v, o.Self)
		}
	}
	if !o.Self.IsValid() {
		return nil, 0, fmt.Errorf("no unicast source address for this node: none of --peers is an address of this host")
	}
	set := map[netip.Addr]bool{o.Self: true}
	for _, p := range o.Peers {
		if p.Is4() != o.Self.Is4() {
			return nil, 0, fmt.Errorf("peer %s: address family differs from this node's address %s", p, o.Self)
		}
		set[p] = true
	}
	all := make([]netip.Addr, 0, len(set))
	for p := range set {
		all = append(all, p)
	}
	slices.SortFunc(all, func(a, b netip.Addr) int { return a.Compare(b) })
	if len(all) > maxNodes {
		return nil, 0, fmt.Errorf("%d peers: at most %d nodes share a VRID", len(all), maxNodes)
	}
	idx := o.PriorityIndex
	if idx < 0 {
		idx = slices.Index(all, o.Self)
	}
	if idx >= len(all) {
		return nil, 0, fmt.Errorf("--priority-index %d: want 0..%d (one per node, %d nodes)", idx, len(all)-1, len(all))
	}
	if o.PreemptDelay < 0 || o.PreemptDelay > 1000*time.Second {
		return nil, 0, fmt.Errorf("--preempt-delay %s: want 0s..1000s (keepalived's range)", o.PreemptDelay)
	}
	if o.Probe.RequireBackends > len(o.Probe.DNS) {
		return nil, 0, fmt.Errorf("--require-backends %d but only %d --dns addresses to probe", o.Probe.RequireBackends, len(o.Probe.DNS))
	}
	if o.Track != TrackFile && o.Track != TrackScript {
		return nil, 0, fmt.Errorf("--track %q: want file (svc vip run probes) or script (keepalived runs svc vip probe)", o.Track)
	}
	if o.Svc == "" || !strings.HasPrefix(o.Svc, "/") {
		return nil, 0, fmt.Errorf("svc binary path %q must be absolute (keepalived runs it)", o.Svc)
	}
	if o.RunDir == "" || !strings.HasPrefix(o.RunDir, "/") {
		return nil, 0, fmt.Errorf("--run-dir %q must be an absolute path", o.RunDir)
	}
	return all, idx, nil
}

// vipOrder is the VIPs sorted by VRID then name: every node sees the same
// order whatever the order of its --vip flags, so the rotation agrees.
func vipOrder(vs []VIP) []VIP {
	out := slices.Clone(vs)
	slices.SortFunc(out, func(a, b VIP) int {
		if a.VRID != b.VRID {
			return a.VRID - b.VRID
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
