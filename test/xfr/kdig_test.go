package xfr_test

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/nodetest"
)

// TestAXFRWithTSIGAsKdigSees: kdig transfers the zone over TCP and DoT with
// the key; a wrong secret (BADSIG), an unknown key (BADKEY), no key and UDP
// are refused, each as RFC 8945 and RFC 5936 say.
func TestAXFRWithTSIGAsKdigSees(t *testing.T) {
	p := startPrimary(t, "")
	host, port := hostPort(p.DNSAddr("tcp"))
	dotHost, dotPort := hostPort(p.Addrs.DNS[indexOf(p.Addrs.DNS, "dot/")][len("dot/"):])
	key := "hmac-sha256:" + keyName + ":" + goodSecret

	out := kdig(t, "@"+host, "-p", port, "-y", key, "AXFR", "example.test.")
	if !strings.Contains(out, "www.example.test.") || !strings.Contains(out, "ns.sub.example.test.") || !strings.Contains(out, "*.wild.example.test.") {
		t.Fatalf("AXFR over TCP is missing records:\n%s", out)
	}
	if strings.Count(out, "\tSOA\t") != 2 {
		t.Fatalf("AXFR must start and end with the SOA:\n%s", out)
	}
	if !strings.Contains(out, "TSIG") && !regexp.MustCompile(`(?i)tsig`).MatchString(out) {
		t.Logf("kdig does not print the TSIG records; it verified them (it fails otherwise)")
	}
	t.Logf("AXFR over TCP:\n%s", out)

	out = kdig(t, "@"+dotHost, "-p", dotPort, "+tls", "-y", key, "AXFR", "example.test.")
	if strings.Count(out, "\tSOA\t") != 2 || !strings.Contains(out, "mail.example.test.") {
		t.Fatalf("AXFR over DoT:\n%s", out)
	}

	wrong := "hmac-sha256:" + keyName + ":" + badSecret
	out = kdig(t, "@"+host, "-p", port, "-y", wrong, "AXFR", "example.test.")
	if !strings.Contains(out, "BADSIG") && !strings.Contains(out, "NOTAUTH") {
		t.Fatalf("wrong secret: want NOTAUTH/BADSIG:\n%s", out)
	}
	if !p.Log.Contains("BADSIG") {
		t.Fatalf("the node did not log the BADSIG refusal")
	}
	out = kdig(t, "@"+host, "-p", port, "-y", "hmac-sha256:other-key:"+goodSecret, "AXFR", "example.test.")
	if !strings.Contains(out, "BADKEY") && !strings.Contains(out, "NOTAUTH") {
		t.Fatalf("unknown key: want NOTAUTH/BADKEY:\n%s", out)
	}
	out = kdig(t, "@"+host, "-p", port, "AXFR", "example.test.")
	if !strings.Contains(out, "REFUSED") {
		t.Fatalf("unsigned AXFR: want REFUSED:\n%s", out)
	}
	out = kdig(t, "@"+host, "-p", port, "+notcp", "-y", key, "AXFR", "example.test.")
	if !strings.Contains(out, "REFUSED") && !strings.Contains(out, "failed") {
		t.Fatalf("AXFR over UDP: want REFUSED:\n%s", out)
	}
}

// TestIXFRAsKdigSees: after a record change kdig asks for IXFR from the old
// serial over TCP and DoT and gets the difference (old SOA, deletions, new
// SOA, additions), not the zone.
func TestIXFRAsKdigSees(t *testing.T) {
	p := startPrimary(t, "")
	host, port := hostPort(p.DNSAddr("tcp"))
	dotHost, dotPort := hostPort(p.Addrs.DNS[indexOf(p.Addrs.DNS, "dot/")][len("dot/"):])
	key := "hmac-sha256:" + keyName + ":" + goodSecret
	old := p.soaSerial(t)
	p.setZone(t, zoneYAML("two", `{dnsName: new.example.test, recordType: A, targets: [192.0.2.77]}`))
	nodetest.Eventually(t, 10*time.Second, "new serial served", func() bool { return p.soaSerial(t) != old })
	cur := p.soaSerial(t)
	for _, args := range [][]string{{"@" + host, "-p", port}, {"@" + dotHost, "-p", dotPort, "+tls"}} {
		out := kdig(t, append(args, "-y", key, fmt.Sprintf("IXFR=%d", old), "example.test.")...)
		t.Logf("kdig %v IXFR=%d:\n%s", args, old, out)
		if !strings.Contains(out, "new.example.test.") || !strings.Contains(out, `"note two"`) || !strings.Contains(out, `"note one"`) {
			t.Fatalf("IXFR from %d lacks the change:\n%s", old, out)
		}
		if strings.Contains(out, "www.example.test.") {
			t.Fatalf("IXFR from %d sent unchanged records (the whole zone?):\n%s", old, out)
		}
		if !strings.Contains(out, fmt.Sprintf(" %d ", old)) || !strings.Contains(out, fmt.Sprintf(" %d ", cur)) {
			t.Fatalf("IXFR lacks the SOAs of %d and %d:\n%s", old, cur, out)
		}
	}
	out := kdig(t, "@"+host, "-p", port, "-y", key, fmt.Sprintf("IXFR=%d", cur), "example.test.")
	if strings.Count(out, "\tSOA\t") != 1 {
		t.Fatalf("IXFR from the current serial: want the SOA alone:\n%s", out)
	}
}

func indexOf(l []string, prefix string) int {
	for i, s := range l {
		if strings.HasPrefix(s, prefix) {
			return i
		}
	}
	return -1
}

// TestNotifyTSIGAsDigSees: dig sends a signed NOTIFY (+opcode=notify -y):
// the right key is answered NOERROR and signed (dig verifies it), a wrong
// secret NOTAUTH with the TSIG error BADSIG, which dig reports, and the
// node logs the refusal with the client and the error.
func TestNotifyTSIGAsDigSees(t *testing.T) {
	p := startPrimary(t, "")
	host, port := hostPort(p.DNSAddr("udp"))
	dig := func(secret string) string {
		t.Helper()
		out, err := exec.Command("dig", "@"+host, "-p", port, "+opcode=notify", "+norec", "+tries=1", "+time=2",
			"-y", "hmac-sha256:"+keyName+":"+secret, "example.test.", "SOA").CombinedOutput()
		if err != nil && len(out) == 0 {
			t.Fatalf("dig: %v", err)
		}
		return string(out)
	}
	out := dig(goodSecret)
	if !strings.Contains(out, "opcode: NOTIFY, status: NOERROR") || !strings.Contains(out, "flags: qr aa") || strings.Contains(out, "tsig verify failure") {
		t.Fatalf("signed NOTIFY with the right key:\n%s", out)
	}
	out = dig(badSecret)
	if !strings.Contains(out, "status: NOTAUTH") || !strings.Contains(out, "BADSIG") {
		t.Fatalf("signed NOTIFY with a wrong secret, want NOTAUTH and BADSIG:\n%s", out)
	}
	nodetest.Eventually(t, 5*time.Second, "the refusal logged", func() bool {
		return p.Log.Contains(`NOTIFY refused: TSIG check failed`) && p.Log.Contains("error=BADSIG")
	})
}
