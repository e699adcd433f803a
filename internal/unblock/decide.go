package unblock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

// Scopes and matches of an approval.
const (
	ScopeEveryone    = "everyone"
	ScopeGroups      = "groups"
	MatchExact       = "exact"
	MatchSubdomains  = "subdomains"
	OriginUnblock    = "unblock"
	EveryoneList     = "unblocked" // the namespace's global allow list of approvals for everyone
	groupListPrefix  = "unblocked-"
	SourceName       = "unblock" // the source of an allow list that holds approvals
	MaxSourceEntries = 10000
	MaxGroups        = 100
)

// Approval is an administrator's decision to unblock.
type Approval struct {
	// Scope is everyone (default) or groups.
	Scope string
	// Groups are ClientGroups ("namespace/name", or a name in the request's
	// namespace); required with scope groups.
	Groups []string
	// Match is exact (default: the name only) or subdomains (the name and
	// every name below it).
	Match string
	// Duration limits the unblock; 0 with Permanent false means permanent too.
	Duration time.Duration
	// Permanent excludes Duration.
	Permanent bool
	// Comment is the administrator's note (at most 1000 characters).
	Comment string
	// By is the approving principal (createdBy of the entries).
	By string
}

// Plan is what an approval writes: entries into the allow list List of the
// request's namespace (global for everyone, otherwise referenced only by
// the policies in Attach), until ExpiresAt (nil: permanent).
type Plan struct {
	List      string
	Global    bool
	Entries   []v1alpha1.BlockListEntry
	Attach    []string // names of policies of the namespace whose allowListRefs must name List
	Groups    []string // the approved groups, "namespace/name", sorted
	ExpiresAt *time.Time
	// Terms are the approval as recorded in the request's spec.
	Scope, Match string
	Duration     string
	Permanent    bool
}

// normalize fills defaults and checks an approval.
func (a *Approval) normalize() error {
	if a.Scope == "" {
		a.Scope = ScopeEveryone
	}
	if a.Match == "" {
		a.Match = MatchExact
	}
	switch a.Scope {
	case ScopeEveryone:
		if len(a.Groups) > 0 {
			return invalidHint("use scope groups to name groups, or drop groups", "groups: only allowed with scope groups")
		}
	case ScopeGroups:
		if len(a.Groups) == 0 {
			return invalidHint("name at least one ClientGroup, e.g. groups: [kids]", "groups: scope groups needs at least one group")
		}
		if len(a.Groups) > MaxGroups {
			return invalid("groups: %d groups; at most %d", len(a.Groups), MaxGroups)
		}
	default:
		return invalid("scope %q: expected everyone or groups", clip(a.Scope, 50))
	}
	if a.Match != MatchExact && a.Match != MatchSubdomains {
		return invalid("match %q: expected exact or subdomains", clip(a.Match, 50))
	}
	if a.Duration < 0 {
		return invalid("duration %s: must be positive", a.Duration)
	}
	if a.Permanent && a.Duration > 0 {
		return invalid("duration and permanent exclude each other: send one")
	}
	if a.Duration > 0 && a.Duration < time.Second {
		return invalid("duration %s: at least 1s", a.Duration)
	}
	c, err := cleanText("comment", a.Comment, 1000)
	if err != nil {
		return err
	}
	a.Comment = c
	return nil
}

// groupRef writes a group reference as "namespace/name".
func groupRef(ns, r string) string {
	if strings.Contains(r, "/") {
		return r
	}
	return ns + "/" + r
}

// GroupListName is the allow list of approvals for a set of groups
// ("namespace/name", sorted): "unblocked-kids" for one group of the
// namespace, a hash when the names are long or from other namespaces.
func GroupListName(ns string, groups []string) string {
	var parts []string
	for _, g := range groups {
		gns, name, _ := strings.Cut(g, "/")
		if gns != ns {
			parts = nil
			break
		}
		parts = append(parts, name)
	}
	if j := strings.Join(parts, "-"); len(parts) > 0 && len(j) <= 60 {
		return groupListPrefix + j
	}
	h := sha256.Sum256([]byte(strings.Join(groups, ",")))
	return groupListPrefix + hex.EncodeToString(h[:6])
}

