package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"
)

// TestVersion runs `plantgate --version` on a binary stamped as `make build`
// stamps it, built with GOFLAGS=-buildvcs=false: the stamp names the
// release and the commit.
func TestVersion(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := plantgateCLI(t, "--version")
	want := "plantgate version " + testVersion + " (commit " + testRevision + ", " + runtime.Version() + ")\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q; want exit 0, stdout %q", code, stdout, stderr, want)
	}
}

// TestEveryFlagAndCommandHasUsage walks the command tree: a newcomer's
// `--help` describes every command and flag.
func TestEveryFlagAndCommandHasUsage(t *testing.T) {
	t.Parallel()
	var walk func(path string, c *cli.Command)
	walk = func(path string, c *cli.Command) {
		if c.Usage == "" {
			t.Errorf("command %q has no Usage", path)
		}
		for _, f := range c.Flags {
			if d, ok := f.(cli.DocGenerationFlag); !ok || d.GetUsage() == "" {
				t.Errorf("flag --%s of %q has no Usage", f.Names()[0], path)
			}
		}
		for _, sub := range c.Commands {
			walk(path+" "+sub.Name, sub)
		}
	}
	walk("plantgate", newApp())
}

// TestUnknownCommand: a mistyped command names the ones that exist, at
// every level of the tree, and exits 2 (a usage error).
func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serv"}, "plantgate: unknown command \"serv\": the commands are serve, token, webhook, plugin (plantgate --help describes them)\n"},
		{[]string{"token", "craete"}, "plantgate: unknown command \"token craete\": the commands are create, list, revoke (plantgate token --help describes them)\n"},
	} {
		stdout, stderr, code := plantgateCLI(t, tc.args...)
		if code != 2 || stderr != tc.want || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2, stderr %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

// TestStoreCommandsWithoutRedisURL: token and webhook commands without a
// store say where the embedded store lives and how to get a token for it,
// rather than acting on a store that vanishes when they exit.
func TestStoreCommandsWithoutRedisURL(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"token", "create", "--name", "ci"},
		{"token", "list"},
		{"webhook", "list"},
	} {
		stdout, stderr, code := plantgateCLI(t, args...)
		if code != 1 || stdout != "" || stderr != "plantgate: "+errNoStore.Error()+"\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, code, stdout, stderr, errNoStore)
		}
	}
	for _, want := range []string{"inside `plantgate serve`", "--bootstrap-token", "PLANTGATE_BOOTSTRAP_TOKEN", "make run", "--redis-url"} {
		if !strings.Contains(errNoStore.Error(), want) {
			t.Errorf("the message lacks %q: %s", want, errNoStore)
		}
	}
}

// TestJSONLogsOnly: with --log-format json every line on stderr is JSON,
// go-redis's own complaints about a store it cannot reach included.
func TestJSONLogsOnly(t *testing.T) {
	t.Parallel()
	g := launchGateway(t, nil, "--redis-url", "redis://127.0.0.1:"+freePort(t), "--insecure-no-auth", "--log-format", "json")
	// go-redis's pool logs each failed dial; the gateway's retry (every
	// second) makes one after start-up.
	waitFor(t, g, `"msg":"serving"`)
	waitFor(t, g, "failed to dial")
	g.stop(t)
	lines := strings.Split(strings.TrimSpace(g.stderr.String()), "\n")
	for _, line := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("not JSON: %s", line)
		}
	}
}

// TestStoreCommandOneMessage: a one-shot command that cannot reach its
// store says so once, as plantgate's own line; go-redis's pool lines
// ("redis: … pool.go:… failed to dial", twice) do not precede it.
func TestStoreCommandOneMessage(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	for _, args := range [][]string{{"token", "list"}, {"webhook", "list"}} {
		stdout, stderr, code := plantgateCLI(t, append(args, "--redis-url", "redis://127.0.0.1:"+port)...)
		want := "plantgate: open redis store at 127.0.0.1:" + port + ": ping redis: 50301: plant store unavailable: dial tcp 127.0.0.1:" + port + ": connect: connection refused\n"
		if code != 1 || stdout != "" || stderr != want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, code, stdout, stderr, want)
		}
	}
}
