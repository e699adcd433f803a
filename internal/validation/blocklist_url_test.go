package validation

import (
	"context"
	"strings"
	"testing"
)

// A source URL the list fetcher would refuse is refused when the BlockList
// is written (issue 20 item 9): before, file:// was admitted and failed only
// at the first fetch. The message names the field, the value and the fix,
// and never echoes a password.
func TestAdmitRefusesListURLsTheFetcherRefuses(t *testing.T) {
	v := newValidator(t)
	b := bases(t)
	refused := []struct {
		url  string
		want []string
	}{
		{"file:///etc/hosts", []string{`spec.sources[0].url: Invalid value: "file:///etc/hosts"`, "scheme must be http or https", "scheme file", "inline or configMapRef"}},
		{"ftp://lists.example/hosts", []string{`spec.sources[0].url`, "scheme ftp", "use http:// or https://"}},
		{"lists.example/hosts", []string{`spec.sources[0].url`, "scheme none"}},
		{"https:///hosts", []string{`spec.sources[0].url`, "no host"}},
		{"https://user:s3cret@lists.example/%zz", []string{`spec.sources[0].url`, "not a URL"}},
	}
	for _, c := range refused {
		t.Run(c.url, func(t *testing.T) {
			err := v.Admit(context.Background(), build(b["BlockList"], []edit{set("spec.sources[0].url", c.url)}), nil)
			if err == nil {
				t.Fatal("admitted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("message shows the password: %v", err)
			}
		})
	}
	// What the fetcher accepts is admitted: credentials (private list
	// servers), and loopback, which only the nodes' allowLocalListURLs decides.
	for _, ok := range []string{"https://lists.example/hosts", "http://user:pw@10.0.0.5:8080/l.txt", "http://127.0.0.1:8080/l.txt"} {
		if err := v.Admit(context.Background(), build(b["BlockList"], []edit{set("spec.sources[0].url", ok)}), nil); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
}
