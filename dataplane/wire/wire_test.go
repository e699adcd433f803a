package wire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestParseQuestionAndEDNS(t *testing.T) {
	m := new(dns.Msg)
	m.SetQuestion("WwW.Example.COM.", dns.TypeAAAA)
	m.SetEdns0(4096, true)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseHeader(b)
	if err != nil || h.QD != 1 || h.AR != 1 || h.Flags&FlagRD == 0 {
		t.Fatalf("header %+v %v", h, err)
	}
	var lower [MaxNameLen]byte
	q, err := ParseQuestion(b, HeaderLen, &lower)
	if err != nil {
		t.Fatal(err)
	}
	if string(q.Lower) != "\x03www\x07example\x03com\x00" || string(q.Name) != "\x03WwW\x07Example\x03COM\x00" || q.Type != dns.TypeAAAA || q.Class != dns.ClassINET {
		t.Fatalf("question %+v", q)
	}
	e, end, err := ParseRecords(b, q.End, h.AN, h.NS, h.AR)
	if err != nil || end != len(b) || !e.Present || e.UDPSize != 4096 || !e.DO || e.HasOptions || e.Version != 0 {
		t.Fatalf("edns %+v end %d err %v", e, end, err)
	}
	if got := string(AppendPresentation(nil, q.Lower)); got != "www.example.com." {
		t.Fatal(got)
	}
}

