package edge

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcdns/svc/internal/internalapi"
)

// Source lists the backends; the supervisor asks it every poll.
type Source interface {
	Backends(ctx context.Context) ([]Backend, error)
}

// Static is a fixed list (--backends-from static).
type Static []Backend

// Backends returns the list.
func (s Static) Backends(context.Context) ([]Backend, error) { return slices.Clone(s), nil }

// InternalCredentials reads the nodes' internal listener token and CA
// (listeners.internal.tokenFile and tls.caFile of the nodes).
func InternalCredentials(tokenFile, caFile, serverName string) (*internalapi.Credentials, error) {
	if tokenFile == "" || caFile == "" {
		return nil, errors.New("the nodes' internal listener needs --internal-token-file and --internal-ca-file (the nodes' listeners.internal.tokenFile and tls.caFile)")
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("--internal-token-file: %w", err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--internal-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("--internal-ca-file %s: no PEM certificate", caFile)
	}
	if serverName == "" {
		serverName = internalapi.DefaultServerName
	}
	return &internalapi.Credentials{Token: strings.TrimSpace(string(tok)), CAs: pool, ServerName: serverName}, nil
}

// Nodes asks the nodes' internal listeners: /internal/status for
// readiness (--backends-from internal) and the blocking toggle, and
// /internal/zones for the authoritative zones.
type Nodes struct {
	Client *internalapi.Client
	// Seeds are the nodes' addresses (IP, or IP:port of the internal
	// listener; the port defaults to InternalPort).
	Seeds        []string
	InternalPort int
	BackendPort  int
}

// internalAddr is the internal listener of a node at addr.
func (n *Nodes) internalAddr(addr netip.Addr) string {
	return net.JoinHostPort(addr.String(), strconv.Itoa(n.InternalPort))
}

func (n *Nodes) seedAddrs() ([]string, error) {
	var out []string
	for _, s := range n.Seeds {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			out = append(out, ap.String())
			continue
		}
		a, err := netip.ParseAddr(strings.Trim(s, "[]"))
		if err != nil {
			return nil, fmt.Errorf("--backends %q: want the nodes' IP addresses (or IP:internal-port)", s)
		}
		out = append(out, n.internalAddr(a))
	}
	return out, nil
}

// Backends returns the ready nodes, named by their node names.
func (n *Nodes) Backends(ctx context.Context) ([]Backend, error) {
	seeds, err := n.seedAddrs()
	if err != nil {
		return nil, err
	}
	type res struct {
		b  Backend
		ok bool
	}
	out := make([]res, len(seeds))
	var wg sync.WaitGroup
	for i, s := range seeds {
		wg.Go(func() {
			st, err := n.Client.Status(ctx, s)
			if err != nil || !st.Ready {
				return
			}
			ap := netip.MustParseAddrPort(s)
			name := st.Node
			if name == "" {
				name = ap.Addr().String()
			}
			out[i] = res{Backend{Name: name, Address: netip.AddrPortFrom(ap.Addr(), uint16(n.BackendPort))}, true}
		})
	}
	wg.Wait()
	var bs []Backend
	for _, r := range out {
		if r.ok {
			bs = append(bs, r.b)
		}
	}
	SortBackends(bs)
	return bs, nil
}

// State is what the nodes report that the edge follows: the union of
// their zones and a fingerprint of their blocking toggles and snapshot
// serials (a change flushes the edge's cache).
type State struct {
	Zones       []string
	Fingerprint string
}

// Poll asks every backend's internal listener; nodes that do not
// answer are skipped, and an error is returned only when none answered.
func (n *Nodes) Poll(ctx context.Context, backends []Backend) (State, error) {
	var st State
	zones := map[string]bool{}
	var fp []string
	var errs []error
	answered := 0
	for _, b := range backends {
		addr := n.internalAddr(b.Address.Addr())
		s, err := n.Client.Status(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		zs, err := n.Client.Zones(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		answered++
		blocking := "?"
		if s.Blocking != nil {
			blocking = strconv.FormatBool(*s.Blocking)
		}
		fp = append(fp, fmt.Sprintf("%s=%d/%s", b.Name, s.Serial, blocking))
		for _, z := range zs {
			// The root would send every name to the authoritative pool,
			// whose answers the edge caches: names under it that the node
			// resolves stay with the resolver pool.
			if n := strings.ToLower(dnsFQDN(z.Name)); n != "." {
				zones[n] = true
			}
		}
	}
	if answered == 0 && len(errs) > 0 {
		return st, fmt.Errorf("no node's internal listener answered: %w", errors.Join(errs...))
	}
	for z := range zones {
		st.Zones = append(st.Zones, z)
	}
	slices.Sort(st.Zones)
	slices.Sort(fp)
	st.Fingerprint = strings.Join(fp, ",")
	return st, nil
}

func dnsFQDN(s string) string {
	if strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// Kube lists the EndpointSlices of the data-plane Service
// (--backends-from kubernetes): ready endpoints only.
type Kube struct {
	Client    kubernetes.Interface
	Namespace string
	Service   string
	// Port is the backend port when the slice names none called "dns"
	// (or "dns-udp").
	Port int
}

// Backends lists the ready endpoints, named by their target (pod) name.
func (k *Kube) Backends(ctx context.Context) ([]Backend, error) {
	list, err := k.Client.DiscoveryV1().EndpointSlices(k.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + k.Service,
	})
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("list EndpointSlices of Service %s/%s: %w: the edge's ServiceAccount needs list on endpointslices.discovery.k8s.io in namespace %s (the chart's edge Role and RoleBinding grant it)", k.Namespace, k.Service, err, k.Namespace)
	}
	if err != nil {
		return nil, fmt.Errorf("list EndpointSlices of Service %s/%s: %w", k.Namespace, k.Service, err)
	}
	seen := map[netip.AddrPort]bool{}
	var out []Backend
	for _, sl := range list.Items {
		port := k.Port
		for _, p := range sl.Ports {
			if p.Name != nil && (*p.Name == "dns" || *p.Name == "dns-udp") && p.Port != nil {
				port = int(*p.Port)
			}
		}
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if ep.Conditions.Terminating != nil && *ep.Conditions.Terminating {
				continue
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				ap := netip.AddrPortFrom(ip, uint16(port))
				if seen[ap] {
					continue
				}
				seen[ap] = true
				name := ap.String()
				if ep.TargetRef != nil && ep.TargetRef.Name != "" {
					name = ep.TargetRef.Name
				}
				out = append(out, Backend{Name: name, Address: ap})
			}
		}
	}
	SortBackends(out)
	return out, nil
}
