package blockpage

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of the unblock form.
const (
	maxFormBody     = 16 << 10
	maxReasonRunes  = 1000
	maxRequesterLen = 200
)

// unblockForm is what the unblock form posts.
type unblockForm struct {
	Token     string
	Reason    string
	Requester string
}

// formError is a refusal of what the person typed; the page shows it and
// keeps the form.
type formError struct{ msg string }

func (e *formError) Error() string { return e.msg }

func formErrorf(format string, args ...any) error {
	return &formError{msg: fmt.Sprintf(format, args...)}
}

// parseUnblockForm decodes an application/x-www-form-urlencoded body
// (at most maxFormBody bytes) and checks its fields.
func parseUnblockForm(body []byte) (unblockForm, error) {
	if len(body) > maxFormBody {
		return unblockForm{}, formErrorf("the form is over %d KiB", maxFormBody>>10)
	}
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return unblockForm{}, formErrorf("the form could not be read: %v", err)
	}
	one := func(name string) (string, error) {
		v := vals[name]
		switch len(v) {
		case 0:
			return "", nil
		case 1:
			if !utf8.ValidString(v[0]) {
				return "", formErrorf("%s: not valid UTF-8 text", name)
			}
			return v[0], nil
		}
		return "", formErrorf("%s: given %d times", name, len(v))
	}
	var f unblockForm
	if f.Token, err = one("token"); err != nil {
		return f, err
	}
	if f.Reason, err = one("reason"); err != nil {
		return f, err
	}
	if f.Requester, err = one("requester"); err != nil {
		return f, err
	}
	f.Reason = strings.TrimSpace(strings.ReplaceAll(f.Reason, "\r\n", "\n"))
	f.Requester = strings.TrimSpace(f.Requester)
	switch n := utf8.RuneCountInString(f.Reason); {
	case n == 0:
		return f, formErrorf("reason: please say why this site should be unblocked")
	case n > maxReasonRunes:
		return f, formErrorf("reason: %d characters, at most %d", n, maxReasonRunes)
	}
	if n := utf8.RuneCountInString(f.Requester); n > maxRequesterLen {
		return f, formErrorf("name or e-mail: %d characters, at most %d", n, maxRequesterLen)
	}
	if err := plainText(f.Reason, true); err != nil {
		return f, formErrorf("reason: %v", err)
	}
	if err := plainText(f.Requester, false); err != nil {
		return f, formErrorf("name or e-mail: %v", err)
	}
	return f, nil
}

// plainText refuses control characters (other than line breaks and tabs
// in multi-line text): they would reach administrators' terminals.
func plainText(s string, multiline bool) error {
	for _, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		if unicode.IsControl(r) || r == utf8.RuneError || unicode.Is(unicode.Cf, r) && r != '\u200d' {
			return errors.New("control or invisible formatting characters are not allowed")
		}
	}
	return nil
}