func TestParseErrors(t *testing.T) {
	var lower [MaxNameLen]byte
	cases := map[string][]byte{
		"short":   {0, 1},
		"pointer": {0xC0, 12, 0, 1, 0, 1},
		"label":   {0x40, 'a', 0, 0, 1, 0, 1},
		"cut":     {3, 'w', 'w'},
	}
	for name, b := range cases {
		if _, err := ParseQuestion(b, 0, &lower); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	long := make([]byte, 0, 300)
	for range 5 {
		long = append(long, 63)
		long = append(long, make([]byte, 63)...)
	}
	long = append(long, 0, 0, 1, 0, 1)
	if _, err := ParseQuestion(long, 0, &lower); err != ErrNameTooLong {
		t.Errorf("long name: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	m.SetEdns0(1232, false)
	b, _ := m.Pack()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var lower [MaxNameLen]byte
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		q, err := ParseQuestion(b, HeaderLen, &lower)
		if err != nil {
			return
		}
		if len(q.Lower) != len(q.Name) || !EqualFoldName(q.Lower, q.Name) {
			t.Fatalf("lower %x name %x", q.Lower, q.Name)
		}
		_ = AppendPresentation(nil, q.Lower)
		_, _, _ = ParseRecords(b, q.End, h.AN, h.NS, h.AR)
		_, _, _ = TTLOffsets(b, q.End, int(h.AN), nil)
	})
}

// logDomain is the query log's form of a name: its presentation without the
// final dot (dnslog's converter).
func logDomain(name []byte) string {
	b := AppendPresentation(nil, name)
	if len(b) > 1 && b[len(b)-1] == '.' {
		b = b[:len(b)-1]
	}
	return string(b)
}

func TestIsPresentation(t *testing.T) {
	wireName := func(labels ...string) []byte {
		var b []byte
		for _, l := range labels {
			b = append(append(b, byte(len(l))), l...)
		}
		return append(b, 0)
	}
	for _, tc := range []struct {
		name []byte
		s    string
		want bool
	}{
		{wireName("ads", "example", "com"), "ads.example.com", true},
		{wireName("ads", "example", "com"), "ads.example.com.", false},
		{wireName("ads", "example", "com"), "example.com", false},
		{wireName("ads", "example", "com"), "ads.example.co", false},
		{wireName("ads", "example", "com"), "ads.example.comm", false},
		{wireName("ads", "example", "com"), "adsxexample.com", false},
		{wireName("a-b_c", "x9"), "a-b_c.x9", true},
		{wireName("a.b", "com"), `a\.b.com`, false}, // needs an escape: no hint
		{wireName("a b", "com"), `a\032b.com`, false},
		{wireName(), "", false},
		{wireName(), ".", false},
		{[]byte{3, 'a', 'b'}, "ab", false}, // truncated label
	} {
		if got := IsPresentation(tc.name, tc.s); got != tc.want {
			t.Errorf("IsPresentation(%q, %q) = %v, want %v", tc.name, tc.s, got, tc.want)
		}
		if tc.want && logDomain(tc.name) != tc.s {
			t.Errorf("test case %q: the log's form is %q", tc.s, logDomain(tc.name))
		}
	}
}

// FuzzIsPresentation: a true answer always means the log's form.
func FuzzIsPresentation(f *testing.F) {
	f.Add([]byte("\x03ads\x07example\x03com\x00"), "ads.example.com")
	f.Add([]byte("\x03a.b\x03com\x00"), `a\.b.com`)
	f.Fuzz(func(t *testing.T, name []byte, s string) {
		if IsPresentation(name, s) && logDomain(name) != s {
			t.Fatalf("IsPresentation(%q, %q) but the log's form is %q", name, s, logDomain(name))
		}
		if n := logDomain(name); !strings.ContainsAny(n, `\`) && len(name) > 1 && validWire(name) && !IsPresentation(name, n) {
			t.Fatalf("IsPresentation(%q, %q) = false for a name without escapes", name, n)
		}
	})
}

// validWire: labels up to a root label that ends name, nothing after.
func validWire(name []byte) bool {
	off := 0
	for off < len(name) {
		l := int(name[off])
		if l == 0 {
			return off == len(name)-1 && off > 0
		}
		if l > 63 {
			return false
		}
		off += 1 + l
	}
	return false
}

// appendPresentationBytewise is AppendPresentation as it was written first,
// byte by byte: the reference for FuzzAppendPresentation.
func appendPresentationBytewise(dst, name []byte) []byte {
	if len(name) <= 1 {
		return append(dst, '.')
	}
	for off := 0; off < len(name) && name[off] != 0; {
		l := int(name[off])
		off++
		if off+l > len(name) {
			break
		}
		for _, c := range name[off : off+l] {
			switch {
			case c == '.' || c == '\\' || c == '"' || c == '(' || c == ')' || c == ';' || c == '@' || c == '$':
				dst = append(dst, '\\', c)
			case c < '!' || c > '~':
				dst = append(dst, '\\', '0'+c/100, '0'+(c/10)%10, '0'+c%10)
			default:
				dst = append(dst, c)
			}
		}
		dst = append(dst, '.')
		off += l
	}
	return dst
}

// FuzzAppendPresentation: the label-at-a-time form is the byte-by-byte
// one for any input, escapes and truncated labels included, and so is
// Dotted's fused loop (hack/fuzz-ci.sh runs this target).
func FuzzAppendPresentation(f *testing.F) {
	f.Add([]byte("\x03www\x07example\x03com\x00"))
	f.Add([]byte("\x05a.b\\c\x04 \x7f\"@\x00"))
	f.Add([]byte("\x03ab"))
	f.Add([]byte{0})
	f.Add([]byte("\x03WwW\x01.\x00"))
	f.Add([]byte(strings.Repeat("\x3f"+strings.Repeat("a", 63), 5) + "\x00"))
	f.Fuzz(func(t *testing.T, name []byte) {
		got, want := AppendPresentation([]byte("x"), name), appendPresentationBytewise([]byte("x"), name)
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendPresentation(%q) = %q, want %q", name, got, want)
		}
		// A plain Dotted name is the presentation, lower-cased, without
		// its final dot (how lists store rules and the log writes domains).
		var buf, ref [256]byte
		d, plain := Dotted(&buf, name)
		if rd, rplain := dottedBytewise(&ref, name); !bytes.Equal(d, rd) || plain != rplain {
			t.Fatalf("Dotted(%q) = %q %v, reference %q %v", name, d, plain, rd, rplain)
		}
		if plain && len(d) > 0 {
			if p := AppendPresentation(nil, name); string(d)+"." != strings.ToLower(string(p)) {
				t.Fatalf("Dotted(%q) = %q plain, presentation %q", name, d, p)
			}
		}
	})
}

// dottedBytewise is Dotted as first written (a check loop, then a copy,
// per label): the reference for FuzzAppendPresentation and BenchmarkDotted.
func dottedBytewise(buf *[256]byte, name []byte) (dotted []byte, plain bool) {
	n, plain := 0, true
	for off := 0; off < len(name); {
		l := int(name[off])
		if l == 0 {
			break
		}
		if off+1+l > len(name) || n+l+1 > len(buf) {
			plain = false
			break
		}
		if n > 0 {
			buf[n] = '.'
			n++
		}
		for _, c := range name[off+1 : off+1+l] {
			if presentationEscape[c] != 0 || c >= 'A' && c <= 'Z' {
				plain = false
			}
		}
		n += copy(buf[n:], name[off+1:off+1+l])
		off += l + 1
	}
	return buf[:n], plain
}

// BenchmarkDotted: the block decision's name conversion against the
// reference in the same run.
func BenchmarkDotted(b *testing.B) {
	names := [][]byte{[]byte("\x0eclients4-fonts\x06google\x03com\x00"), []byte("\x05h1234\x05bench\x00"),
		[]byte("\x07ads1234\x0aadvertiser\x07example\x03net\x00")}
	var buf [256]byte
	for _, c := range []struct {
		label string
		f     func(*[256]byte, []byte) ([]byte, bool)
	}{{"fused", Dotted}, {"bytewise", dottedBytewise}} {
		b.Run(c.label, func(b *testing.B) {
			for i := range b.N {
				c.f(&buf, names[i%len(names)])
			}
		})
	}
}

func TestDotted(t *testing.T) {
	for _, c := range []struct {
		name, dotted string
		plain        bool
	}{
		{"\x03www\x07example\x03com\x00", "www.example.com", true},
		{"\x03a_b\x01-\x00", "a_b.-", true},
		{"\x03WWW\x03com\x00", "WWW.com", false}, // upper case
		{"\x03a.b\x03com\x00", "a.b.com", false}, // a dot in a label
		{"\x03a b\x03com\x00", "a b.com", false}, // needs an escape
		{"\x03www\x07exa", "www", false},         // cut short
		{"\x00", "", true},                       // the root
		{strings.Repeat("\x3f"+strings.Repeat("a", 63), 5) + "\x00", strings.TrimSuffix(strings.Repeat(strings.Repeat("a", 63)+".", 4), "."), false}, // past 256 bytes
	} {
		name := []byte(c.name)
		var buf [256]byte
		d, plain := Dotted(&buf, name)
		if string(d) != c.dotted || plain != c.plain {
			t.Errorf("Dotted(%q) = %q %v, want %q %v", name, d, plain, c.dotted, c.plain)
		}
	}
}

func TestAppendPresentationEveryByte(t *testing.T) {
	for c := range 256 {
		name := []byte{3, 'a', byte(c), 'b', 0}
		if got, want := AppendPresentation(nil, name), appendPresentationBytewise(nil, name); !bytes.Equal(got, want) {
			t.Errorf("byte %d: %q, want %q", c, got, want)
		}
	}
}

// BenchmarkAppendPresentation: the log's conversion of a query name,
// against the byte-by-byte reference in the same run.
func BenchmarkAppendPresentation(b *testing.B) {
	name := []byte("\x05h1234\x05bench\x00")
	long := []byte("\x0eclients4-fonts\x06google\x03com\x00")
	buf := make([]byte, 0, 256)
	for _, c := range []struct {
		label string
		name  []byte
		f     func(dst, name []byte) []byte
	}{{"short/labels", name, AppendPresentation}, {"short/bytewise", name, appendPresentationBytewise},
		{"long/labels", long, AppendPresentation}, {"long/bytewise", long, appendPresentationBytewise}} {
		b.Run(c.label, func(b *testing.B) {
			for range b.N {
				buf = c.f(buf[:0], c.name)
			}
		})
	}
}
