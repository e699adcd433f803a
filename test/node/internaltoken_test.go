package node_test

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/test/nodetest"
)

// TestInternalTokenOnTheAPI: a node with an internal listener accepts its
// internal token on the REST API as the Node principal (viewer and auditor,
// issue #23 item 2): reads are answered, writes are 403 naming the
// permission, and a token derived from another key is 401.
func TestInternalTokenOnTheAPI(t *testing.T) {
	key := strings.Repeat("ab", 32)
	n := nodetest.Start(t, nodetest.APITLSOff(), nodetest.Env("SERVICE_ENCRYPTION_KEY="+key))
	raw, _ := hex.DecodeString(key)
	creds, err := internalapi.LoadCredentials(internalapi.Files{}, raw)
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, token string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+n.Addrs.API+"/api/v1"+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		return res.StatusCode, m
	}
	code, me := call("GET", "/auth/me", creds.Token)
	if code != 200 || me["principal"].(map[string]any)["kind"] != "Node" {
		t.Fatalf("me with the internal token: %d %v", code, me)
	}
	if code, body := call("GET", "/objects/dnszones", creds.Token); code != 200 {
		t.Fatalf("read with the internal token: %d %v", code, body)
	}
	code, body := call("POST", "/cache/flush", creds.Token)
	if e, _ := body["error"].(map[string]any); code != 403 || e["missing"] != "cache.flush" {
		t.Fatalf("write with the internal token: %d %v", code, body)
	}
	other, err := internalapi.LoadCredentials(internalapi.Files{}, []byte(strings.Repeat("x", 32)))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := call("GET", "/objects/dnszones", other.Token); code != 401 {
		t.Fatalf("another cluster's internal token: %d %v", code, body)
	}
}
