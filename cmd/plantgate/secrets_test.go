package main

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// redisWithPassword starts a redis-server that requires password. It is
// set after start, since redistest's readiness PING is unauthenticated.
func redisWithPassword(t *testing.T, password string) *redistest.Server {
	t.Helper()
	srv := redistest.Start(t)
	rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if err := rc.ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestAdminServesNoArgv: argv may hold the bootstrap token or a Redis
// password (anyone may pass them as flags); the profiler on the admin
// listener serves no argv (/debug/pprof/cmdline is 404) and no page it
// serves shows either secret.
func TestAdminServesNoArgv(t *testing.T) {
	t.Parallel()
	const token, password = "argv-bootstrap-token-0123456789", "argv-redis-password-0123456789"
	srv := redisWithPassword(t, password)
	admin := "127.0.0.1:" + freePort(t)
	g := startGateway(t, nil, "--redis-url", "redis://:"+password+"@"+srv.Addr()+"/0", "--bootstrap-token", token,
		"--plugins", pluginsDir(t, "10-bearer-auth.wasm"), "--admin-listen", admin, "--pprof")
	if status, body := post(t, g.base, token, `{"id":1,"name":"Fern"}`); status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	if status, body, _ := get(t, "http://"+admin+"/debug/pprof/cmdline"); status != 404 {
		t.Fatalf("/debug/pprof/cmdline: %d %q, want 404", status, body)
	}
	for _, page := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/goroutine?debug=2",
		"/debug/pprof/heap?debug=1", "/debug/pprof/allocs?debug=1", "/debug/pprof/threadcreate?debug=1",
		"/debug/pprof/block?debug=1", "/debug/pprof/mutex?debug=1", "/debug/pprof/symbol", "/metrics", "/healthz", "/readyz"} {
		status, body, _ := get(t, "http://"+admin+page)
		if status != 200 {
			t.Errorf("%s: %d", page, status)
		}
		if strings.Contains(body, token) || strings.Contains(body, password) {
			t.Errorf("%s shows a secret", page)
		}
	}
	g.stop(t)
	if l := g.stderr.String(); strings.Contains(l, token) || strings.Contains(l, password) {
		t.Fatalf("the log holds a secret:\n%s", l)
	}
}

// TestSecretsFromFiles: the bootstrap token and the Redis password come
// from files (a container's mounted secrets), so argv holds neither, and
// serve and the token commands read them the same way.
func TestSecretsFromFiles(t *testing.T) {
	t.Parallel()
	const token, password = "file-bootstrap-token-0123456789", "file-redis-password-0123456789"
	srv := redisWithPassword(t, password)
	dir := t.TempDir()
	tokenFile := writeFile(t, filepath.Join(dir, "token"), token+"\n")
	passwordFile := writeFile(t, filepath.Join(dir, "password"), password+"\r\n")
	g := startGateway(t, []string{"PLANTGATE_REDIS_PASSWORD_FILE=" + passwordFile},
		"--redis-url", srv.URL(), "--bootstrap-token-file", tokenFile, "--plugins", pluginsDir(t, "10-bearer-auth.wasm"))
	if status, body := post(t, g.base, token, `{"id":1,"name":"Fern"}`); status != 200 || body != `{"name":"Fern"}` {
		t.Fatalf("create with the token from the file: %d %s\n%s", status, body, g.stderr)
	}
	argv, err := os.ReadFile("/proc/" + strconv.Itoa(g.cmd.Process.Pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(argv), token) || strings.Contains(string(argv), password) {
		t.Fatalf("argv holds a secret: %q", argv)
	}
	out, errOut, code := plantgateCLI(t, "token", "list", "--redis-url", srv.URL(), "--redis-password-file", passwordFile)
	if code != 0 || !strings.Contains(out, "bootstrap") {
		t.Fatalf("token list with the password file: exit %d: %s %s", code, out, errOut)
	}
	// The webhook commands reach the same store the same way.
	out, errOut, code = plantgateCLI(t, "webhook", "add", "--redis-url", srv.URL(), "--redis-password-file", passwordFile, "--url", "http://127.0.0.1:9/plants", "--allow-private")
	if code != 0 || !strings.Contains(out, "whsec_") {
		t.Fatalf("webhook add with the password file: exit %d: %s %s", code, out, errOut)
	}
	cmd := exec.Command(buildBinary(t), "webhook", "list", "--redis-url", srv.URL())
	cmd.Env = append(os.Environ(), "PLANTGATE_REDIS_PASSWORD_FILE="+passwordFile)
	if listed, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(listed), "http://127.0.0.1:9/plants") {
		t.Fatalf("webhook list with PLANTGATE_REDIS_PASSWORD_FILE: %v: %s", err, listed)
	}
	g.stop(t)

	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--bootstrap-token", "a-token-0123456789", "--bootstrap-token-file", tokenFile},
			"--bootstrap-token and --bootstrap-token-file: give one or the other"},
		{[]string{"serve", "--bootstrap-token-file", filepath.Join(dir, "absent")},
			"--bootstrap-token-file: open " + filepath.Join(dir, "absent") + ": no such file or directory"},
		{[]string{"serve", "--bootstrap-token-file", writeFile(t, filepath.Join(dir, "empty"), "\n")},
			"--bootstrap-token-file " + filepath.Join(dir, "empty") + ": empty"},
		{[]string{"serve", "--redis-url", "redis://:" + password + "@127.0.0.1:1/0", "--redis-password-file", passwordFile},
			"--redis-url holds a password and --redis-password-file gives one: give one or the other"},
		{[]string{"serve", "--redis-password-file", passwordFile},
			"--redis-password-file needs --redis-url: the embedded store makes its own password"},
		{[]string{"token", "list", "--redis-url", "redis://:" + password + "@127.0.0.1:1/0", "--redis-password-file", passwordFile},
			"--redis-url holds a password and --redis-password-file gives one: give one or the other"},
		{[]string{"webhook", "list", "--redis-url", "redis://:" + password + "@127.0.0.1:1/0", "--redis-password-file", passwordFile},
			"--redis-url holds a password and --redis-password-file gives one: give one or the other"},
	}
	for _, c := range cases {
		_, errOut, code := runCLI(t, "", c.args...)
		if want := "plantgate: " + c.want + "\n"; code != 1 || errOut != want {
			t.Errorf("%v: exit %d, %q; want 1, %q", c.args, code, errOut, want)
		}
	}
}

