package api

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// PolicyStates reports the state of compiled policies on this node (the
// node adapts dataplane/policy Table.State of the current table).
type PolicyStates interface {
	// PolicyState returns the state of policy "namespace/name"; false when
	// the node's table does not hold it (invalid, or not reconciled yet).
	PolicyState(ctx context.Context, namespace, name string) (PolicyState, bool, error)
}

// ListAudiences says to whom BlockLists apply, from the stored objects (the
// node adapts dataplane/policy Audience and Note). The PolicyStates of a
// node implement it; the audience route answers not_implemented without.
type ListAudiences interface {
	// ListAudiences returns the audience of every BlockList of namespace
	// ns (every namespace when empty), ordered by namespace/name.
	ListAudiences(ctx context.Context, ns string) ([]ListAudience, error)
	// AudienceNote is the one-line note of a BlockList ("blocklist/ui-allow
	// applies to everyone") or Policy ("policy/kids gets lists ads (own),
	// ui-allow (global)") as if obj replaced the stored object of its name;
	// false when there is none (another kind, a refused policy).
	AudienceNote(ctx context.Context, obj *unstructured.Unstructured) (string, bool, error)
}

// ListAudience says to whom one BlockList applies now.
type ListAudience struct {
	List   string `json:"list" doc:"namespace/name"`
	Global bool   `json:"global" doc:"spec.global (omitted means true)"`
	Scope  string `json:"scope" enum:"everyone,namespace,policies" doc:"everyone: every client except the clients of except; namespace: a global list of a namespace outside blocking.globalPolicyNamespaces, for clients no policy matches and the policies of its namespace; policies: only the policies that name it"`
	// Policies whose clients get the list (own reference or global).
	Policies  []string `json:"policies" doc:"policies whose clients get the list (they name it, or it is global and reaches them)"`
	Named     []string `json:"named" doc:"policies that name the list in blockListRefs or allowListRefs"`
	Except    []string `json:"except" doc:"policies that opt out of the global list (excludeListRefs, globalLists false)"`
	AppliesTo string   `json:"appliesTo" doc:"one line: everyone, everyone except policies a, b, policies kids, ..."`
}

// PolicyListUse is one of a policy's effective lists.
type PolicyListUse struct {
	List    string `json:"list" doc:"namespace/name"`
	Role    string `json:"role" enum:"block,allow"`
	Why     string `json:"why" enum:"own,global,optedOut" doc:"own: named by the policy; global: a global list the policy gets; optedOut: a global list the policy opts out of (not applied)"`
	Applied bool   `json:"applied"`
	Note    string `json:"note,omitempty" doc:"how the policy opted out, a refused opt-out, a missing list"`
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
	Groups     []string        `json:"groups"`
	ShadowedBy []PolicyShadow  `json:"shadowedBy" doc:"active higher-priority policies that win, with the groups they take"`
	Problems   []string        `json:"problems,omitempty"`
	Lists      []PolicyListUse `json:"lists" doc:"effective lists: own references, the global lists the policy's clients get and those it opts out of, with why"`
	At         time.Time       `json:"at"`
	Node       string          `json:"node"`
	TookMS     float64         `json:"took_ms"`
}

func (p *PolicyState) setTook(ms float64) { p.TookMS = ms }

type policyStateIn struct {
	Namespace string `path:"ns" maxLength:"253"`
	Name      string `path:"name" maxLength:"253"`
}

type policyStateOut struct{ Body *PolicyState }

type audienceIn struct {
	Namespace string `query:"namespace" maxLength:"253" doc:"only lists of this namespace (default: every namespace)"`
}

type audienceOut struct{ Body *ListBody[ListAudience] }

// audienceNotes is the apply result's note for a BlockList or Policy
// about to be written (obj, as if stored): to whom the list applies, or
// which lists the policy's clients get, e.g. "blocklist/ui-allow applies to
// everyone". Nil for other kinds, or when the node cannot say (no
// ListAudiences, a refused policy, a store error).
func (s *Server) audienceNotes(ctx context.Context, obj *unstructured.Unstructured) []string {
	la, ok := s.deps.Policies.(ListAudiences)
	if !ok || (obj.GetKind() != kindPolicy && obj.GetKind() != kindBlockList) {
		return nil
	}
	note, ok, err := la.AudienceNote(ctx, obj)
	if err != nil || !ok {
		return nil
	}
	return []string{note}
}

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
			if st.Lists == nil {
				st.Lists = []PolicyListUse{}
			}
			return &policyStateOut{Body: &st}, nil
		})
	register(s, huma.Operation{OperationID: "blocklist-audience", Method: http.MethodGet, Path: "/blocklists/audience", Summary: "To whom each BlockList applies now (global lists, the policies that name or opt out of them)", Tags: []string{"blocklists"}},
		clusterPerm("policies.read"), func(ctx context.Context, in *audienceIn) (*audienceOut, error) {
			la, ok := s.deps.Policies.(ListAudiences)
			if !ok {
				return nil, errNotImplemented("blocklist audience")
			}
			items, err := la.ListAudiences(ctx, in.Namespace)
			if err != nil {
				return nil, fromError(err)
			}
			if items == nil {
				items = []ListAudience{}
			}
			return &audienceOut{Body: &ListBody[ListAudience]{Items: items}}, nil
		})
}
