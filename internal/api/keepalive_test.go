package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestOversizeBodyNeverCorruptsNextRequest sends, on one kept-alive
// connection, a request whose body a route refuses after reading only part
// of it (huma's body limit closes the body early), then a second request.
// The bytes left unread must never be parsed as the next request: either
// the server closes the connection after its answer, or the next answer is
// the real one. Before the fix the server kept the connection open and
// answered the leftover body with a plain-text 431.
func TestOversizeBodyNeverCorruptsNextRequest(t *testing.T) {
	e := newEnv(t)
	tok := e.adminToken()
	u, err := url.Parse(e.base)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, path string
		size               int
	}{
		// Default huma limit (1 MiB): closed early with megabytes unread.
		{"huma limit", http.MethodPost, "/auth/tokens", 4 << 20},
		// The server-wide cap.
		{"bulk cap", http.MethodPost, "/apply", maxBulkBody + 10},
		// Refused before the body is read at all.
		{"no route", http.MethodPost, "/no/such/route", 2 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			head := fmt.Sprintf("%s %s%s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
				tc.method, u.Path, tc.path, u.Host, tok, tc.size)
			// Write the body in the background as a client would: the server
			// may answer before it has all been sent.
			go func() {
				if _, err := conn.Write([]byte(head)); err != nil {
					return
				}
				_, _ = conn.Write(bytes.Repeat([]byte("a"), tc.size))
			}()
			br := bufio.NewReader(conn)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("first answer: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			checkErrorBody(t, res, body)
			t.Logf("%s %s: %d, Connection: close %v", tc.method, tc.path, res.StatusCode, res.Close)
			if res.Close {
				// The server said it closes the connection: nothing more to read.
				if n, err := br.Read(make([]byte, 1)); n > 0 {
					t.Fatalf("bytes after an answer with Connection: close (err %v)", err)
				}
				return
			}
			// Kept alive: the next request must get its own answer.
			_, _ = fmt.Fprintf(conn, "GET %s/version HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", u.Path, u.Host, tok)
			res2, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("first answer %d kept the connection open, second answer: %v", res.StatusCode, err)
			}
			body2, _ := io.ReadAll(res2.Body)
			res2.Body.Close()
			if res2.StatusCode != http.StatusOK {
				t.Fatalf("first answer %d kept the connection open; second answer %d %q", res.StatusCode, res2.StatusCode, body2)
			}
		})
	}
}

func checkErrorBody(t *testing.T, res *http.Response, body []byte) {
	t.Helper()
	if res.StatusCode < 400 {
		t.Fatalf("oversize body accepted: %d", res.StatusCode)
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/") {
		t.Errorf("error answer %d with content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	var m struct {
		Error *struct {
			Key, Message string
		} `json:"error"`
		TookMS *float64 `json:"took_ms"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Error == nil || m.Error.Key == "" || m.TookMS == nil {
		t.Fatalf("answer %d is not the error body: %q (%v)", res.StatusCode, body, err)
	}
}
