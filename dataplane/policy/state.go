package policy

import (
	"sort"
	"time"
)

// Shadow says that a higher-priority policy wins for some of this policy's
// client groups ("*" stands for every client).
type Shadow struct {
	Policy   string   `json:"policy"`
	Priority int32    `json:"priority"`
	Groups   []string `json:"groups"`
}

// State is the state of one policy (GET /policies/{ns}/{name}/state).
type State struct {
	Policy   string `json:"policy"`
	Priority int32  `json:"priority"`
	// Active: the schedule (if any) is open now.
	Active    bool `json:"active"`
	Scheduled bool `json:"scheduled"`
	// Effective: active and not shadowed for every group.
	Effective  bool     `json:"effective"`
	Groups     []string `json:"groups"`
	ShadowedBy []Shadow `json:"shadowedBy"`
	Problems   []string `json:"problems,omitempty"`
	// Lists are the policy's effective lists: its own, the global lists it
	// gets, and the global lists it opts out of (not applied), with why.
	Lists []ListUse `json:"lists"`
	At    time.Time `json:"at"`
}

// State reports whether the policy called name ("namespace/name") is active
// now and which active higher-priority policies win for which of its groups.
func (t *Table) State(name string) (State, bool) {
	p, ok := t.byName[name]
	if !ok {
		return State{}, false
	}
	now := t.now()
	st := State{Policy: p.name, Priority: p.priority, Scheduled: p.schedule != nil, At: now,
		Active: p.schedule == nil || p.schedule.active(now), ShadowedBy: []Shadow{},
		Lists: append([]ListUse{}, p.uses...)}
	if p.refused {
		// not compiled: it applies to nobody; Problems say why
		st.Active, st.Groups = false, []string{}
		st.Problems = t.problemsOf(name)
		return st, true
	}
	groups := p.groups
	if p.all {
		groups = []string{"*"}
	}
	st.Groups = append([]string{}, groups...)
	shadowed := map[string]bool{}
	for _, o := range t.policies {
		if o == p {
			break // policies are sorted: the rest rank below
		}
		if o.schedule != nil && !o.schedule.active(now) {
			continue
		}
		var hit []string
		for _, g := range groups {
			if shadowed[g] {
				continue
			}
			_, in := o.groupSet[g]
			if o.all || in {
				hit = append(hit, g)
				shadowed[g] = true
			}
		}
		if len(hit) > 0 {
			st.ShadowedBy = append(st.ShadowedBy, Shadow{Policy: o.name, Priority: o.priority, Groups: hit})
		}
	}
	st.Effective = st.Active && len(shadowed) < len(groups)
	st.Problems = t.problemsOf(name)
	return st, true
}

func (t *Table) problemsOf(name string) []string {
	var out []string
	for _, pr := range t.problems {
		if pr.Kind == "Policy" && pr.Name == name {
			out = append(out, pr.Reason+": "+pr.Msg)
		}
	}
	sort.Strings(out)
	return out
}
