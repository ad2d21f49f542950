package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// A loadSpec is one load of a round: a workload against a target. Its
// ratio is against the load named by ceiling ("" for a ceiling itself).
// A new row is one more entry in loadSpecs.
type loadSpec struct {
	name    string
	target  func(*env) *proc
	work    workload
	ceiling string
}

// Names of the loads the issue 14 figures are computed from.
const (
	postCeiling = "ceiling: bare Fiber, POST echo"
	postGateway = "POST /plants: 2 plugins + Redis (AOF)"
	getCeiling  = "ceiling: bare Fiber, GET plant"
	getGateway  = "GET /plants/{id}: bearer-auth + Redis"
	postFiber   = "POST /plants: Fiber + go-redis peer"
	postNginx   = "POST /plants: nginx + Lua peer"
	getFiber    = "GET /plants/{id}: Fiber + go-redis peer"
	getNginx    = "GET /plants/{id}: nginx + Lua peer"
)

// The loads of a round, in the order each round runs them. A load whose
// target is nil in this run (the limiter without -rate-limit) is skipped.
var loadSpecs = []loadSpec{
	{postCeiling, func(e *env) *proc { return e.echo }, createLoad, ""},
	{postGateway, func(e *env) *proc { return e.gateway }, createLoad, postCeiling},
	// Right after the chain without it, and its ratio is to that chain:
	// issue 13's target is within 10%.
	{"chain + rate-limit (limit never reached)", func(e *env) *proc { return e.limited }, createLoad, postGateway},
	{"POST /plants, interrupt off", func(e *env) *proc { return e.trusted }, createLoad, postCeiling},
	// The same gateway and store with no plugin at all: what the HTTP and
	// store path alone reach on this machine, the ceiling the plugins'
	// cost is read against.
	{"POST /plants, no plugins (store path)", func(e *env) *proc { return e.bare }, createLoad, postCeiling},
	// The services a user would write instead (issue 22).
	{postFiber, func(e *env) *proc { return e.fiberPeer }, createLoad, postCeiling},
	{postNginx, func(e *env) *proc { return e.nginxPeer }, createLoad, postCeiling},
	{getCeiling, func(e *env) *proc { return e.echo }, readLoad, ""},
	{getGateway, func(e *env) *proc { return e.gateway }, readLoad, getCeiling},
	{"GET /plants/{id}, no plugins (store path)", func(e *env) *proc { return e.bare }, readLoad, getCeiling},
	{getFiber, func(e *env) *proc { return e.fiberPeer }, readLoad, getCeiling},
	{getNginx, func(e *env) *proc { return e.nginxPeer }, readLoad, getCeiling},
}

func init() { loadSpecs = append(loadSpecs, oidcSpecs()...) }

// activeSpecs are the loads this run has a target for.
func activeSpecs(e *env) []loadSpec {
	var specs []loadSpec
	for _, ls := range loadSpecs {
		if ls.target(e) != nil {
			specs = append(specs, ls)
		}
	}
	return specs
}

// compare runs the rounds, each every load of loadSpecs in turn, then the
// plugin call in this process, and prints medians: the loads' table, then
// issue 14's figures.
func compare(ctx context.Context, cfg config, e *env) error {
	fmt.Printf("plantgate-bench: %d CPUs, %d connections, %d wrk threads, %s per load, %d rounds (medians); wrk, redis-server and the servers share the machine; load average %s\n",
		runtime.NumCPU(), cfg.connections, cfg.threads, cfg.duration, cfg.rounds, loadAverage())
	specs := activeSpecs(e)
	runs := make([][]result, len(specs))
	for round := range cfg.rounds {
		line := fmt.Sprintf("  round %d:", round+1)
		for i, ls := range specs {
			// Each create load counts ids from its own offset.
			offset := int64(round*len(specs)+i+1) * 1e11
			stopProfile := func() error { return nil }
			if cfg.profile != "" && round == 0 && ls.name == postGateway {
				stopProfile = startProfile(ctx, cfg, ls.target(e))
			}
			r, err := load(ctx, cfg, e, ls.target(e), ls.work, offset, cfg.duration)
			if perr := stopProfile(); err == nil && perr != nil {
				err = perr
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, ls.name, err)
			}
			runs[i] = append(runs[i], r)
			line += fmt.Sprintf(" %.0f", r.rps)
		}
		fmt.Println(line + " req/s (in the table's order)")
	}
	med := map[string]result{}
	for i, ls := range specs {
		med[ls.name] = median(runs[i])
	}
	on, off, err := pluginCalls(ctx, cfg)
	if err != nil {
		return fmt.Errorf("plugin call: %w", err)
	}
	kept, err := keptCall(ctx, cfg)
	if err != nil {
		return fmt.Errorf("kept decision: %w", err)
	}
	hwm, err := memKiB(e.gateway.pid(), "VmHWM")
	if err != nil {
		return err
	}
	hwmT, err := memKiB(e.trusted.pid(), "VmHWM")
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("%-40s %8s %9s %9s %11s %9s %10s %8s %7s\n", "", "req/s", "p50", "p99", "CPU µs/req", "redis µs", "allocs/req", "ratio", "errors")
	for _, ls := range specs {
		r, ratio := med[ls.name], "—"
		if ls.ceiling != "" {
			ratio = fmt.Sprintf("%.1f%%", 100*r.rps/med[ls.ceiling].rps)
		}
		allocs := "—"
		if r.allocs >= 0 {
			allocs = fmt.Sprintf("%.0f", r.allocs)
		}
		fmt.Printf("%-40s %8.0f %9s %9s %11.1f %9.1f %10s %8s %7d\n", ls.name, r.rps, r.p50.Round(time.Microsecond),
			r.p99.Round(time.Microsecond), r.cpuPerOp, r.redisCPU, allocs, ratio, r.errors)
	}
	printPeerTable(cfg, med, on, off, kept, hwm, hwmT)
	printOIDC(med)
	fmt.Printf("\ngateway start to ready, warm cache: %s; load average at the end: %s\n", e.coldStart.Round(time.Millisecond), loadAverage())
	fmt.Println("ratio: req/s against the ceiling in the same run; CPU: the server process only (user+system);")
	fmt.Println("redis µs: redis-server's CPU per request in the same load (it shares the machine);")
	fmt.Println("allocs/req: the gateway's go_memstats_mallocs_total delta over wrk's requests; plugin call: in this process;")
	fmt.Println("nginx's CPU is its master's and workers' summed")
	var worst result
	for i := range specs {
		for _, r := range runs[i] {
			worst.errors += r.errors
		}
	}
	if worst.errors > 0 {
		printProblems(e.gwLog.Name())
		printProblems(e.trLog.Name())
		if e.lmLog != nil {
			printProblems(e.lmLog.Name())
		}
		if e.bareLog != nil {
			printProblems(e.bareLog.Name())
		}
		if e.oidcLog != nil {
			printProblems(e.oidcLog.Name())
		}
	}
	for _, ls := range specs {
		if med[ls.name].errors > 0 {
			if ls.target(e) == e.nginxPeer {
				printNginxErrors(e.dir)
			}
			return fmt.Errorf("%s: %d requests answered with an error (median of the rounds)", ls.name, med[ls.name].errors)
		}
	}
	return nil
}

