package blockpage

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// FuzzBlockPageForm feeds arbitrary form bodies and tokens to the form
// reader and the token check: nothing panics, what is accepted keeps the
// bounds and the plain-text rule, and no token but the one issued passes.
func FuzzBlockPageForm(f *testing.F) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	// A key of this process: fuzz workers are other processes, so a token
	// in the corpus never verifies there, and any that does is forged.
	key, err := loadTokenKey("")
	if err != nil {
		f.Fatal(err)
	}
	tk := newTokens(key)
	client := netip.MustParseAddr("192.0.2.7")
	issued := tk.issue("ads.example", "ads.example", client, now)
	f.Add(url.Values{"token": {issued}, "reason": {"for work"}, "requester": {"kim@example.org"}}.Encode(), issued)
	f.Add("token=a.b&reason=%00&requester=x", "a.b")
	f.Add("reason=%E2%80%AEevil&reason=twice", "")
	f.Add("token="+strings.Repeat("A", 200), issued[:len(issued)-1]+"A")
	f.Add("%zz=1", "..")
	f.Fuzz(func(t *testing.T, body, tok string) {
		form, err := parseUnblockForm([]byte(body))
		if err == nil {
			if n := utf8.RuneCountInString(form.Reason); n == 0 || n > maxReasonRunes {
				t.Fatalf("accepted reason of %d runes", n)
			}
			if utf8.RuneCountInString(form.Requester) > maxRequesterLen {
				t.Fatalf("accepted requester of %d runes", utf8.RuneCountInString(form.Requester))
			}
			for _, s := range []string{form.Reason, form.Requester, form.Token} {
				if !utf8.ValidString(s) {
					t.Fatalf("accepted invalid UTF-8 %q", s)
				}
			}
			for _, r := range form.Reason + form.Requester {
				if unicode.IsControl(r) && r != '\n' && r != '\t' {
					t.Fatalf("accepted control character %U", r)
				}
			}
			if strings.ContainsRune(form.Requester, '\n') {
				t.Fatal("accepted a line break in the requester")
			}
		}
		for _, candidate := range []string{tok, form.Token} {
			if _, err := tk.check(candidate, "ads.example", "ads.example", client, now); err == nil && candidate != issued {
				t.Fatalf("forged token %q accepted", candidate)
			}
		}
	})
}
