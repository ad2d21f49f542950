package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/plantgate/plantgate/host/redis/redistest"
)

// The faults the nemesis injects, one at a time, each healed (cluster
// healthy, every replica's AOF rewrite done, every gateway ready) before
// the next.
const (
	faultKillPrimary  = "kill -9 a primary (failover), restart it (rejoins as replica)"
	faultKillPromoted = "kill -9 a primary, then the promoted replica once the old primary rejoined"
	faultPausePrimary = "SIGSTOP a primary past cluster-node-timeout, then SIGCONT"
	faultRestartNode  = "kill -9 a node and restart it at once from its AOF"
	faultKillGateway  = "kill -9 a gateway mid-request, restart it"
	faultKillReplica  = "kill -9 a replica for 3 s (WAIT 1 cannot be met on its shard)"
)

var faultKinds = []string{faultKillPrimary, faultKillPromoted, faultPausePrimary, faultRestartNode, faultKillGateway, faultKillReplica}

// fault is one injected fault and what it took to recover.
type fault struct {
	kind     string
	target   string
	from, to int64 // ns since start: injected, and healed
	recovery time.Duration
	note     string
}

type nemesis struct {
	kinds  []string // the faults drawn from: faultKinds less -skip-pause
	env    *env
	cl     *redistest.Cluster
	rng    *rand.Rand
	rec    *recorder
	faults []fault
}

// run injects faults drawn from the seeded source until the deadline. The
// draw depends on the seed only: the kind and an index into the sorted
// primaries (by first slot), replicas or gateways.
func (n *nemesis) run(ctx context.Context, until time.Time) error {
	sleepCtx(ctx, 3*time.Second) // a fault-free start, the baseline
	// No fault starts in the last lastFault of the run: the longest one
	// (a primary and then the promoted one killed) takes about that long,
	// so the run ends near its duration.
	for time.Until(until) > lastFault && ctx.Err() == nil {
		kind := n.kinds[n.rng.IntN(len(n.kinds))]
		pick := n.rng.IntN(6)
		if err := n.inject(ctx, kind, pick); err != nil {
			return err
		}
		sleepCtx(ctx, time.Duration(1000+n.rng.IntN(2000))*time.Millisecond)
	}
	sleepCtx(ctx, time.Until(until))
	return nil
}

const lastFault = 15 * time.Second

func (n *nemesis) inject(ctx context.Context, kind string, pick int) error {
	f := fault{kind: kind, from: n.rec.now()}
	start := time.Now()
	var err error
	switch kind {
	case faultKillPrimary, faultKillPromoted:
		err = n.killPrimary(ctx, &f, pick, kind == faultKillPromoted)
	case faultPausePrimary:
		err = n.pausePrimary(&f, pick)
	case faultRestartNode:
		s := n.cl.Nodes[pick%len(n.cl.Nodes)]
		f.target = n.role(s)
		s.Kill()
		err = s.Relaunch()
	case faultKillGateway:
		g := n.env.gws[pick%len(n.env.gws)]
		f.target = fmt.Sprintf("gateway %d", g.i)
		g.kill()
		time.Sleep(500 * time.Millisecond) // requests meanwhile find it gone
		err = g.start(ctx)
	case faultKillReplica:
		err = n.killReplica(&f, pick)
	}
	if err == nil {
		err = n.heal(ctx)
	}
	f.to, f.recovery = n.rec.now(), time.Since(start)
	n.faults = append(n.faults, f)
	fmt.Printf("  fault %2d at %6.1fs: %s [%s] recovered in %v %s\n", len(n.faults), float64(f.from)/1e9, f.kind, f.target, f.recovery.Round(time.Millisecond), f.note)
	return err
}

// role names a node and what it is now, for the report.
func (n *nemesis) role(s *redistest.Server) string {
	ps, _ := n.cl.PrimariesNow(context.Background())
	for _, p := range ps {
		if p == s {
			return "primary " + s.Addr()
		}
	}
	return "replica " + s.Addr()
}

func (n *nemesis) primary(pick int) (*redistest.Server, *redistest.Server, error) {
	ps, err := n.cl.PrimariesNow(context.Background())
	if err != nil || len(ps) == 0 {
		return nil, nil, fmt.Errorf("primaries: %v", err)
	}
	p := ps[pick%len(ps)]
	rs, err := n.cl.ReplicasOfNow(context.Background(), p)
	if err != nil || len(rs) == 0 {
		return nil, nil, fmt.Errorf("replicas of %s: %v", p.Addr(), err)
	}
	return p, rs[0], nil
}