// loadAverage is /proc/loadavg's first three fields: how busy the shared
// machine was.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// printProblems prints the first few warnings and errors of the gateway's
// log, which is deleted with the run's directory.
func printProblems(logPath string) {
	f, err := os.Open(logPath)
	if err != nil {
		return
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() && n < 5 {
		var line struct{ Level string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && (line.Level == "WARN" || line.Level == "ERROR") {
			fmt.Fprintln(os.Stderr, "gateway log:", sc.Text())
			n++
		}
	}
}

// median returns the result with the median req/s; p50, p99 and CPU are
// each their own median.
func median(rs []result) result {
	mid := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return result{
		rps:      mid(func(r result) float64 { return r.rps }),
		p50:      time.Duration(mid(func(r result) float64 { return float64(r.p50) })),
		p99:      time.Duration(mid(func(r result) float64 { return float64(r.p99) })),
		cpuPerOp: mid(func(r result) float64 { return r.cpuPerOp }),
		redisCPU: mid(func(r result) float64 { return r.redisCPU }),
		requests: int64(mid(func(r result) float64 { return float64(r.requests) })),
		allocs:   mid(func(r result) float64 { return r.allocs }),
		errors:   int64(mid(func(r result) float64 { return float64(r.errors) })),
	}
}

// soak loads the gateway for cfg.soak and prints one row per interval: the
// load's figures, the gateway's RSS and the plugins' guest linear memory,
// which the gateway logs every --stats-interval ("plugin stats" lines).
func soak(ctx context.Context, cfg config, e *env) error {
	fmt.Printf("plantgate-bench soak: %s of load on the gateway, a row every %s, %d connections; the machine is shared\n\n",
		cfg.soak, cfg.interval, cfg.connections)
	fmt.Printf("%8s %10s %10s %10s %10s %10s %14s\n", "elapsed", "req/s", "p99", "CPU µs/req", "RSS MiB", "HWM MiB", "guest mem MiB")
	start := time.Now()
	for i := int64(0); time.Since(start) < cfg.soak; i++ {
		r, err := load(ctx, cfg, e, e.gateway, createLoad, (i+1)*1e11, cfg.interval)
		if err != nil {
			return err
		}
		rss, err1 := memKiB(e.gateway.pid(), "VmRSS")
		hwm, err2 := memKiB(e.gateway.pid(), "VmHWM")
		if err1 != nil || err2 != nil {
			return fmt.Errorf("read gateway memory: %v %v", err1, err2)
		}
		guest := guestMemory(e.gwLog.Name())
		fmt.Printf("%8s %10.0f %10s %10.1f %10.1f %10.1f %14s\n", time.Since(start).Round(time.Second), r.rps,
			r.p99.Round(time.Microsecond), r.cpuPerOp, float64(rss)/1024, float64(hwm)/1024, guest)
		if r.errors > 0 {
			printProblems(e.gwLog.Name())
			return fmt.Errorf("the gateway answered %d requests with an error", r.errors)
		}
	}
	return nil
}

// guestMemory sums, over plugins, the memory_bytes of each plugin's last
// "plugin stats" log line.
func guestMemory(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return "?"
	}
	defer f.Close()
	last := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Msg    string `json:"msg"`
			Plugin string `json:"plugin"`
			Memory int64  `json:"memory_bytes"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "plugin stats" {
			last[line.Plugin] = line.Memory
		}
	}
	if len(last) == 0 {
		return "?"
	}
	var sum int64
	for _, v := range last {
		sum += v
	}
	return fmt.Sprintf("%.1f", float64(sum)/(1<<20))
}
