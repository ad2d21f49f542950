package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A workload is a wrk script; wrk passes it the load's id offset and the
// bearer token as its two arguments.
type workload struct {
	name, script string
	// token is the script's second argument; nil: the bootstrap token.
	token func(*env) string
}

// createLoad posts a NewPlant with an id no other request of the run uses:
// each wrk thread counts from its own base, and each load from its own
// offset (the first script argument), so every create is a real insert.
var createLoad = workload{name: "create", script: `
local counter = 0
local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
function init(args)
  base = tonumber(args[1]) + tid * 100000000
  headers = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. args[2]}
end
function request()
  counter = counter + 1
  local body = '{"id":' .. (base + counter) .. ',"name":"Monstera deliciosa","tag":"tropical"}'
  return wrk.format("POST", "/plants", headers, body)
end
`}

// readLoad gets the seeded plant (seedPlantID) with the bearer token.
var readLoad = workload{name: "read", script: fmt.Sprintf(`
function init(args)
  req = wrk.format("GET", "/plants/%d", {["Authorization"] = "Bearer " .. args[2]})
end
function request()
  return req
end
`, seedPlantID)}

// result is one load's figures.
type result struct {
	rps      float64
	p50, p99 time.Duration
	requests int64
	errors   int64   // non-2xx answers and socket errors
	cpuPerOp float64 // target process CPU µs per request
	redisCPU float64 // redis-server CPU µs per request in the same load
	allocs   float64 // target's heap allocations per request (a gateway's /metrics); -1 unknown
}

// load runs w with wrk against target for d and reads the target's CPU time
// (and, with an admin listener, its allocation count) around it.
func load(ctx context.Context, cfg config, e *env, target *proc, w workload, offset int64, d time.Duration) (result, error) {
	script := filepath.Join(e.dir, w.name+".lua")
	if err := os.WriteFile(script, []byte(w.script), 0o644); err != nil {
		return result{}, err
	}
	mallocs0, err := mallocs(ctx, target)
	if err != nil {
		return result{}, err
	}
	cpu0, err := target.cpuTicks()
	if err != nil {
		return result{}, err
	}
	red0, err := cpuTicks(e.redis.pid())
	if err != nil {
		return result{}, err
	}
	token := e.token
	if w.token != nil {
		token = w.token(e)
	}
	cmd := exec.CommandContext(ctx, cfg.wrk, "-t", strconv.Itoa(cfg.threads), "-c", strconv.Itoa(cfg.connections),
		"-d", fmt.Sprintf("%ds", int(d.Seconds())), "--latency", "-s", script,
		"http://"+target.addr, "--", strconv.FormatInt(offset, 10), token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return result{}, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	cpu1, err := target.cpuTicks()
	if err != nil {
		return result{}, err
	}
	red1, err := cpuTicks(e.redis.pid())
	if err != nil {
		return result{}, err
	}
	mallocs1, err := mallocs(ctx, target)
	if err != nil {
		return result{}, err
	}
	r, err := parseWrk(string(out))
	if err != nil {
		return result{}, fmt.Errorf("%w\n%s", err, out)
	}
	r.allocs = -1
	if r.requests > 0 && mallocs0 >= 0 {
		r.allocs = float64(mallocs1-mallocs0) / float64(r.requests)
	}
	if r.requests > 0 {
		r.cpuPerOp = float64(cpu1-cpu0) * 1e6 / clockTicks / float64(r.requests)
		r.redisCPU = float64(red1-red0) * 1e6 / clockTicks / float64(r.requests)
	}
	return r, nil
}

var (
	reRPS      = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	reRequests = regexp.MustCompile(`(?m)^\s*([0-9]+) requests in`)
	reNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: ([0-9]+)`)
	reSocket   = regexp.MustCompile(`Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)`)
	rePct      = regexp.MustCompile(`(?m)^\s+(50|99)(?:\.000)?%\s+([0-9.]+)(us|ms|s)\s*$`)
)

func parseWrk(out string) (result, error) {
	var r result
	m := reRPS.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("wrk output has no Requests/sec")
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	if m = reRequests.FindStringSubmatch(out); m != nil {
		r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m = reNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.errors += n
	}
	if m = reSocket.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			r.errors += n
		}
	}
	for _, m := range rePct.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[m[3]]
		d := time.Duration(v * float64(unit))
		if m[1] == "50" {
			r.p50 = d
		} else {
			r.p99 = d
		}
	}
	return r, nil
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpuTicks is the process's utime+stime in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is parenthesized and may hold spaces.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseInt(fields[11], 10, 64)
	st, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return u + st, nil
}

// memKiB reads a "VmXxx:  N kB" line of /proc/<pid>/status.
func memKiB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// mallocs is the target's cumulative heap allocation count, from the Go
// collector's go_memstats_mallocs_total on its admin /metrics; -1 for a
// target without an admin listener. The scrape's own allocations (a few
// thousand) are in the next delta: noise against a load's requests.
func mallocs(ctx context.Context, p *proc) (int64, error) {
	if p.admin == "" {
		return -1, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, fmt.Errorf("read allocations: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_mallocs_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("no go_memstats_mallocs_total on %s/metrics", p.admin)
}
