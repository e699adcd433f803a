package kubenode_test

import (
	"bytes"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/internal/node"
)

// apiJSON sends one JSON request under /api/v1 with the bearer token.
func apiJSON(t *testing.T, tn *testNode, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest(method, "https://"+tn.Addrs.API+"/api/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// TestUsersAndInternalTokenOnKube: with the kube store (users and tokens
// in Secrets) an administrator creates a user, the user's token works, a
// disable stops it at once on another node too, enable restores it, delete
// removes user and token; the internal token (derived from the shared key)
// reads as the Node principal and cannot write (issue #23 items 1, 2).
func TestUsersAndInternalTokenOnKube(t *testing.T) {
	needEnv(t)
	boot, _, _ := auth.NewToken()
	a := startNode(t, "users-a", node.RoleAll, kubeconfig(t, env.Config, ""), "SERVICE_BOOTSTRAP_TOKEN="+boot)
	b := startNode(t, "users-b", node.RoleDataplane, kubeconfig(t, env.Config, ""))

	code, m := apiJSON(t, a, boot, "POST", "/iam/users", map[string]any{"name": "kim", "password": "kim-password-1", "mustChangePassword": false, "groups": []string{"kube-ops"}})
	if code != 201 {
		t.Fatalf("create: %d %v", code, m)
	}
	// kim gets a token through a login on node a.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	login, _ := json.Marshal(map[string]string{"username": "kim", "password": "kim-password-1"})
	res, err := hc.Post("https://"+a.Addrs.API+"/api/v1/auth/login", "application/json", bytes.NewReader(login))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("login: %d", res.StatusCode)
	}
	var cookie *http.Cookie
	for _, c := range res.Cookies() {
		cookie = c
	}
	var me map[string]any
	req, _ := http.NewRequest("GET", "https://"+a.Addrs.API+"/api/v1/auth/me", nil)
	req.AddCookie(cookie)
	res, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(res.Body).Decode(&me)
	res.Body.Close()
	req, _ = http.NewRequest("POST", "https://"+a.Addrs.API+"/api/v1/auth/tokens", bytes.NewReader([]byte(`{}`)))
	req.AddCookie(cookie)
	req.Header.Set("X-Service-CSRF", me["csrf"].(string))
	req.Header.Set("Content-Type", "application/json")
	res, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created map[string]any
	_ = json.NewDecoder(res.Body).Decode(&created)
	res.Body.Close()
	kimTok, _ := created["token"].(string)
	if res.StatusCode != 201 || kimTok == "" {
		t.Fatalf("kim's token: %d %v", res.StatusCode, created)
	}
	for _, n := range []*testNode{a, b} {
		if code, m := apiJSON(t, n, kimTok, "GET", "/auth/me", nil); code != 200 {
			t.Fatalf("kim's token on %s: %d %v", n.Name, code, m)
		}
	}
	if code, m := apiJSON(t, a, boot, "POST", "/iam/users/kim/disable", nil); code != 200 || m["disabled"] != true {
		t.Fatalf("disable: %d %v", code, m)
	}
	for _, n := range []*testNode{a, b} {
		if code, _ := apiJSON(t, n, kimTok, "GET", "/auth/me", nil); code != 401 {
			t.Errorf("disabled user's token on %s: %d", n.Name, code)
		}
	}
	if code, _ := apiJSON(t, a, boot, "POST", "/iam/users/kim/enable", nil); code != 200 {
		t.Fatalf("enable: %d", code)
	}
	if code, _ := apiJSON(t, b, kimTok, "GET", "/auth/me", nil); code != 200 {
		t.Errorf("enabled user's token on %s: %d", b.Name, code)
	}
	if code, m := apiJSON(t, a, boot, "DELETE", "/iam/users/admin", nil); code != 409 {
		t.Errorf("delete the last administrator: %d %v", code, m)
	}
	if code, m := apiJSON(t, a, boot, "DELETE", "/iam/users/kim", nil); code != 204 {
		t.Fatalf("delete: %d %v", code, m)
	}
	if code, _ := apiJSON(t, b, kimTok, "GET", "/auth/me", nil); code != 401 {
		t.Errorf("deleted user's token: %d", code)
	}
	if code, _ := apiJSON(t, a, boot, "GET", "/iam/users/kim", nil); code != 404 {
		t.Errorf("deleted user: %d", code)
	}

	// The internal token every node derives from the shared key.
	key, _ := hex.DecodeString(encryptionKey)
	creds, err := internalapi.LoadCredentials(internalapi.Files{}, key)
	if err != nil {
		t.Fatal(err)
	}
	code, m = apiJSON(t, b, creds.Token, "GET", "/auth/me", nil)
	if code != 200 || m["principal"].(map[string]any)["kind"] != "Node" {
		t.Fatalf("internal token on the data-plane node: %d %v", code, m)
	}
	if code, _ := apiJSON(t, a, creds.Token, "GET", "/objects/dnszones", nil); code != 200 {
		t.Errorf("internal token read: %d", code)
	}
	if code, m := apiJSON(t, a, creds.Token, "POST", "/iam/users", map[string]any{"name": "x"}); code != 403 || m["error"].(map[string]any)["missing"] != "users.write" {
		t.Errorf("internal token write: %d %v", code, m)
	}
}
