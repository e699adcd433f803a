package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/blocklist"
)

// Reasons of excludeListRefs and globalLists problems (Degraded; the rest of
// the policy applies).
const (
	// ReasonNotGlobalList: excludeListRefs names a list that is not global
	// (spec.global false) or does not exist: there is nothing to opt out of.
	ReasonNotGlobalList = "NotGlobalList"
	// ReasonOptOutNotAllowed: the policy opts out of a global list of another
	// namespace, which only policies of blocking.globalPolicyNamespaces may do.
	ReasonOptOutNotAllowed = "OptOutNotAllowed"
)

// Why a list applies (or not) to a policy's clients (ListUse.Why).
const (
	WhyOwn      = "own"      // named in blockListRefs or allowListRefs
	WhyGlobal   = "global"   // a global list the policy does not opt out of
	WhyOptedOut = "optedOut" // a global list the policy opts out of: not applied
)

// IsGlobal reports whether a BlockList is global: spec.global omitted or
// true. A global list applies to every client whichever policy matches it,
// unless that policy opts out.
func IsGlobal(bl *v1alpha1.BlockList) bool {
	return bl != nil && (bl.Spec.Global == nil || *bl.Spec.Global)
}

// ListUse is one list of a policy's effective lists, and why it applies.
type ListUse struct {
	List string `json:"list"` // namespace/name
	// Role is block or allow (allow lists win over services and block lists).
	Role string `json:"role"`
	// Why is own (named by the policy), global or optedOut.
	Why string `json:"why"`
	// Applied is false for opted-out lists and for own references to lists
	// that do not exist.
	Applied bool `json:"applied"`
	// Note says more: how the policy opted out, why an opt-out is refused,
	// a missing list.
	Note string `json:"note,omitempty"`
}

// reaches reports whether the global list listKey reaches the clients of a
// policy of namespace policyNS. Lists of a namespace the tenancy trusts
// (blocking.globalPolicyNamespaces) reach every policy; another
// namespace's global list reaches only its own namespace's policies (and
// clients no policy matches, as before): one team cannot add blocks to
// another team's clients.
func (t *Tenancy) reaches(listKey, policyNS string) bool {
	ns, _, _ := strings.Cut(listKey, "/")
	return t.Global(ns) || ns == policyNS
}

// listsOf computes the effective lists of an admitted policy from the
// objects: its own allowListRefs and blockListRefs (first mention wins),
// then the global lists that reach it, ordered by name, applied unless the
// policy opts out where Tenancy.takesOut allows it. Missing own lists are
// listed (not applied) so the state names them; compile reports them.
func listsOf(t *Tenancy, p *v1alpha1.Policy, lists map[string]*List, globals []string) ([]ListUse, []Problem) {
	name := key(p.Namespace, p.Name)
	var out []ListUse
	var probs []Problem
	seen := map[string]bool{}
	own := func(refs []string, allowRole bool) {
		for _, r := range refs {
			k := ref(p.Namespace, r)
			if seen[k] {
				continue
			}
			seen[k] = true
			l, ok := lists[k]
			u := ListUse{List: k, Role: "block", Why: WhyOwn, Applied: ok}
			if allowRole || (ok && l.Object.Spec.Mode == string(blocklist.ModeAllow)) {
				u.Role = "allow"
			}
			if !ok {
				u.Note = "the list does not exist"
			}
			out = append(out, u)
		}
	}
	own(p.Spec.AllowListRefs, true)
	own(p.Spec.BlockListRefs, false)
	excluded := map[string]bool{}
	for _, r := range p.Spec.ExcludeListRefs {
		k := ref(p.Namespace, r)
		excluded[k] = true
		switch l, ok := lists[k]; {
		case !ok:
			probs = append(probs, Problem{"Policy", name, ReasonNotGlobalList, fmt.Sprintf(
				"excludeListRefs names %s, which does not exist; remove it or fix the name", k)})
		case !IsGlobal(l.Object):
			probs = append(probs, Problem{"Policy", name, ReasonNotGlobalList, fmt.Sprintf(
				"excludeListRefs names %s, which is not global (spec.global: false) and applies only to the policies that name it; remove it from excludeListRefs", k)})
		}
	}
	optOut := p.Spec.GlobalLists != nil && !*p.Spec.GlobalLists
	var refused []string
	for _, k := range globals {
		if seen[k] || !t.reaches(k, p.Namespace) {
			continue
		}
		u := ListUse{List: k, Role: "block", Why: WhyGlobal, Applied: true}
		if lists[k].Object.Spec.Mode == string(blocklist.ModeAllow) {
			u.Role = "allow"
		}
		if optOut || excluded[k] {
			how := "globalLists: false"
			if excluded[k] {
				how = "excludeListRefs"
			}
			if t.takesOut(p.Namespace, k) {
				u.Why, u.Applied, u.Note = WhyOptedOut, false, how
			} else {
				u.Note = how + " refused: a policy of namespace " + p.Namespace + " may not opt out of another namespace's global lists"
				refused = append(refused, k)
			}
		}
		out = append(out, u)
	}
	if len(refused) > 0 {
		probs = append(probs, Problem{"Policy", name, ReasonOptOutNotAllowed, fmt.Sprintf(
			"%s still apply: only policies of the namespaces in blocking.globalPolicyNamespaces (%s) may opt out of another namespace's global lists; ask its owner to set spec.global: false, or move the policy",
			strings.Join(refused, ", "), t.describe())})
	}
	return out, probs
}

