package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/dataplane/safesearch"
)

// A schedule that does not parse (a misspelt time zone, as an admin typed it)
// makes the policy never active: before, it became "always active" and the
// bedtime policy blocked around the clock.
func TestInvalidScheduleIsNeverActive(t *testing.T) {
	for _, sched := range []v1alpha1.Schedule{
		{Start: "21:00", End: "07:00", TZ: "Europe/Berln"},
		{Start: "9pm", End: "07:00"},
		{Start: "21:00", End: "07:00", Weekdays: []v1alpha1.Weekday{"monday"}},
	} {
		now := time.Date(2025, 6, 2, 22, 0, 0, 0, time.UTC)
		cat, err := catalogue.Builtin(context.Background(), 6)
		if err != nil {
			t.Fatal(err)
		}
		in := Input{
			Lists: []List{list(t, "games", "", "", "||games.example^")},
			Policies: []v1alpha1.Policy{pol("bedtime", 5, func(s *v1alpha1.PolicySpec) {
				s.BlockListRefs = []string{"games"}
				s.Schedule = &sched
			}), pol("always", 1, nil)},
			Catalogue: cat, SafeSearch: safesearch.New(), Now: func() time.Time { return now },
		}
		tab, problems := Compile(context.Background(), in)
		found := false
		for _, p := range problems {
			if p.Reason == "InvalidSchedule" && strings.Contains(p.Msg, "never active") {
				found = true
			}
		}
		if !found {
			t.Errorf("%+v: problems %v lack InvalidSchedule saying the policy is never active", sched, problems)
		}
		for _, at := range []time.Time{now, now.Add(6 * time.Hour), now.Add(14 * time.Hour)} {
			now = at
			d := tab.Decide(wireName(t, "games.example"), dns.TypeA, dataplane.ClientInfo{})
			if d.Policy != "default/always" {
				t.Errorf("%+v at %s: policy %s decided, want default/always (bedtime is never active)", sched, at, d.Policy)
			}
		}
	}
}