// PlanApproval maps a decision to what is written: pure, table-tested.
// policies are the Policies of the request's namespace.
//
// Everyone: entries in the namespace's global allow list "unblocked",
// which reaches every policy of the namespace (and, in a namespace of
// blocking.globalPolicyNamespaces, every client); the deciding policy is
// attached explicitly when it opts out of global lists.
//
// Groups: entries in a non-global allow list per group set, attached to
// the policies of the namespace whose client groups are all among the
// approved ones: a list reaches clients only through the policy that
// matches them, so a policy that also serves another group is never
// given it (that group stays blocked). No such policy: refused, naming
// the policies that serve those groups.
func PlanApproval(req *v1alpha1.UnblockRequest, a Approval, policies []v1alpha1.Policy, now time.Time) (Plan, error) {
	if err := a.normalize(); err != nil {
		return Plan{}, err
	}
	ns := req.Namespace
	p := Plan{Scope: a.Scope, Match: a.Match, Permanent: a.Duration == 0}
	if a.Duration > 0 {
		p.Duration = a.Duration.String()
		t := now.Add(a.Duration).UTC().Truncate(time.Second)
		p.ExpiresAt = &t
	}
	switch a.Scope {
	case ScopeEveryone:
		p.List, p.Global = EveryoneList, true
		if pns, pname, ok := strings.Cut(req.Spec.Policy, "/"); ok && pns == ns {
			for i := range policies {
				pol := &policies[i]
				if pol.Name == pname && optsOut(pol, EveryoneList) {
					p.Attach = append(p.Attach, pol.Name)
				}
			}
		}
	case ScopeGroups:
		set := map[string]bool{}
		for _, g := range a.Groups {
			g = strings.TrimSpace(g)
			if g == "" {
				return Plan{}, invalid("groups: an empty group name")
			}
			set[groupRef(ns, g)] = true
		}
		for g := range set {
			p.Groups = append(p.Groups, g)
		}
		slices.Sort(p.Groups)
		p.List = GroupListName(ns, p.Groups)
		var serving []string
		for i := range policies {
			pol := &policies[i]
			if len(pol.Spec.ClientGroupRefs) == 0 {
				continue
			}
			all, some := true, false
			for _, r := range pol.Spec.ClientGroupRefs {
				if set[groupRef(pol.Namespace, r)] {
					some = true
				} else {
					all = false
				}
			}
			switch {
			case all:
				p.Attach = append(p.Attach, pol.Name)
			case some:
				serving = append(serving, fmt.Sprintf("%s (groups %s)", pol.Name, strings.Join(pol.Spec.ClientGroupRefs, ", ")))
			}
		}
		slices.Sort(p.Attach)
		if len(p.Attach) == 0 {
			msg := fmt.Sprintf("no policy of namespace %s serves only the groups %s, so an allow entry cannot reach them without reaching other groups too",
				ns, strings.Join(p.Groups, ", "))
			hint := "create a Policy whose clientGroupRefs are these groups, or approve for everyone"
			if len(serving) > 0 {
				msg += "; policies serving them with other groups: " + strings.Join(serving, "; ")
				hint = "approve for all the groups of one of those policies, create a Policy for these groups alone, or approve for everyone"
			}
			return Plan{}, invalidHint(hint, "%s", msg)
		}
	}
	p.Entries = Entries(req, a, now)
	return p, nil
}

// Entries are the allow entries of an approval: the exact name, and with
// subdomains also "*.name" (a wildcard entry matches only names below).
func Entries(req *v1alpha1.UnblockRequest, a Approval, now time.Time) []v1alpha1.BlockListEntry {
	ref := req.Namespace + "/" + req.Name
	comment := "unblock request " + ref
	if a.Comment != "" {
		comment += ": " + a.Comment
	}
	t := metav1.NewTime(now.UTC().Truncate(time.Second))
	base := v1alpha1.BlockListEntry{Origin: OriginUnblock, Request: clip(ref, 300), CreatedBy: clip(a.By, 300),
		Comment: clipRunes(comment, 500), Created: &t, Modified: &t}
	exact := base
	exact.Value = req.Spec.Domain
	out := []v1alpha1.BlockListEntry{exact}
	if a.Match == MatchSubdomains {
		wild := base
		wild.Value, wild.Type = "*."+req.Spec.Domain, "wildcard"
		out = append(out, wild)
	}
	return out
}

// optsOut reports whether a policy does not get the global list name of
// its namespace.
func optsOut(p *v1alpha1.Policy, name string) bool {
	if p.Spec.GlobalLists != nil && !*p.Spec.GlobalLists {
		return true
	}
	for _, r := range p.Spec.ExcludeListRefs {
		if groupRef(p.Namespace, r) == p.Namespace+"/"+name {
			return true
		}
	}
	return false
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
