// Package assemblyscript_test checks the AssemblyScript kit's copy of the
// ABI's constants (assembly/abi.ts, written by hand: the kit links no Go)
// against sdk/abi, the host's own definition, so the two cannot drift.
package assemblyscript_test

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/plantgate/plantgate/sdk/abi"
)

func TestConstantsMatchSDKABI(t *testing.T) {
	src, err := os.ReadFile("assembly/abi.ts")
	if err != nil {
		t.Fatal(err)
	}
	// export const NAME: type = value;  (value: an integer, or an
	// expression of earlier constants for MAX_DECISION)
	re := regexp.MustCompile(`(?m)^export const ([A-Z_]+): [a-z0-9]+ = ([^;]+);`)
	got := map[string]int64{}
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		v := strings.ReplaceAll(m[2], "_", "")
		if n, err := strconv.ParseInt(v, 0, 64); err == nil {
			got[m[1]] = n
		}
	}
	want := map[string]int64{
		"ABI_VERSION":         int64(abi.Version),
		"PHASE_AUTHORIZE":     int64(abi.PhaseAuthorize),
		"PHASE_VALIDATE":      int64(abi.PhaseValidate),
		"VERDICT_ALLOW":       int64(abi.VerdictAllow),
		"VERDICT_DENY":        int64(abi.VerdictDeny),
		"VERDICT_FAULT":       int64(abi.VerdictFault),
		"DECISION_HEADERS":    int64(abi.DecisionHeaders),
		"DECISION_HEADER":     abi.DecisionHeader,
		"MAX_HEADER_BLOCK":    abi.MaxHeaderBlock,
		"MAX_TEXT":            abi.MaxText,
		"MAX_LOG":             abi.MaxLog,
		"MAX_HEADER_VALUE":    abi.MaxHeaderValue,
		"PLUGIN_CODE_MIN":     abi.PluginCodeMin,
		"LOG_DEBUG":           int64(abi.LogDebug),
		"LOG_INFO":            int64(abi.LogInfo),
		"LOG_WARN":            int64(abi.LogWarn),
		"LOG_ERROR":           int64(abi.LogError),
		"DIGEST_SIZE":         abi.DigestSize,
		"LOOKUP_NOT_FOUND":    int64(abi.LookupNotFound),
		"LOOKUP_UNAVAILABLE":  int64(abi.LookupUnavailable),
		"LOOKUP_BAD_ARGUMENT": int64(abi.LookupBadArgument),
		"MAX_KV_KEY":          abi.MaxKVKey,
		"MAX_KV_VALUE":        abi.MaxKVValue,
		"KV_BUDGET":           abi.KVBudget,
		"MAX_KV_TTL":          abi.MaxKVTTL,
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("assembly/abi.ts has no integer constant %s (sdk/abi: %d)", name, w)
		} else if g != w {
			t.Errorf("assembly/abi.ts: %s = %d, sdk/abi says %d", name, g, w)
		}
	}
	if !strings.Contains(string(src), "export const MAX_DECISION: i32 = DECISION_HEADER + 4 + MAX_HEADER_BLOCK + MAX_TEXT;") ||
		abi.MaxDecision != abi.DecisionHeader+4+abi.MaxHeaderBlock+abi.MaxText {
		t.Errorf("MAX_DECISION is no longer DECISION_HEADER + 4 + MAX_HEADER_BLOCK + MAX_TEXT on both sides")
	}
	headers := `["` + strings.Join(abi.ResponseHeaders[:], `", "`) + `"]`
	if !strings.Contains(string(src), "RESPONSE_HEADERS: StaticArray<string> = "+headers+";") {
		t.Errorf("assembly/abi.ts: RESPONSE_HEADERS is not %s", headers)
	}
	// The KV errors and the deny codes live beside their API.
	for file, consts := range map[string][]string{
		"assembly/kv.ts": {
			"NOT_FOUND = " + strconv.FormatInt(abi.KVNotFound, 10),
			"UNAVAILABLE = " + strconv.FormatInt(abi.KVUnavailable, 10),
			"BAD_ARGUMENT = " + strconv.FormatInt(abi.KVBadArgument, 10),
			"OVER_BUDGET = " + strconv.FormatInt(abi.KVOverBudget, 10),
		},
	} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range consts {
			if !strings.Contains(string(b), c+",") {
				t.Errorf("%s lacks %q", file, c)
			}
		}
	}
}
