package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// fakeKeyring is an in-memory keyring; err, when set, fails every call.
type fakeKeyring struct {
	m   map[string]string
	err error
}

func (k *fakeKeyring) Get(service, user string) (string, error) {
	if k.err != nil {
		return "", k.err
	}
	v, ok := k.m[service+"/"+user]
	if !ok {
		return "", errKeyringNotFound
	}
	return v, nil
}

func (k *fakeKeyring) Set(service, user, secret string) error {
	if k.err != nil {
		return k.err
	}
	k.m[service+"/"+user] = secret
	return nil
}

func (k *fakeKeyring) Delete(service, user string) error {
	if k.err != nil {
		return k.err
	}
	if _, ok := k.m[service+"/"+user]; !ok {
		return errKeyringNotFound
	}
	delete(k.m, service+"/"+user)
	return nil
}

func testApp(mode string, kr Keyring) (*app, *bytes.Buffer) {
	var stderr bytes.Buffer
	env := func(k string) string {
		if k == "SERVICE_KEYRING" {
			return mode
		}
		return ""
	}
	return &app{env: env, stderr: &stderr, keyring: kr}, &stderr
}

func TestTokenStoreKeyring(t *testing.T) {
	kr := &fakeKeyring{m: map[string]string{}}
	a, stderr := testApp("", kr)
	ts := a.tokens(nil)
	c := &Context{Name: "lab", Token: "old-file-token"}
	if err := ts.set(c, "tok1"); err != nil {
		t.Fatal(err)
	}
	if c.Token != "" || kr.m[keyringService+"/lab"] != "tok1" || ts.backend() != "the OS keyring" {
		t.Fatalf("set: file %q keyring %v backend %s", c.Token, kr.m, ts.backend())
	}
	if tok, err := ts.get(c); err != nil || tok != "tok1" {
		t.Fatalf("get: %q %v", tok, err)
	}
	if err := ts.del(c); err != nil || len(kr.m) != 0 {
		t.Fatalf("del: %v %v", err, kr.m)
	}
	if tok, err := ts.get(c); err != nil || tok != "" {
		t.Fatalf("get after del: %q %v", tok, err)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %s", stderr)
	}
}

func TestTokenStoreFileMode(t *testing.T) {
	kr := &fakeKeyring{m: map[string]string{}}
	a, stderr := testApp("file", kr)
	ts := a.tokens(nil)
	c := &Context{Name: "lab"}
	if err := ts.set(c, "tok1"); err != nil {
		t.Fatal(err)
	}
	if c.Token != "tok1" || len(kr.m) != 0 || ts.backend() != "the config file" {
		t.Fatalf("SERVICE_KEYRING=file: file %q keyring %v", c.Token, kr.m)
	}
	if err := ts.del(c); err != nil || c.Token != "" {
		t.Fatalf("del: %v %q", err, c.Token)
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr: %s", stderr)
	}
}

func TestTokenStoreFallback(t *testing.T) {
	kr := &fakeKeyring{m: map[string]string{}, err: errors.New("no secret service")}
	a, stderr := testApp("", kr)
	c1, c2 := &Context{Name: "one"}, &Context{Name: "two"}
	for _, c := range []*Context{c1, c2} {
		ts := a.tokens(nil)
		if err := ts.set(c, "tok-"+c.Name); err != nil {
			t.Fatal(err)
		}
		if c.Token != "tok-"+c.Name || ts.backend() != "the config file" {
			t.Fatalf("fallback: %q %s", c.Token, ts.backend())
		}
	}
	if tok, _ := a.tokens(nil).get(&Context{Name: "three"}); tok != "" {
		t.Errorf("get without a keyring: %q", tok)
	}
	if n := strings.Count(stderr.String(), "OS keyring unavailable"); n != 1 {
		t.Errorf("warned %d times: %s", n, stderr)
	}
	if !strings.Contains(stderr.String(), "no secret service") || !strings.Contains(stderr.String(), "0600") {
		t.Errorf("warning: %s", stderr)
	}
}
