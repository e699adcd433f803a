package unblock

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/validation"
)

// FuzzSubmissionAdmitted: whatever domain, reason and contact Submit's
// checks accept makes an UnblockRequest the store admits (the CRD schema
// in process), so a form that passed never ends in a 500 at the write.
func FuzzSubmissionAdmitted(f *testing.F) {
	v, err := validation.New()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][3]string{
		{"ads.example.com", "school", "kid@example.org"}, {"Ads.Example.COM.", "a\x00b\nc", ""},
		{"_dmarc.x.org", "ü ☃ 𝄞", "Jöhn Doe"}, {"a-b.c_d.e", "\t", "\u200b"}, {"x", "", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, domain, reason, contact string) {
		d, err := NormalizeDomain(domain)
		if err != nil {
			return
		}
		r, err := cleanText("reason", reason, MaxReason)
		if err != nil {
			return
		}
		c, err := cleanText("name or e-mail", contact, MaxRequester)
		if err != nil {
			return
		}
		req := &v1alpha1.UnblockRequest{
			ObjectMeta: metav1.ObjectMeta{Name: requestName(d), Namespace: "default"},
			Spec: v1alpha1.UnblockRequestSpec{Domain: d, Reason: r,
				Requester: &v1alpha1.Requester{IP: "192.0.2.1", Contact: c}},
		}
		u, err := toUnstructured(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Admit(context.Background(), u, nil); err != nil {
			t.Fatalf("accepted by Submit's checks (domain %q, reason %q, contact %q) but refused by the schema: %v", d, r, c, err)
		}
	})
}