func (n *nemesis) killPrimary(ctx context.Context, f *fault, pick int, thenPromoted bool) error {
	p, r, err := n.primary(pick)
	if err != nil {
		return err
	}
	f.target = "primary " + p.Addr()
	p.Kill()
	t0 := time.Now()
	if err := n.cl.AwaitPrimaryWithin(r, 60*time.Second); err != nil {
		return err
	}
	f.note = fmt.Sprintf("(replica %s serving after %v", r.Addr(), time.Since(t0).Round(time.Millisecond))
	if err := p.Relaunch(); err != nil {
		return err
	}
	if err := n.heal(ctx); err != nil {
		return err
	}
	if thenPromoted {
		f.target += ", then promoted " + r.Addr()
		r.Kill()
		t1 := time.Now()
		if err := n.cl.AwaitPrimaryWithin(p, 60*time.Second); err != nil {
			return err
		}
		f.note += fmt.Sprintf("; old primary serving again after %v", time.Since(t1).Round(time.Millisecond))
		if err := r.Relaunch(); err != nil {
			return err
		}
	}
	f.note += ")"
	return nil
}

func (n *nemesis) pausePrimary(f *fault, pick int) error {
	p, r, err := n.primary(pick)
	if err != nil {
		return err
	}
	f.target = "primary " + p.Addr()
	p.Pause()
	time.Sleep(3 * nodeTimeout)
	p.Resume()
	if err := n.cl.AwaitPrimaryWithin(r, 15*time.Second); err != nil {
		f.note = "(no failover)"
		return nil
	}
	f.note = "(replica " + r.Addr() + " took over)"
	return nil
}

func (n *nemesis) killReplica(f *fault, pick int) error {
	_, r, err := n.primary(pick)
	if err != nil {
		return err
	}
	f.target = "replica " + r.Addr()
	r.Kill()
	time.Sleep(3 * time.Second)
	return r.Relaunch()
}

// heal waits until the cluster is healthy (which includes every AOF
// rewrite done: see redistest.Cluster.WaitHealthy) and every gateway runs.
func (n *nemesis) heal(ctx context.Context) error {
	for _, s := range n.cl.Nodes {
		if !s.Running() {
			if err := s.Relaunch(); err != nil {
				return err
			}
		}
		s.Resume()
	}
	for _, g := range n.env.gws {
		g.mu.Lock()
		down := g.cmd == nil
		g.mu.Unlock()
		if down {
			if err := g.start(ctx); err != nil {
				return err
			}
		}
	}
	return n.cl.WaitHealthyWithin(90 * time.Second)
}

// rewriteWindow injects the sequence Redis 7.0 loses acknowledged writes
// to (host/redis TestWaitReplicasRewriteWindow): a replica restarts and
// full-syncs; its AOF rewrite after the sync is held open; writes are
// acknowledged by it meanwhile; it is killed, then its primary; it comes
// back from its AOF and is promoted.
func (n *nemesis) rewriteWindow(ctx context.Context) error {
	sleepCtx(ctx, 3*time.Second)
	p, r, err := n.primary(0)
	if err != nil {
		return err
	}
	f := fault{kind: "replica restarted, killed during its post-sync AOF rewrite, primary killed (Redis 7.0's window)",
		target: "primary " + p.Addr() + ", replica " + r.Addr(), from: n.rec.now()}
	start := time.Now()
	r.Kill()
	if err := r.Relaunch(); err != nil {
		return err
	}
	var child int
	for deadline := time.Now().Add(30 * time.Second); child == 0; {
		if kids := r.Children(); len(kids) > 0 {
			child = kids[0]
			_ = syscall.Kill(child, syscall.SIGSTOP)
		} else if time.Now().After(deadline) {
			return fmt.Errorf("no AOF rewrite on replica %s within 30s", r.Addr())
		} else {
			time.Sleep(time.Millisecond) // polling another process's children
		}
	}
	sleepCtx(ctx, 3*time.Second) // creates acknowledged by the replica inside the window
	_ = syscall.Kill(r.PID(), syscall.SIGKILL)
	_ = syscall.Kill(child, syscall.SIGKILL)
	r.Kill()
	p.Kill()
	if err := r.Relaunch(); err != nil {
		return err
	}
	if err := n.cl.AwaitPrimaryWithin(r, 60*time.Second); err != nil {
		return err
	}
	if err := p.Relaunch(); err != nil {
		return err
	}
	err = n.heal(ctx)
	f.to, f.recovery = n.rec.now(), time.Since(start)
	n.faults = append(n.faults, f)
	fmt.Printf("  fault 1 at %6.1fs: %s [%s] recovered in %v\n", float64(f.from)/1e9, f.kind, f.target, f.recovery.Round(time.Millisecond))
	return err
}

// probeNetem says whether tc netem can delay loopback here. It tries in a
// network namespace of its own, so the machine's loopback is never touched.
func probeNetem() string {
	out, err := exec.Command("unshare", "-n", "sh", "-c", "ip link set lo up && tc qdisc add dev lo root netem delay 1ms").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("not available here, so no delay or loss is injected (tc in a fresh network namespace: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	return "available, but not injected: the cluster and gateways share the machine's loopback, which other processes use"
}
