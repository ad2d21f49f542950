package sdktest

import (
	"testing"
	"time"
	"unsafe"
)

// TestCountKeyAliasesPluginBuffer: a plugin passes its key in a buffer it
// reuses (plugins/rate-limit does, as the real host copies it). Counting
// the same key again must not let the map keep that buffer, or the next
// key written into it renames the count (seen as another client denied).
func TestCountKeyAliasesPluginBuffer(t *testing.T) {
	kv := NewKV()
	frozen := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	kv.Now = func() time.Time { return frozen }
	buf := make([]byte, 0, 16)
	key := func(s string) string {
		buf = append(buf[:0], s...)
		return unsafe.String(unsafe.SliceData(buf), len(buf))
	}
	kv.count(key("c:A"), 1, 60_000)
	kv.count(key("c:A"), 1, 60_000)
	if n, _ := kv.count(key("c:B"), 1, 60_000); n != 1 {
		t.Fatalf(`c:B counted %d, want 1`, n)
	}
	if n, _ := kv.count(key("c:A"), 1, 60_000); n != 3 {
		t.Fatalf(`c:A counted %d, want 3: its count was renamed by the reused buffer`, n)
	}
}
