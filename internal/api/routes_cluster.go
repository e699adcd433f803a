package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/svcdns/svc/internal/doctor"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/version"
)

// BlockingReader reports the blocking toggle of this node (the node's
// toggle.Toggle State). When Deps.Blocking is nil, Deps.DNS is used if it
// implements this interface.
type BlockingReader interface {
	BlockingState(ctx context.Context) (BlockingState, error)
}

// ClusterSource describes the cluster this node belongs to.
type ClusterSource interface {
	ClusterInfo(ctx context.Context) (ClusterInfo, error)
	// Nodes lists this node and, when known, its peers.
	Nodes(ctx context.Context) ([]NodeInfo, error)
}

// DoctorSource is the serving node's own checks (config file, data
// directory, listeners, readiness, restart-pending settings).
type DoctorSource interface {
	Doctor(ctx context.Context) (*doctor.Report, error)
}

type doctorOut struct{ Body *doctor.Report }

// ZoneNotifier sends DNS NOTIFY for a zone to its secondaries.
type ZoneNotifier interface {
	// NotifyZone sends NOTIFY for the zone (DNSZone name) to each of its
	// targets and returns what each answered.
	NotifyZone(ctx context.Context, zone string) (NotifyOutcome, error)
}

// NotifyOutcome is what a NOTIFY round sent.
type NotifyOutcome struct {
	Serial int64
	Sent   []NotifySent
}

// NotifySent is one NOTIFY target and its answer.
type NotifySent struct {
	Target   string  `json:"target" doc:"the secondary's address:port"`
	Key      string  `json:"key,omitempty" doc:"TSIG key that signed the NOTIFY; absent when unsigned"`
	Rcode    string  `json:"rcode,omitempty" doc:"the secondary's answer, e.g. NOERROR, NOTAUTH/BADKEY; absent when none came"`
	Error    string  `json:"error,omitempty" doc:"why no valid answer came (timeout after the retries, TSIG failure, ...)"`
	Attempts int     `json:"attempts"`
	TookMS   float64 `json:"took_ms"`
}

// ClusterInfo describes the cluster as this node sees it.
type ClusterInfo struct {
	Driver    string  `json:"driver" doc:"store driver: sqlite or kube"`
	Epoch     int64   `json:"epoch" minimum:"0"`
	Nodes     int64   `json:"nodes"`
	ReadOnly  bool    `json:"readOnly"`
	Node      string  `json:"node"`
	TookMS    float64 `json:"took_ms"`
	ClusterID string  `json:"clusterID,omitempty"`
	Leader    string  `json:"leader,omitempty"`
}

func (c *ClusterInfo) setTook(ms float64) { c.TookMS = ms }

// NodeInfo is one node of the cluster.
type NodeInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Ready   *bool  `json:"ready,omitempty" doc:"absent when unknown"`
	Leader  bool   `json:"leader,omitempty"`
	Address string `json:"address,omitempty"`
	// SnapshotAgeSeconds is how old the node's view of the store is.
	SnapshotAgeSeconds *float64 `json:"snapshotAgeSeconds,omitempty" doc:"age of the node's view of the store; absent when unknown"`
	Serial             uint64   `json:"serial,omitempty" doc:"store revision of the data-plane snapshot the node serves (X-Service-Revision of its writes)"`
	Role               string   `json:"role,omitempty" doc:"all, operator or dataplane"`
	Error              string   `json:"error,omitempty" doc:"why a peer did not answer (ready is then absent), or on Kubernetes why the node is not ready (stopped, Lease expired, failing checks)"`
	// HeartbeatAgeSeconds is set on Kubernetes: the node's status is as of
	// its last Lease renewal.
	HeartbeatAgeSeconds *float64 `json:"heartbeatAgeSeconds,omitempty" doc:"Kubernetes: seconds since the node last renewed its Lease (its status is as of then); absent for the serving node and outside Kubernetes"`
}

// NotifyResult answers POST /zones/{zone}/notify.
type NotifyResult struct {
	Zone    string       `json:"zone"`
	Queued  bool         `json:"queued" doc:"true: NOTIFY was sent to the targets listed in sent; false: this node sends no NOTIFY"`
	Targets int          `json:"targets"`
	Serial  int64        `json:"serial,omitempty" doc:"the SOA serial announced"`
	Sent    []NotifySent `json:"sent,omitempty" doc:"each target and what it answered"`
	Message string       `json:"message,omitempty"`
	Node    string       `json:"node"`
	TookMS  float64      `json:"took_ms"`
}

func (n *NotifyResult) setTook(ms float64) { n.TookMS = ms }

type clusterOut struct{ Body *ClusterInfo }
type nodesOut struct{ Body *ListBody[NodeInfo] }
type notifyOut struct{ Body *NotifyResult }

func (s *Server) blockingReader() BlockingReader {
	if s.deps.Blocking != nil {
		return s.deps.Blocking
	}
	if b, ok := s.deps.DNS.(BlockingReader); ok && s.deps.DNS != nil {
		return b
	}
	return nil
}

