package authority
import "testing"
func BenchmarkCompile100k(b *testing.B) {
	zones, sets := bigZone(100_000)
	b.ReportAllocs()
	for b.Loop() { Compile(zones, sets, fixtureNow) }
}
