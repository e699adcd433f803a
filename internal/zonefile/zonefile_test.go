package zonefile

import (
	"bytes"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	text := []byte("$ORIGIN example.com.\n@ 300 IN A 192.0.2.1\nwww 60 IN AAAA 2001:db8::1\n@ 300 IN SOA ns hostmaster 1 2 3 4 5\n")
	eps, err := Import("example.com", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 2 || eps[0].DNSName != "example.com" || eps[1].RecordType != "AAAA" {
		t.Fatalf("%+v", eps)
	}
	out := Export("example.com", 300, eps)
	again, err := Import("example.com", out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Export("example.com", 300, again), out) {
		t.Fatalf("round trip differs:\n%s", out)
	}
}

func FuzzImport(f *testing.F) {
	f.Add([]byte("@ IN A 192.0.2.1\n"))
	f.Add([]byte("$INCLUDE /etc/passwd\n"))
	f.Add([]byte("www IN TXT \"a\" \"b\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		eps, err := Import("example.com", b)
		if err != nil {
			return
		}
		// Whatever parsed exports without panicking and re-imports.
		if _, err := Import("example.com", Export("example.com", 300, eps)); err != nil {
			t.Fatalf("export of an import does not parse: %v", err)
		}
	})
}