func (s *Server) registerClusterRoutes() {
	register(s, huma.Operation{OperationID: "dns-blocking-state", Method: http.MethodGet, Path: "/dns/blocking", Summary: "Blocking toggle of this node", Tags: []string{"dns"}},
		clusterPerm("info.read"), func(ctx context.Context, _ *emptyIn) (*blockingOut, error) {
			br := s.blockingReader()
			if br == nil {
				return nil, errNotImplemented("blocking state")
			}
			st, err := br.BlockingState(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			if st.Node == "" {
				st.Node = s.opts.NodeName
			}
			if st.Scope == "" {
				st.Scope = "node"
			}
			return &blockingOut{Body: &st}, nil
		})
	register(s, huma.Operation{OperationID: "nodes", Method: http.MethodGet, Path: "/nodes", Summary: "Nodes of the cluster", Tags: []string{"info"},
		Description: "This node and, when the cluster driver knows them, its peers."},
		clusterPerm("info.read"), func(ctx context.Context, _ *emptyIn) (*nodesOut, error) {
			out := &ListBody[NodeInfo]{Items: []NodeInfo{}}
			if s.deps.Cluster != nil {
				ns, err := s.deps.Cluster.Nodes(ctx)
				if err != nil {
					return nil, fromError(err)
				}
				out.Items = append(out.Items, ns...)
			}
			if len(out.Items) == 0 {
				out.Items = append(out.Items, NodeInfo{Name: s.opts.NodeName, Version: version.Version})
			}
			return &nodesOut{Body: out}, nil
		})
	register(s, huma.Operation{OperationID: "doctor", Method: http.MethodGet, Path: "/doctor", Summary: "Checks of this node (DoctorReport)", Tags: []string{"info"},
		Description: "The serving node checks itself: its config file still loads (an edit that would stop the next start fails here), node.dataDir is writable, the listeners it bound, readiness (each failing readiness check), settings changed since start that apply at the next restart, and the diagnoses of /info/messages (errors fail, warnings warn). `svc doctor` shows these as node/<check>."},
		clusterPerm("settings.read"), func(ctx context.Context, _ *emptyIn) (*doctorOut, error) {
			start := time.Now()
			rep := &doctor.Report{Node: s.opts.NodeName, Version: version.Version}
			if s.deps.Doctor != nil {
				r, err := s.deps.Doctor.Doctor(ctx)
				if err != nil {
					return nil, fromError(err)
				}
				rep = r
			}
			if msgs, err := s.messages(ctx, nil); err != nil {
				rep.Add("diagnoses", doctor.Warn, "diagnoses not read: %v", err)
			} else {
				bad := 0
				for _, m := range msgs.Body.Items {
					switch m.Severity {
					case "error":
						rep.Add("diagnoses", doctor.Fail, "%s: %s", m.Reason, m.Message)
						bad++
					case "warning":
						rep.Add("diagnoses", doctor.Warn, "%s: %s", m.Reason, m.Message)
						bad++
					}
				}
				if bad == 0 {
					rep.Add("diagnoses", doctor.OK, "%d messages, none a warning or an error", len(msgs.Body.Items))
				}
			}
			rep.Finish(start)
			return &doctorOut{Body: rep}, nil
		})
	register(s, huma.Operation{OperationID: "cluster", Method: http.MethodGet, Path: "/cluster", Summary: "Cluster driver, epoch and leader", Tags: []string{"info"}},
		clusterPerm("info.read"), func(ctx context.Context, _ *emptyIn) (*clusterOut, error) {
			if s.deps.Cluster == nil {
				return nil, errNotImplemented("cluster information")
			}
			ci, err := s.deps.Cluster.ClusterInfo(ctx)
			if err != nil {
				return nil, fromError(err)
			}
			if ci.Node == "" {
				ci.Node = s.opts.NodeName
			}
			return &clusterOut{Body: &ci}, nil
		})
	register(s, huma.Operation{OperationID: "zone-notify", Method: http.MethodPost, Path: "/zones/{zone}/notify", Summary: "Send NOTIFY to the zone's secondaries", Tags: []string{"zones"},
		DefaultStatus: http.StatusAccepted, Errors: []int{http.StatusNotFound},
		Description: "Sends NOTIFY (RFC 1996) for the zone's served serial to its targets (settings notify.targets, notify.fromNS), waits for their answers (notify.timeout, notify.retries) and answers 202 with each target and its rcode. A zone without targets answers `targets: 0` and says how to add some. Audited."},
		zonePerm("dnszones.write", "zone"), func(ctx context.Context, in *ZoneParams) (*notifyOut, error) {
			if _, err := s.deps.Store.Get(ctx, store.KindDNSZone, "", in.Zone); err != nil {
				return nil, fromError(err)
			}
			res := &NotifyResult{Zone: in.Zone, Node: s.opts.NodeName}
			if s.deps.Notifier == nil {
				auditObject(ctx, "notify", store.KindDNSZone, "", in.Zone, "")
				res.Message = "NOTIFY to secondaries is not implemented in this release; secondaries pick up changes at their SOA refresh"
				return &notifyOut{Body: res}, nil
			}
			out, err := s.deps.Notifier.NotifyZone(ctx, in.Zone)
			auditObject(ctx, "notify", store.KindDNSZone, "", in.Zone, notifySummary(out, err))
			if err != nil {
				return nil, fromError(err)
			}
			res.Queued, res.Targets, res.Serial, res.Sent = true, len(out.Sent), out.Serial, out.Sent
			if len(out.Sent) == 0 {
				res.Message = "the zone has no NOTIFY targets: list its secondaries in the notify.targets setting (or set notify.fromNS)"
			}
			return &notifyOut{Body: res}, nil
		})
}

// notifySummary is the audit result of a NOTIFY round: the serial and what
// each target answered.
func notifySummary(o NotifyOutcome, err error) string {
	if err != nil {
		return "not sent: " + err.Error()
	}
	if len(o.Sent) == 0 {
		return "no targets"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "serial %d:", o.Serial)
	for _, t := range o.Sent {
		r := t.Rcode
		if r == "" {
			r = t.Error
		}
		fmt.Fprintf(&b, " %s %s;", t.Target, r)
	}
	return strings.TrimSuffix(b.String(), ";")
}
