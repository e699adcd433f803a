package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// PolicyStates reports the state of compiled policies on this node (the
// node adapts dataplane/policy Table.State of the current table).
type PolicyStates interface {
	// PolicyState returns the state of policy "namespace/name"; false when
	// the node's table does not hold it (invalid, or not reconciled yet).
	PolicyState(ctx context.Context, namespace, name string) (PolicyState, bool, error)
}

// PolicyShadow says that a higher-priority policy wins for some groups of
// the policy ("*" stands for every client).
type PolicyShadow struct {
	Policy   string   `json:"policy"`
	Priority int32    `json:"priority"`
	Groups   []string `json:"groups"`
}

// PolicyState is the state of one policy on this node.
type PolicyState struct {
	Policy   string `json:"policy" doc:"namespace/name"`
	Priority int32  `json:"priority"`
	// Loaded is false when the node has not compiled the policy.
	Loaded    bool `json:"loaded" doc:"false: the node has not compiled the policy (invalid, or not reconciled yet)"`
	Active    bool `json:"active" doc:"the schedule, if any, is open now"`
	Scheduled bool `json:"scheduled"`
	Effective bool `json:"effective" doc:"active and not shadowed for every group"`
	// Groups are the client groups ("*": every client).
	Groups     []string       `json:"groups"`
	ShadowedBy []PolicyShadow `json:"shadowedBy" doc:"active higher-priority policies that win, with the groups they take"`
	Problems   []string       `json:"problems,omitempty"`
	At         time.Time      `json:"at"`
	Node       string         `json:"node"`
	TookMS     float64        `json:"took_ms"`
}

func (p *PolicyState) setTook(ms float64) { p.TookMS = ms }

type policyStateIn struct {
	Namespace string `path:"ns" maxLength:"253"`
	Name      string `path:"name" maxLength:"253"`
}

type policyStateOut struct{ Body *PolicyState }

func (s *Server) registerPolicyRoutes() {
	register(s, huma.Operation{OperationID: "policy-state", Method: http.MethodGet, Path: "/policies/{ns}/{name}/state", Summary: "State of one policy on this node (active now, shadowing)", Tags: []string{"policies"},
		Errors: []int{http.StatusNotFound}},
		clusterPerm("policies.read"), func(ctx context.Context, in *policyStateIn) (*policyStateOut, error) {
			if s.deps.Policies == nil {
				return nil, errNotImplemented("policy state")
			}
			if _, err := s.deps.Store.Get(ctx, kindPolicy, in.Namespace, in.Name); err != nil {
				return nil, fromError(err)
			}
			st, ok, err := s.deps.Policies.PolicyState(ctx, in.Namespace, in.Name)
			if err != nil {
				return nil, fromError(err)
			}
			if !ok {
				st = PolicyState{Policy: in.Namespace + "/" + in.Name, At: s.clock().UTC(),
					Problems: []string{"NotLoaded: the policy is not compiled on this node (see its Ready condition)"}}
			}
			st.Loaded = ok
			st.Node = s.opts.NodeName
			if st.Groups == nil {
				st.Groups = []string{}
			}
			if st.ShadowedBy == nil {
				st.ShadowedBy = []PolicyShadow{}
			}
			return &policyStateOut{Body: &st}, nil
		})
}
