package unblock

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

func pol(name string, groups []string, mod ...func(*v1alpha1.Policy)) v1alpha1.Policy {
	p := v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}}
	p.Spec.ClientGroupRefs = groups
	for _, m := range mod {
		m(&p)
	}
	return p
}

// TestPlanApproval: the decision-to-entry mapping, table-driven.
func TestPlanApproval(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	req := &v1alpha1.UnblockRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "ads.example.com-1"},
		Spec: v1alpha1.UnblockRequestSpec{Domain: "ads.example.com", Policy: "team/kids"}}
	off := false
	policies := []v1alpha1.Policy{
		pol("kids", []string{"kids"}),
		pol("family", []string{"kids", "parents"}),
		pol("guests", []string{"team/guests"}),
		pol("all", nil),
		pol("teens", []string{"teens", "kids"}),
	}
	optOut := []v1alpha1.Policy{pol("kids", []string{"kids"}, func(p *v1alpha1.Policy) { p.Spec.GlobalLists = &off })}
	exclude := []v1alpha1.Policy{pol("kids", []string{"kids"}, func(p *v1alpha1.Policy) { p.Spec.ExcludeListRefs = []string{"team/unblocked"} })}
	in1h := now.Add(time.Hour)

	cases := []struct {
		name     string
		a        Approval
		policies []v1alpha1.Policy
		list     string
		global   bool
		values   []string // value/type of each entry
		attach   []string
		expires  *time.Time
		err      string
	}{
		{name: "everyone exact permanent", a: Approval{By: "alice"}, policies: policies,
			list: "unblocked", global: true, values: []string{"ads.example.com/"}},
		{name: "everyone subdomains", a: Approval{Match: "subdomains", By: "alice"}, policies: policies,
			list: "unblocked", global: true, values: []string{"ads.example.com/", "*.ads.example.com/wildcard"}},
		{name: "everyone timed", a: Approval{Duration: time.Hour}, policies: policies,
			list: "unblocked", global: true, values: []string{"ads.example.com/"}, expires: &in1h},
		{name: "everyone, deciding policy opts out of global lists", a: Approval{}, policies: optOut,
			list: "unblocked", global: true, values: []string{"ads.example.com/"}, attach: []string{"kids"}},
		{name: "everyone, deciding policy excludes the list", a: Approval{}, policies: exclude,
			list: "unblocked", global: true, values: []string{"ads.example.com/"}, attach: []string{"kids"}},
		{name: "one group: only the policy serving that group alone", a: Approval{Scope: "groups", Groups: []string{"kids"}}, policies: policies,
			list: "unblocked-kids", values: []string{"ads.example.com/"}, attach: []string{"kids"}},
		{name: "two groups: policies within them", a: Approval{Scope: "groups", Groups: []string{"kids", "team/parents"}}, policies: policies,
			list: "unblocked-kids-parents", values: []string{"ads.example.com/"}, attach: []string{"family", "kids"}},
		{name: "group of a policy with other groups only: refused naming it", a: Approval{Scope: "groups", Groups: []string{"teens"}}, policies: policies,
			err: "teens (groups teens, kids)"},
		{name: "group no policy serves", a: Approval{Scope: "groups", Groups: []string{"nobody"}}, policies: policies,
			err: "no policy of namespace team serves only the groups team/nobody"},
		{name: "other namespace group: hashed list name", a: Approval{Scope: "groups", Groups: []string{"other/kids", "kids"}}, policies: policies,
			list: "unblocked-", values: []string{"ads.example.com/"}, attach: []string{"kids"}},
		{name: "groups without scope", a: Approval{Groups: []string{"kids"}}, err: "only allowed with scope groups"},
		{name: "scope groups without groups", a: Approval{Scope: "groups"}, err: "at least one group"},
		{name: "bad scope", a: Approval{Scope: "me"}, err: `scope "me"`},
		{name: "bad match", a: Approval{Match: "regex"}, err: `match "regex"`},
		{name: "duration and permanent", a: Approval{Duration: time.Hour, Permanent: true}, err: "exclude each other"},
		{name: "negative duration", a: Approval{Duration: -time.Hour}, err: "must be positive"},
		{name: "long comment", a: Approval{Comment: strings.Repeat("x", 1001)}, err: "comment: 1001 characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := PlanApproval(req, c.a, c.policies, now)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(p.List, c.list) || (c.list != "unblocked-" && p.List != c.list) {
				t.Errorf("list = %q, want %q", p.List, c.list)
			}
			if p.Global != c.global {
				t.Errorf("global = %v, want %v", p.Global, c.global)
			}
			var got []string
			for _, e := range p.Entries {
				got = append(got, e.Value+"/"+e.Type)
				if e.Origin != "unblock" || e.Request != "team/ads.example.com-1" || e.CreatedBy != c.a.By {
					t.Errorf("entry %+v: want origin unblock, request team/ads.example.com-1, createdBy %q", e, c.a.By)
				}
			}
			if !reflect.DeepEqual(got, c.values) {
				t.Errorf("entries = %v, want %v", got, c.values)
			}
			if !reflect.DeepEqual(p.Attach, c.attach) {
				t.Errorf("attach = %v, want %v", p.Attach, c.attach)
			}
			if (p.ExpiresAt == nil) != (c.expires == nil) || (p.ExpiresAt != nil && !p.ExpiresAt.Equal(*c.expires)) {
				t.Errorf("expiresAt = %v, want %v", p.ExpiresAt, c.expires)
			}
			if p.Permanent != (c.expires == nil) {
				t.Errorf("permanent = %v with expiresAt %v", p.Permanent, p.ExpiresAt)
			}
		})
	}
}

func TestNormalizeDomain(t *testing.T) {
	for in, want := range map[string]string{"Ads.Example.COM.": "ads.example.com", "_dmarc.x.org": "_dmarc.x.org", " a.b ": "a.b"} {
		if got, err := NormalizeDomain(in); err != nil || got != want {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "a..b", "-a.b", "a b", "*.a.b", "<script>.x", strings.Repeat("a", 64) + ".b", strings.Repeat("a.", 130) + "b"} {
		if _, err := NormalizeDomain(bad); err == nil {
			t.Errorf("NormalizeDomain(%q) accepted", bad)
		}
	}
}

func TestLimiterWindowAndRetryAfter(t *testing.T) {
	l := newLimiter()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 5 {
		if w := l.take("k", 5, t0.Add(time.Duration(i)*time.Minute)); w != 0 {
			t.Fatalf("submission %d limited", i+1)
		}
	}
	if w := l.take("k", 5, t0.Add(10*time.Minute)); w != 50*time.Minute {
		t.Fatalf("6th: retry after %v, want 50m", w)
	}
	if w := l.take("other", 5, t0.Add(10*time.Minute)); w != 0 {
		t.Fatal("another key is limited")
	}
	if w := l.take("k", 5, t0.Add(61*time.Minute)); w != 0 {
		t.Fatalf("after the first left the window: retry %v", w)
	}
}
