package redis

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestScriptsDeclareTheirKeys: every key a script touches is one of its
// KEYS, or a local taken straight from KEYS. Redis Cluster routes a script
// by its declared keys and Redis requires them declared; a key built from
// ARGV runs on a single node and in a cluster slot check alike, and breaks
// only when the keys move, so it is checked here, on the source.
func TestScriptsDeclareTheirKeys(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	var (
		localKeys = regexp.MustCompile(`local\s+([\w\s,]+?)\s*=\s*([^\n]+)`)
		forKeys   = regexp.MustCompile(`for\s+\w+\s*,\s*(\w+)\s+in\s+ipairs\(KEYS\)`)
		call      = regexp.MustCompile(`redis\.call\('(\w+)',\s*([^,)]+)`)
	)
	calls := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		code := stripLuaComments(string(src))
		fromKeys := map[string]bool{}
		for _, m := range localKeys.FindAllStringSubmatch(code, -1) {
			names, exprs := strings.Split(m[1], ","), strings.Split(m[2], ",")
			for i, n := range names {
				if i < len(exprs) && strings.HasPrefix(strings.TrimSpace(exprs[i]), "KEYS[") {
					fromKeys[strings.TrimSpace(n)] = true
				}
			}
		}
		for _, m := range forKeys.FindAllStringSubmatch(code, -1) {
			fromKeys[m[1]] = true
		}
		for _, m := range call.FindAllStringSubmatch(code, -1) {
			calls++
			arg := strings.TrimSpace(m[2])
			if !strings.HasPrefix(arg, "KEYS[") && !fromKeys[arg] {
				t.Errorf("%s: redis.call('%s', %s …): the key is not declared in KEYS", file, m[1], arg)
			}
		}
	}
	if calls < 20 {
		t.Fatalf("found only %d redis.call in %d scripts: the pattern is broken", calls, len(files))
	}
}

func stripLuaComments(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
