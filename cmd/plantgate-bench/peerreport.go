package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// printPeerTable prints issue 22's table: the gateway against the two
// hand-written peers and bare Fiber, then the goals with this run's figures.
func printPeerTable(cfg config, med map[string]result, on, off, kept callResult, hwm, hwmT int64) {
	cols := []struct{ name, post, get string }{
		{"gateway", postGateway, getGateway},
		{"Fiber+go-redis", postFiber, getFiber},
		{"nginx+Lua", postNginx, getNginx},
		{"bare Fiber", postCeiling, getCeiling},
	}
	row := func(label string, f func(post, get string) string, get bool) {
		line := fmt.Sprintf("%-30s", label)
		for _, c := range cols {
			name := c.post
			if get {
				name = c.get
			}
			v := "—"
			if _, ok := med[name]; ok {
				v = f(name, name)
			}
			line += fmt.Sprintf(" %15s", v)
		}
		fmt.Println(line)
	}
	rps := func(n, _ string) string { return fmt.Sprintf("%.0f", med[n].rps) }
	cpu := func(n, _ string) string { return fmt.Sprintf("%.1f", med[n].cpuPerOp) }
	red := func(n, _ string) string { return fmt.Sprintf("%.1f", med[n].redisCPU) }
	p99 := func(n, _ string) string { return med[n].p99.Round(10 * time.Microsecond).String() }
	fmt.Println()
	fmt.Printf("%-30s", "issue 22 (medians, same run)")
	for _, c := range cols {
		fmt.Printf(" %15s", c.name)
	}
	fmt.Println()
	row("POST /plants req/s", rps, false)
	row("  server CPU µs per create", cpu, false)
	row("  redis CPU µs per create", red, false)
	row(fmt.Sprintf("  p99 at %d connections", cfg.connections), p99, false)
	row("GET /plants/{id} req/s", rps, true)
	row("  server CPU µs per read", cpu, true)
	row("  redis CPU µs per read", red, true)
	row(fmt.Sprintf("  p99 at %d connections", cfg.connections), p99, true)

	best := func(a, b string) (result, string) {
		ra, oka := med[a]
		rb, okb := med[b]
		switch {
		case oka && (!okb || ra.rps >= rb.rps):
			return ra, a
		case okb:
			return rb, b
		}
		return result{}, ""
	}
	bp, bpName := best(postFiber, postNginx)
	bg, bgName := best(getFiber, getNginx)
	create, read := med[postGateway], med[getGateway]
	fmt.Println()
	fmt.Printf("%-46s %-34s %s\n", "goal", "now", "want")
	goal := func(name, now, want string) { fmt.Printf("%-46s %-34s %s\n", name, now, want) }
	if bpName != "" {
		goal("POST gateway ÷ best peer ("+peerShort(bpName)+")", fmt.Sprintf("%.2f", create.rps/bp.rps), "≥ 1.05")
		goal("GET gateway ÷ best peer ("+peerShort(bgName)+")", fmt.Sprintf("%.2f", read.rps/bg.rps), "≥ 1.05")
		goal("gateway CPU per create / read", fmt.Sprintf("%.1f / %.1f µs", create.cpuPerOp, read.cpuPerOp),
			fmt.Sprintf("≤ the best peer's (%.1f / %.1f µs)", min(med[postFiber].cpuPerOp, orInf(med, postNginx)), min(med[getFiber].cpuPerOp, orInf(med, getNginx))))
		goal(fmt.Sprintf("p99 at %d connections, create", cfg.connections), create.p99.Round(10*time.Microsecond).String(),
			"≤ the best peer's ("+bp.p99.Round(10*time.Microsecond).String()+")")
	}
	call := func(r callResult) string {
		return fmt.Sprintf("%.2f µs (CPU %.2f), %d allocs", float64(r.perCall)/1e3, float64(r.cpu)/1e3, r.allocs)
	}
	goal("bearer-auth call, interruption on", call(on), "≤ 1 µs")
	goal("  the same, interruption off", call(off), "")
	goal("  a busy token's request, decision kept", call(kept), "(the chain, no call)")
	goal("peak RSS (VmHWM), default flags", fmt.Sprintf("%.1f MiB", float64(hwm)/1024), "≤ 96 MiB")
	goal("  the gateway with interrupt off", fmt.Sprintf("%.1f MiB", float64(hwmT)/1024), "")
	goal("allocations per create / read on the gateway", fmt.Sprintf("%.0f / %.0f", create.allocs, read.allocs), "")
}

func peerShort(name string) string {
	_, s, _ := strings.Cut(name, ": ")
	return strings.TrimSuffix(s, " peer")
}

// orInf is the CPU per request of a load, +Inf when the run left it out.
func orInf(med map[string]result, name string) float64 {
	if r, ok := med[name]; ok {
		return r.cpuPerOp
	}
	return 1e308
}

// printNginxErrors prints the end of the nginx peer's error log.
func printNginxErrors(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "nginx", "error.log"))
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	for _, l := range lines {
		fmt.Fprintln(os.Stderr, "nginx peer log:", l)
	}
}
