package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"
)

// compare runs the rounds, each the ceiling, then the gateway, then the
// gateway with limits.interrupt off, and prints medians.
func compare(ctx context.Context, cfg config, e *env) error {
	fmt.Printf("plantgate-bench: %d CPUs, %d connections, %d wrk threads, %s per load, %d rounds (medians); wrk, redis-server and the servers share the machine\n",
		runtime.NumCPU(), cfg.connections, cfg.threads, cfg.duration, cfg.rounds)
	var ceil, gw, tr, lm []result
	for round := range cfg.rounds {
		c, err := load(ctx, cfg, e, e.echo, 0, cfg.duration)
		if err != nil {
			return fmt.Errorf("round %d, ceiling: %w", round+1, err)
		}
		g, err := load(ctx, cfg, e, e.gateway, int64(2*round+1)*1e11, cfg.duration)
		if err != nil {
			return fmt.Errorf("round %d, gateway: %w", round+1, err)
		}
		if _, err := loadLimited(ctx, cfg, e, 2*round, &lm); err != nil {
			return err
		}
		t, err := load(ctx, cfg, e, e.trusted, int64(2*round+2)*1e11, cfg.duration)
		if err != nil {
			return fmt.Errorf("round %d, gateway with interrupt off: %w", round+1, err)
		}
		fmt.Printf("  round %d: ceiling %.0f req/s, gateway %.0f req/s (%.0f%%), interrupt off %.0f req/s (%.0f%%), errors %d and %d\n",
			round+1, c.rps, g.rps, 100*g.rps/c.rps, t.rps, 100*t.rps/c.rps, g.errors, t.errors)
		ceil, gw, tr = append(ceil, c), append(gw, g), append(tr, t)
	}
	mc, mg, mt := median(ceil), median(gw), median(tr)
	hwm, err := memKiB(e.gateway.pid(), "VmHWM")
	if err != nil {
		return err
	}
	hwmT, err := memKiB(e.trusted.pid(), "VmHWM")
	if err != nil {
		return err
	}
	fmt.Println()
	fmt.Printf("%-38s %8s %9s %9s %11s %9s %8s %7s\n", "", "req/s", "p50", "p99", "CPU µs/req", "redis µs", "ratio", "errors")
	row := func(name string, r result) {
		fmt.Printf("%-38s %8.0f %9s %9s %11.1f %9.1f %7.1f%% %7d\n", name, r.rps, r.p50.Round(time.Microsecond),
			r.p99.Round(time.Microsecond), r.cpuPerOp, r.redisCPU, 100*r.rps/mc.rps, r.errors)
	}
	row("ceiling: bare Fiber echo", mc)
	row("gateway: 2 plugins + Redis (AOF)", mg)
	row("gateway, plugins with interrupt off", mt)
	limitedRow(row, mg, lm)
	fmt.Printf("\ngateway peak RSS (VmHWM):            %.1f MiB (interrupt off: %.1f MiB)\n", float64(hwm)/1024, float64(hwmT)/1024)
	fmt.Printf("gateway start to ready, warm cache:  %s\n", e.coldStart.Round(time.Millisecond))
	fmt.Println("ratio: req/s against the ceiling in the same run; CPU: the server process only (user+system);")
	fmt.Println("redis µs: redis-server's CPU per request in the same load (it shares the machine)")
	var total int64
	for _, r := range append(gw, tr...) {
		total += r.errors
	}
	if total > 0 {
		printProblems(e.gwLog.Name())
		printProblems(e.trLog.Name())
	}
	if mg.errors > 0 || mt.errors > 0 {
		return fmt.Errorf("the gateway answered %d requests (interrupt off: %d) with an error (median of the rounds)", mg.errors, mt.errors)
	}
	return nil
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
		r, err := load(ctx, cfg, e, e.gateway, (i+1)*1e11, cfg.interval)
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