// globalKeys returns the names of the global lists, sorted.
func globalKeys(lists map[string]*List) []string {
	var out []string
	for k, l := range lists {
		if IsGlobal(l.Object) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func listMap(in Input) map[string]*List {
	lists := map[string]*List{}
	for i := range in.Lists {
		l := &in.Lists[i]
		if l.Object != nil {
			lists[key(l.Object.Namespace, l.Object.Name)] = l
		}
	}
	return lists
}

// Scopes of a ListAudience.
const (
	// ScopeEveryone: every client, except the clients of Except.
	ScopeEveryone = "everyone"
	// ScopeNamespace: a global list of a namespace the tenancy does not
	// trust: clients no policy matches and the clients of the policies of
	// its namespace (except Except), plus Policies that name it.
	ScopeNamespace = "namespace"
	// ScopePolicies: only the clients of Policies (spec.global false).
	ScopePolicies = "policies"
)

// ListAudience says to whom one BlockList applies. Policies is every
// admitted policy whose clients get the list (own reference or global);
// Except are the policies that opt out of it. Schedules are not
// considered: a scheduled policy's clients get its lists while it is
// active, the lists of the next matching policy otherwise.
type ListAudience struct {
	List     string   `json:"list"`
	Global   bool     `json:"global"`
	Scope    string   `json:"scope"`
	Policies []string `json:"policies"`
	Named    []string `json:"named"` // policies that name the list
	Except   []string `json:"except"`
	// AppliesTo is the one-line text: "everyone", "everyone except
	// policies a, b", "policies kids", "no one: no policy names it".
	AppliesTo string `json:"appliesTo"`
}

// Audience says to whom each BlockList of in applies (key "namespace/name"),
// from the objects alone (rules need not be compiled): the apply result,
// describe, `lists` and the policy state use it. Policies the tenancy
// refuses count for nothing.
func Audience(in Input) map[string]ListAudience {
	lists := listMap(in)
	globals := globalKeys(lists)
	out := make(map[string]ListAudience, len(lists))
	for k, l := range lists {
		a := ListAudience{List: k, Global: IsGlobal(l.Object), Scope: ScopePolicies,
			Policies: []string{}, Named: []string{}, Except: []string{}}
		if a.Global {
			a.Scope = ScopeNamespace
			if in.Tenancy.Global(l.Object.Namespace) {
				a.Scope = ScopeEveryone
			}
		}
		out[k] = a
	}
	for i := range in.Policies {
		p := &in.Policies[i]
		if len(in.Tenancy.admit(p)) > 0 {
			continue
		}
		uses, _ := listsOf(in.Tenancy, p, lists, globals)
		pn := key(p.Namespace, p.Name)
		for _, u := range uses {
			a, ok := out[u.List]
			if !ok {
				continue // a missing own list
			}
			switch {
			case u.Why == WhyOptedOut:
				a.Except = append(a.Except, pn)
			case u.Why == WhyOwn:
				a.Named = append(a.Named, pn)
				a.Policies = append(a.Policies, pn)
			default:
				a.Policies = append(a.Policies, pn)
			}
			out[u.List] = a
		}
	}
	for k, a := range out {
		slices.Sort(a.Policies)
		slices.Sort(a.Named)
		slices.Sort(a.Except)
		a.AppliesTo = a.text(lists[k].Object.Namespace)
		out[k] = a
	}
	return out
}

func (a ListAudience) text(ns string) string {
	short := func(names []string) string {
		s := make([]string, len(names))
		for i, n := range names {
			s[i] = strings.TrimPrefix(n, ns+"/")
		}
		return strings.Join(s, ", ")
	}
	except := ""
	if len(a.Except) > 0 {
		except = " except policies " + short(a.Except)
	}
	switch a.Scope {
	case ScopeEveryone:
		return "everyone" + except
	case ScopeNamespace:
		s := "clients no policy matches and policies of namespace " + ns + except
		var outside []string
		for _, p := range a.Named {
			if !strings.HasPrefix(p, ns+"/") {
				outside = append(outside, p)
			}
		}
		if len(outside) > 0 {
			s += "; also policies " + short(outside)
		}
		return s
	}
	if len(a.Named) == 0 {
		return "no one: no policy names it (spec.global: false)"
	}
	return "policies " + short(a.Named)
}

// Note is the one-line note the apply result shows for an applied
// BlockList or Policy: to whom the list applies now, or which lists the
// policy's clients get. kind is BlockList or Policy; false when in holds
// no such object (or the policy is refused: its status says why).
func Note(in Input, kind, namespace, name string) (string, bool) {
	k := key(namespace, name)
	switch kind {
	case "BlockList":
		a, ok := Audience(in)[k]
		if !ok {
			return "", false
		}
		return "blocklist/" + name + " applies to " + a.AppliesTo, true
	case "Policy":
		lists := listMap(in)
		for i := range in.Policies {
			p := &in.Policies[i]
			if p.Namespace != namespace || p.Name != name {
				continue
			}
			if len(in.Tenancy.admit(p)) > 0 {
				return "", false
			}
			uses, _ := listsOf(in.Tenancy, p, lists, globalKeys(lists))
			return "policy/" + name + " " + usesText(uses, namespace), true
		}
	}
	return "", false
}

// usesText renders effective lists: "gets lists ads (own), ui-allow
// (global); opted out of ui-deny".
func usesText(uses []ListUse, ns string) string {
	var got, out []string
	for _, u := range uses {
		n := strings.TrimPrefix(u.List, ns+"/")
		switch {
		case u.Why == WhyOptedOut:
			out = append(out, n)
		case u.Applied:
			got = append(got, n+" ("+u.Why+")")
		}
	}
	s := "gets no lists"
	if len(got) > 0 {
		s = "gets lists " + strings.Join(got, ", ")
	}
	if len(out) > 0 {
		s += "; opted out of " + strings.Join(out, ", ")
	}
	return s
}

// UpgradeLocalLists returns the BlockLists (namespace/name, sorted) that
// the rule before spec.global treated as local: lists without spec.global
// that an admitted Policy names (in blockListRefs or allowListRefs) where
// Tenancy.takesOut let the reference take the list out of the implicit
// global policy. They applied only to the policies naming them; the
// one-time upgrade sets spec.global false on them so they still do.
func UpgradeLocalLists(in Input) []string {
	lists := listMap(in)
	named := map[string]bool{}
	for i := range in.Policies {
		p := &in.Policies[i]
		if len(in.Tenancy.admit(p)) > 0 {
			continue
		}
		for _, r := range append(append([]string(nil), p.Spec.BlockListRefs...), p.Spec.AllowListRefs...) {
			k := ref(p.Namespace, r)
			if l, ok := lists[k]; ok && l.Object.Spec.Global == nil && in.Tenancy.takesOut(p.Namespace, k) {
				named[k] = true
			}
		}
	}
	out := make([]string, 0, len(named))
	for k := range named {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