// TestNoLogShowsRedisPassword runs serve at debug level against a Redis
// that requires a password, with the right one, a wrong one and a URL that
// does not parse: no line on standard error shows the password in the URL.
func TestNoLogShowsRedisPassword(t *testing.T) {
	t.Parallel()
	const password, wrong = "log-redis-password-0123456789", "log-wrong-password-0123456789"
	srv := redisWithPassword(t, password)
	token := "log-bootstrap-token-0123456789"
	plugins := pluginsDir(t, "10-bearer-auth.wasm")
	secretFree := func(what, logs string) {
		t.Helper()
		for _, s := range []string{password, wrong, url.QueryEscape(password), token} {
			if strings.Contains(logs, s) {
				t.Fatalf("%s: the log shows a secret:\n%s", what, logs)
			}
		}
	}

	g := startGateway(t, []string{"PLANTGATE_LOG_LEVEL=debug", "PLANTGATE_BOOTSTRAP_TOKEN=" + token},
		"--redis-url", "redis://default:"+password+"@"+srv.Addr()+"/0", "--plugins", plugins)
	if status, body := post(t, g.base, token, `{"id":1,"name":"Fern"}`); status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	g.stop(t)
	if !strings.Contains(g.stderr.String(), "level=DEBUG") {
		t.Fatalf("no debug line logged: the test would prove nothing\n%s", g.stderr)
	}
	secretFree("right password", g.stderr.String())

	g = launchGateway(t, []string{"PLANTGATE_LOG_LEVEL=debug", "PLANTGATE_BOOTSTRAP_TOKEN=" + token},
		"--redis-url", "redis://default:"+wrong+"@"+srv.Addr()+"/0", "--plugins", plugins)
	waitFor(t, g, "STORE UNREACHABLE")
	waitFor(t, g, "msg=serving")
	g.stop(t)
	if !strings.Contains(g.stderr.String(), "WRONGPASS") {
		t.Fatalf("the refusal's reason is not logged:\n%s", g.stderr)
	}
	secretFree("wrong password", g.stderr.String())

	g = launchGateway(t, nil, "--redis-url", "redis://default:"+password+"@"+srv.Addr()+":x/0", "--plugins", plugins)
	if code := g.exit(t, 30*time.Second); code != 1 || !strings.Contains(g.stderr.String(), "invalid url") {
		t.Fatalf("malformed url: exit %d\n%s", code, g.stderr)
	}
	secretFree("malformed url", g.stderr.String())
}

// TestHelpSaysWhereSecretsGo: --help of the commands that take secrets says
// to keep them out of argv.
func TestHelpSaysWhereSecretsGo(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"serve", "--help"}, {"token", "--help"}} {
		out, errOut, code := runCLI(t, "", args...)
		if code != 0 || !strings.Contains(out, secretsHelp) {
			t.Errorf("%v: exit %d, no secrets advice:\n%s%s", args, code, out, errOut)
		}
		for _, flag := range []string{"--redis-password-file", "PLANTGATE_REDIS_PASSWORD_FILE"} {
			if !strings.Contains(out, flag) {
				t.Errorf("%v does not mention %s", args, flag)
			}
		}
	}
}
